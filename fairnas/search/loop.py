"""run_search: the multi-fidelity, multi-objective search loop (thesis Sec. 4.4) with resume.

The loop asks a strategy (``search.strategy``, from the registry of :mod:`fairnas.search.strategies`) for trials,
runs them through a pool (in-process or Dask), appends each finished trial to trials.csv at once, then tells the
strategy. trials.csv is the source of truth: re-running with the same output_dir replays its trials to the strategy
instead of running them again (a trial is identified by its configuration and budget), so an interrupted
search, SIGKILL included, continues without losing or repeating finished trials.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import logging
import math
from collections.abc import Callable, Collection, Mapping, Sequence
from pathlib import Path
from typing import Any

import pandas as pd
from ConfigSpace import ConfigurationSpace

from fairnas.io import append_csv_rows, write_csv_atomic, write_text_atomic
from fairnas.search.final import FinalResult, fresh_seeds, run_final_stage, select_candidates
from fairnas.search.hypervolume import HypervolumeCurve
from fairnas.search.outputs import (
    HYPERVOLUME_FILE,
    PARETO_FRONT_FILE,
    SETTINGS_FILE,
    TRIALS_FILE,
    SearchResult,
    write_outputs,
)
from fairnas.search.parallel import TrialPool, open_pool_for
from fairnas.search.pareto import pareto_front
from fairnas.search.progress import progress_line
from fairnas.search.record_check import check_folder
from fairnas.search.records import RunKey, TrialRecord, TrialStore, run_key
from fairnas.search.settings import SearchSettings, check_compatible
from fairnas.search.space import KeyValidator, SearchSpace, check_known_keys, load_space
from fairnas.search.strategies import BuildContext, Proposal, Strategy, registration
from fairnas.search.trial import (
    CRASHED,
    Target,
    TrialOutcome,
    TrialsCrashAlike,
    crashed_outcome,
    evaluate_trial,
    is_out_of_space,
)

log = logging.getLogger("fairnas.search")

MAX_REPEATED_PROPOSALS = 100
"""Stop when a strategy proposes only already-finished trials this many times in a row."""


@dataclasses.dataclass(frozen=True)
class SearchProgress:
    """The search so far, after a trial finished: its Pareto front at the maximum budget (pareto_front.csv's rows),
    the hypervolume curve's last row (hypervolume.csv's n_trials, consumed_budget, front_size and hypervolume) and
    the output folder. Kept by the loop as it goes, so telling an observer costs nothing that grows with the trials."""

    pareto_front: pd.DataFrame
    curve_row: Mapping[str, float]
    output_dir: Path


TrialObserver = Callable[[SearchProgress], None]
"""Told the search's progress after each finished trial (``run_search``'s ``on_trial``)."""


def run_search(
    target: Target,
    space: ConfigurationSpace | SearchSpace | str | Path | Mapping[str, Any],
    settings: SearchSettings,
    *,
    output_dir: str | Path,
    known_objectives: Collection[str] | None = None,
    known_keys: KeyValidator | None = None,
    invariants: Mapping[str, Any] | None = None,
    final_target: Target | None = None,
    final_metrics: Sequence[str] = (),
    on_trial: TrialObserver | None = None,
) -> SearchResult:
    """Search ``space`` for configurations minimising every objective; resume from ``output_dir``.

    ``target(config, seed, budget)`` returns ``{objective: value}``; ``config`` holds the active
    hyperparameters (use ``fairnas.search.config_id(config)`` for a stable id, e.g. to continue a
    promoted configuration from its lower-budget checkpoint). A target that raises (out-of-memory
    included), omits an objective or returns a non-finite value is recorded as crashed with
    ``settings.crash_cost``; if the first ``settings.fail_fast`` trials of this run all crash with the same
    error message, the search raises :class:`~fairnas.search.trial.TrialsCrashAlike` naming it and records none of
    them (so that fixing the cause and running again starts clean). The search stops when ``settings.n_trials``
    trials finished, or once
    the summed budget of finished trials reaches ``settings.total_budget`` (trials are launched while
    finished plus running budget is below it, so it is exceeded by at most one trial's budget).
    ``known_objectives`` (the metrics the target reports) and ``known_keys`` (the configuration keys
    the space may set) are checked before any trial runs when given. A resumed search must match the
    started one's resume-invariant settings, space (hyperparameters and the keys they set) and
    ``invariants`` (the caller's own, e.g. the training overrides every trial applies; JSON-able values,
    recorded in search.json) or stops with a ValueError naming what differs; so does a strategy whose
    library is missing, and a folder whose records are not whole (:mod:`fairnas.search.record_check`, checked
    before anything is written). Writes trials.csv, pareto_front.csv, pareto_front.png, hypervolume.csv,
    search.json and, for SMAC, its output (smac3/) into ``output_dir``.

    Then, unless ``settings.final.seeds`` is 0, the final-selection stage (:mod:`fairnas.search.final`) re-trains the
    best full-budget configurations with fresh seeds on the same pool, through ``final_target`` (default
    ``target``), recording the objectives and ``final_metrics`` (more values ``final_target`` returns, e.g. test
    metrics); it writes final_trials.csv, final_candidates.csv and final_front.csv, and its runs are read back on
    resume like the search's trials. Its epochs come on top of ``total_budget``.

    ``on_trial(progress)`` is called after each trial finishes and is recorded, with the front and the hypervolume
    so far (:class:`SearchProgress`), e.g. to send them to W&B while the search runs.
    """
    search_space = _as_search_space(space)
    if known_keys is not None:
        check_known_keys(search_space.keys, known_keys)
    check_compatible(settings, hyperparameters=list(search_space.keys), known_objectives=known_objectives)
    build_strategy = registration(settings.strategy).load()  # a missing extra stops before output_dir
    configspace = search_space.configspace
    output_dir = Path(output_dir)
    space_invariants = {"configspace": configspace.to_serialized_dict(), "space_keys": dict(search_space.keys)}
    with contextlib.ExitStack() as stack:
        pools: list[TrialPool] = []

        def pool() -> TrialPool:  # opened once, when the first trial or re-training run needs it
            if not pools:
                pools.append(stack.enter_context(open_pool_for(settings)))
            return pools[0]

        if settings.dask_address is not None or settings.dask_scheduler_file is not None:
            pool()  # an existing scheduler is reached before anything is written: a wrong address stops here
        recorded = settings.resume_invariant() | space_invariants | dict(invariants or {})
        to_record = check_folder(output_dir, settings, recorded, final_metrics=final_metrics)
        if to_record is not None:  # the folder is accepted: the first thing written is what it records
            write_text_atomic(output_dir / SETTINGS_FILE, json.dumps(to_record, indent=2))
        store = TrialStore(
            output_dir / TRIALS_FILE,
            settings.objectives,
            list(search_space.keys),
            budgets=(settings.min_budget, settings.max_budget),
        )
        if store.records:
            log.info("resuming search in %s with %d finished trials", output_dir, len(store.records))
        if _within_limits(settings, len(store.records), sum(record.budget for record in store.records)):
            strategy = build_strategy(configspace, settings, BuildContext(output_dir, tuple(store.records)))
            _SearchLoop(
                target=target, strategy=strategy, pool=pool(), store=store, settings=settings, on_trial=on_trial
            ).run()
        result = SearchResult.from_trials(store.frame(), settings.objectives, settings.max_budget, output_dir)
        if settings.final.seeds:
            final = _final_stage(final_target or target, result, settings, list(search_space.keys), final_metrics, pool)
            result = dataclasses.replace(result, final=final)
    write_outputs(result, settings.reference_point, plot=True)
    return result


def _final_stage(
    target: Target,
    result: SearchResult,
    settings: SearchSettings,
    hyperparameters: list[str],
    extra_metrics: Sequence[str],
    pool: Callable[[], TrialPool],
) -> FinalResult | None:
    """The final-selection stage on the search's trials (None when no trial reached the full budget)."""
    candidates = select_candidates(result.trials, settings.objectives, settings.max_budget, settings.final.top_k)
    if candidates.empty:
        log.warning("final stage skipped: no successful trial at the full budget (%g)", settings.max_budget)
        return None
    seeds = fresh_seeds(result.trials["seed"], settings.final.seeds)
    final = run_final_stage(
        target,
        candidates,
        seeds=seeds,
        budget=settings.max_budget,
        objectives=settings.objectives,
        metrics=[*settings.objectives, *extra_metrics],
        crash_costs=settings.crash_costs,
        hyperparameters=hyperparameters,
        pool=pool,
        output_dir=result.output_dir,
        answer=settings.final.answer,
    )
    log.info(
        "final stage: %d candidates x seeds %s, %g epochs; front of means: %d configurations",
        len(candidates),
        seeds,
        final.epochs,
        len(final.front),
    )
    return final


def _within_limits(settings: SearchSettings, n_started: int, budget_started: float) -> bool:
    """Stopping rule shared by all strategies: whether one more trial may start.

    ``n_started`` and ``budget_started`` count the finished plus the running trials and their budgets.
    """
    if settings.n_trials is not None and n_started >= settings.n_trials:
        return False
    return settings.total_budget is None or budget_started < settings.total_budget


class _SearchLoop:
    """Ask/evaluate/record/tell until the limits are reached or the strategy runs dry."""

    def __init__(
        self,
        *,
        target: Target,
        strategy: Strategy,
        pool: TrialPool,
        store: TrialStore,
        settings: SearchSettings,
        on_trial: TrialObserver | None,
    ):
        self._target = target
        self._on_trial = on_trial
        self._strategy = strategy
        self._pool = pool
        self._store = store
        self._settings = settings
        self._finished: dict[RunKey, TrialRecord] = {record.run_key: record for record in store.records}
        self._told: set[RunKey] = set()
        self._unasked = list(self._finished)  # an earlier run's trials, told once the strategy first asks
        self._running: dict[RunKey, list[Proposal]] = {}
        self._next_trial_id = max((record.trial_id for record in store.records), default=-1) + 1
        self._budget_finished = sum(record.budget for record in store.records)
        self._exhausted = False
        self._outputs = SearchOutputs(store, settings)
        self._held: list[TrialRecord] = []  # this run's first crashes, all with one error (search.fail_fast)
        self._proven = settings.fail_fast == 0  # a trial of this run finished other than by that crash

    def run(self) -> None:
        try:
            while True:
                self._launch()
                if len(self._pool) == 0:
                    break
                finished = self._pool.next_finished()
                if finished is not None:  # None: nothing finished yet; workers that joined get trials first
                    (key, trial_id), outcome, error = finished
                    self._finish(key, trial_id, outcome, error)
        except BaseException as error:
            if not isinstance(error, TrialsCrashAlike):  # stopped otherwise (the compute meter, a signal)
                self._record_held()
            raise
        self._record_held()

    def _launch(self) -> None:
        """Fill free workers with new trials; replay finished ones to the strategy instead of running them."""
        repeated = 0
        while len(self._pool) < self._pool.capacity and not self._exhausted and self._may_start():
            proposal = self._strategy.ask()
            if proposal is None:  # with trials running, the strategy may have more once they are told
                if not self._running:
                    self._exhausted = True
                    log.info("the strategy has no new configuration left; stopping")
                return
            key = run_key(proposal.config, proposal.budget, self._seed(proposal))
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
                key[2],
                proposal.budget,
                self._store.objectives,
                self._settings.crash_costs,
            )
            self._next_trial_id += 1
            repeated = 0

    def _seed(self, proposal: Proposal) -> int:
        """The training seed of a proposal: the one its strategy asks for, else the search's."""
        return self._settings.seed if proposal.seed is None else proposal.seed

    def _may_start(self) -> bool:
        started = len(self._store.records) + len(self._held) + len(self._running)
        budget = self._budget_finished + sum(key[1] for key in self._running)
        return _within_limits(self._settings, started, budget)

    def _share_result(self, key: RunKey, proposal: Proposal) -> None:
        """A proposal for a finished trial gets its recorded result; one for a running trial waits for it."""
        if key in self._running:
            self._running[key].append(proposal)
            return
        self._strategy.tell(proposal, self._finished[key].outcome)
        self._told.add(key)

    def _replay_unasked_records(self) -> None:
        """Tell the strategy every finished trial it has not asked for again (from an earlier run)."""
        for key in self._unasked:
            if key not in self._told:
                self._strategy.tell_record(self._finished[key])
                self._told.add(key)
        self._unasked = []

    def _finish(self, key: RunKey, trial_id: int, outcome: TrialOutcome | None, error: BaseException | None) -> None:
        proposals = self._running.pop(key)
        if error is not None and is_out_of_space(error):  # not the trial's fault: stop, retry it on the next run
            raise error
        if error is not None:  # the worker itself failed (e.g. killed); evaluate_trial never raises otherwise
            outcome = crashed_outcome(self._store.objectives, self._settings.crash_costs, error, wall_time_s=math.nan)
        assert outcome is not None  # a pool gives (token, result, None) or (token, None, error)
        record = TrialRecord(trial_id, proposals[0].config, proposals[0].budget, key[2], outcome)
        self._record(record)  # durable before anything else
        self._finished[key] = record
        self._budget_finished += record.budget
        self._told.add(key)
        for proposal in proposals:
            self._strategy.tell(proposal, outcome)
        self._outputs.add(record)
        log.info(
            progress_line(
                record,
                self._outputs.curve.last(),
                objectives=self._store.objectives,
                n_trials=self._settings.n_trials,
                total_budget=self._settings.total_budget,
            )
        )
        if self._on_trial is not None:
            self._on_trial(SearchProgress(self._outputs.front, self._outputs.curve.last(), self._store.path.parent))

    def _record(self, record: TrialRecord) -> None:
        """Append the trial to trials.csv, except a crash while every trial of this run so far crashed with the same
        error: held back, and once ``fail_fast`` of them are, the search stops with that error."""
        error = record.outcome.error
        if not self._proven and record.outcome.status == CRASHED and all(h.outcome.error == error for h in self._held):
            self._held.append(record)
            if len(self._held) >= self._settings.fail_fast:
                raise TrialsCrashAlike(
                    f"the search's first {len(self._held)} trials all crashed with the same error, so it stopped "
                    f"before spending its budget: {error} (a setting or the environment fails every trial alike: fix "
                    "it and run the same command again; if the error depends on the configuration, as a learning "
                    "rate that diverges does, search.fail_fast=0 runs every trial regardless)"
                )
            return
        self._proven = True
        self._record_held()
        self._store.append(record)

    def _record_held(self) -> None:
        for held in self._held:
            self._store.append(held)
        self._held = []


