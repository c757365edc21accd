"""run_search: the multi-fidelity, multi-objective search loop (thesis Sec. 4.4) with resume.

The loop asks a strategy (SMAC or random) for trials, runs them through a pool (in-process or
Dask), appends each finished trial to trials.csv at once, then tells the strategy. trials.csv is the
source of truth: re-running with the same output_dir replays its trials to the strategy instead of
running them again (a trial is identified by its configuration and budget), so an interrupted
search, SIGKILL included, continues without losing or repeating finished trials.
"""

from __future__ import annotations

import json
import logging
import math
from collections.abc import Collection, Mapping, Sequence
from pathlib import Path
from typing import Any

from ConfigSpace import ConfigurationSpace

from fairnas.search.parallel import TrialPool, open_pool
from fairnas.search.progress import progress_line
from fairnas.io import atomic_path
from fairnas.search.records import RESERVED_COLUMNS, TrialKey, TrialRecord, TrialStore, trial_key
from fairnas.search.result import SETTINGS_FILE, TRIALS_FILE, SearchResult, write_outputs
from fairnas.search.space import KeyValidator, SearchSpace, check_known_keys, load_space
from fairnas.search.strategies import (
    MULTI_OBJECTIVE_ALGORITHMS,
    SCHEDULERS,
    STRATEGIES,
    Proposal,
    RandomStrategy,
    SmacStrategy,
)
from fairnas.search.trial import Target, TrialOutcome, crashed_outcome, evaluate_trial

log = logging.getLogger("fairnas.search")

MAX_REPEATED_PROPOSALS = 100
"""Stop when a strategy proposes only already-finished trials this many times in a row."""

RESUME_INVARIANT_SETTINGS = (
    "strategy",
    "objectives",
    "min_budget",
    "max_budget",
    "eta",
    "scheduler",
    "multi_objective",
    "rho",
    "objective_weights",
    "crash_cost",
    "seed",
    "configspace",
)


def run_search(
    target: Target,
    space: ConfigurationSpace | SearchSpace | str | Path | Mapping[str, Any],
    *,
    objectives: Sequence[str],
    min_budget: float,
    max_budget: float,
    output_dir: str | Path,
    eta: int = 2,
    total_budget: float | None = None,
    n_trials: int | None = None,
    strategy: str = "smac",
    seed: int = 0,
    n_workers: int = 1,
    multi_objective: str = "parego",
    rho: float = 0.05,
    objective_weights: Sequence[float] | None = None,
    scheduler: str = "hyperband",
    dask_address: str | None = None,
    dask_scheduler_file: str | None = None,
    crash_cost: float | Sequence[float] = 1000.0,
    reference_point: Sequence[float] | None = None,
    initial_design_size: int | None = None,
    known_objectives: Collection[str] | None = None,
    known_keys: KeyValidator | None = None,
) -> SearchResult:
    """Search ``space`` for configurations minimising every objective; resume from ``output_dir``.

    ``target(config, seed, budget)`` returns ``{objective: value}``; ``config`` holds the active
    hyperparameters (use ``fairnas.search.config_id(config)`` for a stable id, e.g. to continue a
    promoted configuration from its lower-budget checkpoint). A target that raises (out-of-memory
    included), omits an objective or returns a non-finite value is recorded as crashed with
    ``crash_cost`` per objective. The search stops when ``n_trials`` trials finished, or once
    the summed budget of finished trials reaches ``total_budget`` (trials are launched while
    finished plus running budget is below it, so it is exceeded by at most one trial's budget).
    ``reference_point`` fixes the hypervolume reference (default: worst max-budget value per
    objective plus 10% of its range). Writes trials.csv, pareto_front.csv, pareto_front.png,
    hypervolume.csv, search.json and SMAC's output (smac3/) into ``output_dir``.
    """
    search_space = _as_search_space(space)
    if known_keys is not None:
        check_known_keys(search_space.keys, known_keys)
    configspace = search_space.configspace
    objectives = tuple(objectives)
    costs = _validate(
        objectives=objectives,
        min_budget=min_budget,
        max_budget=max_budget,
        eta=eta,
        total_budget=total_budget,
        n_trials=n_trials,
        strategy=strategy,
        n_workers=n_workers,
        multi_objective=multi_objective,
        rho=rho,
        dask_address=dask_address,
        dask_scheduler_file=dask_scheduler_file,
        objective_weights=objective_weights,
        scheduler=scheduler,
        crash_cost=crash_cost,
        reference_point=reference_point,
        known_objectives=known_objectives,
        hyperparameters=list(search_space.keys),
    )
    settings = {
        "strategy": strategy,
        "objectives": list(objectives),
        "min_budget": float(min_budget),
        "max_budget": float(max_budget),
        "eta": int(eta),
        "scheduler": scheduler,
        "multi_objective": multi_objective,
        "rho": float(rho),
        "objective_weights": None if objective_weights is None else [float(w) for w in objective_weights],
        "crash_cost": costs,
        "seed": int(seed),
        "configspace": configspace.to_serialized_dict(),
    }
    output_dir = Path(output_dir)
    _claim_output_dir(output_dir, settings)

    store = TrialStore(output_dir / TRIALS_FILE, objectives, list(search_space.keys))
    limits = _Limits(n_trials=n_trials, total_budget=total_budget)
    if store.records:
        log.info("resuming search in %s with %d finished trials", output_dir, len(store.records))
    if limits.allow(len(store.records), sum(record.budget for record in store.records)):
        search_strategy = _build_strategy(
            configspace,
            settings,
            n_trials=n_trials,
            total_budget=total_budget,
            initial_design_size=initial_design_size,
            output_dir=output_dir,
        )
        with open_pool(n_workers, dask_address=dask_address, dask_scheduler_file=dask_scheduler_file) as pool:
            _SearchLoop(
                target=target,
                strategy=search_strategy,
                pool=pool,
                store=store,
                limits=limits,
                seed=int(seed),
                max_budget=float(max_budget),
                crash_cost=costs,
                reference_point=reference_point,
            ).run()

    result = SearchResult.from_trials(store.frame(), objectives, max_budget, output_dir)
    write_outputs(result, reference_point, plot=True)
    return result


class _Limits:
    """Stopping rule shared by all strategies: trial count and summed budget."""

    def __init__(self, *, n_trials: int | None, total_budget: float | None):
        self.n_trials = n_trials
        self.total_budget = total_budget

    def allow(self, n_started: int, budget_started: float) -> bool:
        """Whether one more trial may start given finished plus running trials and their budget."""
        if self.n_trials is not None and n_started >= self.n_trials:
            return False
        return self.total_budget is None or budget_started < self.total_budget


class _SearchLoop:
    """Ask/evaluate/record/tell until the limits are reached or the strategy runs dry."""

    def __init__(
        self,
        *,
        target: Target,
        strategy: SmacStrategy | RandomStrategy,
        pool: TrialPool,
        store: TrialStore,
        limits: _Limits,
        seed: int,
        max_budget: float,
        crash_cost: list[float],
        reference_point: Sequence[float] | None,
    ):
        self._target = target
        self._strategy = strategy
        self._pool = pool
        self._store = store
        self._limits = limits
        self._seed = seed
        self._max_budget = max_budget
        self._crash_cost = crash_cost
        self._reference_point = reference_point
        self._finished: dict[TrialKey, TrialRecord] = {record.key: record for record in store.records}
        self._told: set[TrialKey] = set()
        self._running: dict[TrialKey, list[Proposal]] = {}
        self._next_trial_id = max((record.trial_id for record in store.records), default=-1) + 1
        self._exhausted = False

    def run(self) -> None:
        while True:
            self._launch()
            if len(self._pool) == 0:
                return
            (key, trial_id), outcome, error = self._pool.next_finished()
            self._finish(key, trial_id, outcome, error)

    def _launch(self) -> None:
        """Fill free workers with new trials; replay finished ones to the strategy instead of running them."""
        repeated = 0
        while len(self._pool) < self._pool.capacity and not self._exhausted and self._may_start():
            proposal = self._strategy.ask()
            if proposal is None:
                self._exhausted = True
                log.info("the strategy has no new configuration left; stopping")
                return
            key = trial_key(proposal.config, proposal.budget)
            if key in self._finished or key in self._running:
                repeated += key in self._told or key in self._running
                self._share_result(key, proposal)
                if repeated >= MAX_REPEATED_PROPOSALS:
                    self._exhausted = True
                    log.info("%d proposals in a row were finished trials; stopping", repeated)
                continue
            self._replay_unasked_records()
            self._running[key] = [proposal]
            self._pool.submit(
                (key, self._next_trial_id),
                evaluate_trial,
                self._target,
                proposal.config,
                self._seed,
                proposal.budget,
                self._store.objectives,
                self._crash_cost,
            )
            self._next_trial_id += 1
            repeated = 0

    def _may_start(self) -> bool:
        started = len(self._store.records) + len(self._running)
        budget = sum(record.budget for record in self._store.records) + sum(key[1] for key in self._running)
        return self._limits.allow(started, budget)

    def _share_result(self, key: TrialKey, proposal: Proposal) -> None:
        """A proposal for a finished trial gets its recorded result; one for a running trial waits for it."""
        if key in self._running:
            self._running[key].append(proposal)
            return
        self._strategy.tell(proposal, self._finished[key].outcome)
        self._told.add(key)

    def _replay_unasked_records(self) -> None:
        """Tell the strategy every finished trial it has not asked for again (from an earlier run)."""
        for key, record in self._finished.items():
            if key not in self._told:
                self._strategy.tell_record(record)
                self._told.add(key)

    def _finish(self, key: TrialKey, trial_id: int, outcome: TrialOutcome | None, error: BaseException | None) -> None:
        proposals = self._running.pop(key)
        if error is not None:  # the worker itself failed (e.g. killed); evaluate_trial never raises
            outcome = crashed_outcome(self._store.objectives, self._crash_cost, error, wall_time_s=math.nan)
        record = TrialRecord(trial_id, proposals[0].config, proposals[0].budget, self._seed, outcome)
        self._store.append(record)  # durable before anything else
        self._finished[key] = record
        self._told.add(key)
        for proposal in proposals:
            self._strategy.tell(proposal, outcome)
        result = SearchResult.from_trials(
            self._store.frame(), self._store.objectives, self._max_budget, self._store.path.parent
        )
        curve = write_outputs(result, self._reference_point, plot=False)
        log.info(
            progress_line(
                record,
                curve,
                objectives=self._store.objectives,
                n_trials=self._limits.n_trials,
                total_budget=self._limits.total_budget,
            )
        )