class SearchOutputs:
    """What :func:`~fairnas.search.outputs.write_outputs` writes while the search runs (pareto_front.csv and
    hypervolume.csv), kept up to date at a cost that does not grow with the trials: hypervolume.csv gains each
    trial's row (written whole when the reference point derived from the trials moved), pareto_front.csv is
    written when the front changed (:attr:`front` holds it). At the end the search writes both whole again, with the
    figure."""

    def __init__(self, store: TrialStore, settings: SearchSettings):
        self._store, self._settings = store, settings
        self.curve = HypervolumeCurve(store.objectives, settings.max_budget, settings.reference_point)
        for record in store.records:
            self._add_to_curve(record)
        self._written = False
        self.front = pd.DataFrame()

    def add(self, record: TrialRecord) -> None:
        self._add_to_curve(record)
        folder = self._store.path.parent
        if self._written and not self.curve.moved:  # derived from trials.csv: no need to wait for the disk
            row = [*self.curve.last().values(), *self.curve.reference]  # hypervolume.csv's column order
            append_csv_rows([row], folder / HYPERVOLUME_FILE, durable=False)
        else:
            write_csv_atomic(self.curve.frame(), folder / HYPERVOLUME_FILE)
        if self.curve.front_changed or not self._written:
            self.front = pareto_front(self._store.frame(), self._store.objectives, self._settings.max_budget)
            write_csv_atomic(self.front, folder / PARETO_FRONT_FILE)
        self._written = True

    def _add_to_curve(self, record: TrialRecord) -> None:
        values = [record.outcome.values[name] for name in self._store.objectives]
        self.curve.add(record.budget, record.outcome.status, values)


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