def _as_search_space(space: Any) -> SearchSpace:
    if isinstance(space, SearchSpace):
        return space
    if isinstance(space, ConfigurationSpace):
        return SearchSpace(configspace=space, keys={name: name for name in space})
    if isinstance(space, (str, Path, Mapping)):
        return load_space(space)
    raise ValueError(
        f"space must be a ConfigurationSpace, SearchSpace, space-file path or mapping, got {type(space).__name__}"
    )


def _validate(
    *,
    objectives: tuple[str, ...],
    min_budget: float,
    max_budget: float,
    eta: int,
    total_budget: float | None,
    n_trials: int | None,
    strategy: str,
    n_workers: int,
    dask_address: str | None,
    dask_scheduler_file: str | None,
    multi_objective: str,
    rho: float,
    objective_weights: Sequence[float] | None,
    scheduler: str,
    crash_cost: float | Sequence[float],
    reference_point: Sequence[float] | None,
    known_objectives: Collection[str] | None,
    hyperparameters: list[str],
) -> list[float]:
    """Check every argument before any trial runs; return the crash cost per objective."""
    if not objectives or len(set(objectives)) != len(objectives):
        raise ValueError(f"objectives must be a non-empty list of distinct metric names, got {list(objectives)}")
    if RESERVED_COLUMNS & set(objectives):
        raise ValueError(
            f"objective names {sorted(RESERVED_COLUMNS & set(objectives))} are reserved trials.csv columns"
        )
    if known_objectives is not None:
        unknown = [name for name in objectives if name not in known_objectives]
        if unknown:
            raise ValueError(f"unknown objectives {unknown}; the target reports {sorted(known_objectives)}")
    if not 0 < min_budget <= max_budget:
        raise ValueError(
            f"budgets need 0 < min_budget <= max_budget, got min_budget={min_budget}, max_budget={max_budget}"
        )
    if int(eta) != eta or eta < 2:
        raise ValueError(f"eta must be an integer >= 2, got {eta}")
    if n_trials is None and total_budget is None:
        raise ValueError("give n_trials or total_budget (or both) to bound the search")
    if n_trials is not None and n_trials < 1:
        raise ValueError(f"n_trials must be >= 1, got {n_trials}")
    if total_budget is not None and total_budget <= 0:
        raise ValueError(f"total_budget must be > 0, got {total_budget}")
    _check_choice("strategy", strategy, STRATEGIES)
    _check_choice("scheduler", scheduler, tuple(SCHEDULERS))
    _check_choice("multi_objective", multi_objective, MULTI_OBJECTIVE_ALGORITHMS)
    if n_workers < 1:
        raise ValueError(f"n_workers must be >= 1, got {n_workers}")
    if dask_address is not None and dask_scheduler_file is not None:
        raise ValueError("give dask_address or dask_scheduler_file, not both")
    if rho < 0:
        raise ValueError(f"rho must be >= 0, got {rho}")
    if objective_weights is not None:
        if multi_objective != "mean":
            raise ValueError("objective_weights need multi_objective='mean' (ParEGO draws its own weights)")
        if len(objective_weights) != len(objectives) or min(objective_weights) < 0:
            raise ValueError(
                f"objective_weights must be {len(objectives)} non-negative numbers, got {objective_weights}"
            )
    if reference_point is not None and len(reference_point) != len(objectives):
        raise ValueError(f"reference_point has {len(reference_point)} values for objectives {list(objectives)}")
    clashes = sorted(set(hyperparameters) & (RESERVED_COLUMNS | set(objectives)))
    if clashes:
        raise ValueError(f"hyperparameter names {clashes} clash with trials.csv columns; rename them in the space")
    costs = (
        [float(crash_cost)] * len(objectives) if isinstance(crash_cost, (int, float)) else list(map(float, crash_cost))
    )
    if len(costs) != len(objectives) or not all(math.isfinite(cost) for cost in costs):
        raise ValueError(f"crash_cost must be one finite number or one per objective, got {crash_cost}")
    return costs


def _check_choice(argument: str, value: str, allowed: Sequence[str]) -> None:
    if value not in allowed:
        raise ValueError(f"unknown {argument} {value!r}; allowed: {list(allowed)}")


def _claim_output_dir(output_dir: Path, settings: dict[str, Any]) -> None:
    """Record the search settings, or check that an earlier run in ``output_dir`` used the same ones."""
    settings_path = output_dir / SETTINGS_FILE
    settings = json.loads(json.dumps(settings))  # normalise (tuples -> lists) for comparison
    if settings_path.is_file():
        previous = json.loads(settings_path.read_text())
        changed = [name for name in RESUME_INVARIANT_SETTINGS if previous.get(name) != settings[name]]
        if changed:
            raise ValueError(
                f"{output_dir} holds a search with different {changed}; use a new output_dir to change them"
            )
        return
    output_dir.mkdir(parents=True, exist_ok=True)
    with atomic_path(settings_path) as tmp:
        tmp.write_text(json.dumps(settings, indent=2))


def _build_strategy(
    configspace: ConfigurationSpace,
    settings: dict[str, Any],
    *,
    n_trials: int | None,
    total_budget: float | None,
    initial_design_size: int | None,
    output_dir: Path,
) -> SmacStrategy | RandomStrategy:
    if settings["strategy"] == "random":
        return RandomStrategy(configspace, max_budget=settings["max_budget"], seed=settings["seed"])
    # SMAC sizes its initial design from the expected number of trials.
    n_trials_hint = n_trials if n_trials is not None else max(1, int(total_budget // settings["min_budget"]))
    return SmacStrategy(
        configspace,
        objectives=settings["objectives"],
        min_budget=settings["min_budget"],
        max_budget=settings["max_budget"],
        eta=settings["eta"],
        scheduler=settings["scheduler"],
        multi_objective=settings["multi_objective"],
        rho=settings["rho"],
        objective_weights=settings["objective_weights"],
        crash_cost=settings["crash_cost"],
        seed=settings["seed"],
        n_trials_hint=n_trials_hint,
        initial_design_size=initial_design_size,
        output_directory=output_dir / "smac3",
    )
