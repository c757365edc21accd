"""Search efficiency: hypervolume at equal consumed compute for every search strategy, side by side.

Methods (every one minimises all objectives through ``run_search``; same space, budgets and target per problem):

- ``smac``: ``SearchSettings(strategy="smac")``, Hyperband with eta and ParEGO, promoted configurations continue from
  their lower-budget checkpoints (fairnas's default, beyond the paper);
- ``smac_scratch``: the same SMAC search, every promoted configuration retrained from scratch (the paper);
- ``random``: ``strategy="random"``, every configuration trained to the maximum budget;
- ``moasha``: ``strategy="moasha"``, Syne Tune's MO-ASHA (the closest peer: multi-fidelity, multi-objective;
  ``fairnas/search/moasha.py``), promoted configurations continue;
- ``nsga2``: ``strategy="nsga2"``, pymoo's NSGA-II (``fairnas/search/nsga2.py``), generations of
  ``population_size`` trials at the maximum budget.

Problems:

- ``analytic``: ``NoisyMultiFidelityProblem`` (ZDT1 on [0, 1]^4, noise sd 0.3 / budget), budgets 1 to 8
  "epochs" with eta = 2; reference point (1.1, 11): the objective box [0, 1] x [0, 10] plus 10 %. Its maximum
  hypervolume is that of the noise-free front f2 = 1 - sqrt(f1): 1.1 x 11 - 1/3 (the noise only adds).
- ``momf_branin_currin``, ``momf_park``: BoTorch's multi-objective multi-fidelity test problems (Irshad et al.
  2021; ``botorch_problems.py``), budgets 1 to 8 epochs mapped linearly onto the fidelity input, eta = 2,
  BoTorch's reference point and maximum hypervolume (``max_hv``).
- ``faces``: ``TrainingTarget`` on the paper's DPN space (searchspaces/dpn_paper.yaml) with the small
  synthetic-face set of ``experiment=smoke`` on the CPU, budgets 1 to 4 epochs with eta = 2, objectives
  validation error and rank disparity; reference point (1, 1): error 1 is chance, a rank disparity of one
  identity is the worst the front is credited for.
- ``table``: the tabular benchmark of the embedded problem (``bench/tabular.py``, ``bench/tables/dpn_showcase``):
  look-ups of every configuration's per-epoch validation metrics, maximum hypervolume that of the table's front.

Equal consumed compute. The unit is the epoch actually trained. Random search and NSGA-II pay the maximum budget
per trial; ``smac_scratch`` pays each trial's budget; ``smac`` pays a promoted configuration only the epochs between
its highest earlier budget (same seed) and the new one; MO-ASHA pays each trial (one rung) the epochs from the
rung below. On ``faces`` these are measured: ``TrainingTarget(continue_across_fidelities=True/False)`` trains them
and each call's trial record is read by ``EpochsTrained`` (a trial that crashes mid-training records none and
costs 0).
On the other problems nothing trains and the same rule is applied to the calls (``RetrainingCost``). Every run is
stopped by one rule on consumed compute (``MeteredTarget``): a trial starts only while the compute consumed is
below ``--total-budget``. ``run_search``'s own ``total_budget`` bounds the nominal
budget (what retraining from scratch costs) and would hand the continuing search less compute than the others,
so it is set to a cap that cannot bind first: promotions go up by eta, so continuing saves at most 1/eta of a
trial's budget and nominal <= eta / (eta - 1) x consumed. The hypervolume at the budget counts the trials that
finished within it (max-budget successful trials, observed objectives, the fixed reference point; pymoo's HV
through ``fairnas.search.hypervolume``). Seed s is the seed of the strategy (SMAC, the random sampler, NSGA-II;
MO-ASHA draws the same configurations as random search), and of the target (training seed; analytic noise stream).

Budget to reach random search: the target is the mean over seeds of random search's hypervolume at the total
budget; for each run, the consumed compute after which its hypervolume first reaches it; the table gives the
median over seeds and how many seeds reached it within the total budget (the median is ">B" when fewer than half
did). ``--figure`` draws the hypervolume (as a share of the maximum where known) against consumed epochs, mean ±
standard error over seeds, one panel per problem.

    PYTHONHASHSEED=0 python bench/search_efficiency.py --problem analytic momf_branin_currin momf_park table \\
        --seeds 10 --output search_efficiency.csv --figure docs/assets/search_efficiency.png
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import logging
import math
import os
import sys
import tempfile
import time
import warnings
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import torch
from _answer_quality import Truth, answer, quality
from _compute_meter import ComputeBudgetReached, CostMeter, EpochsTrained, MeteredTarget, RetrainingCost
from _efficiency_figure import efficiency_figure, volume_on_grid
from analytic import NoisyMultiFidelityProblem
from tabular import TableTarget, front_hypervolume, load_table, parse_shard

from fairnas.io import write_csv_atomic, write_text_atomic
from fairnas.search import SearchResult, SearchSettings, SearchSpace, load_space, run_search
from fairnas.search.final import FINAL_TRIALS_FILE
from fairnas.search.hypervolume import hypervolume_curve
from fairnas.search.result import TRIALS_FILE
from fairnas.search.settings import FinalSettings
from fairnas.search.trial import Target
from fairnas.tasks.search_target import TrainingTarget

REPOSITORY = Path(__file__).resolve().parents[1]


@dataclass(frozen=True)
class Method:
    """A search method of the benchmark: a strategy, whether promoted configurations continue their checkpoints,
    ``SearchSettings`` overrides, and whether the final-selection stage re-trains its best configurations."""

    label: str
    strategy: str
    continuing: bool = True
    settings: Mapping[str, Any] = dataclasses.field(default_factory=dict)
    final: bool = False


BOTORCH_FULL = {"botorch": {"fidelity": "full"}}
BOTORCH_REFIT5 = {"botorch": {"fidelity": "full", "refit_every": 5}}
METHODS = {
    "smac": Method("SMAC, continuing", "smac"),
    "smac_scratch": Method("SMAC, from scratch", "smac", continuing=False),
    "random": Method("random search", "random"),
    "moasha": Method("Syne Tune MO-ASHA", "moasha"),
    "nsga2": Method("NSGA-II", "nsga2"),
    "smac+final": Method("SMAC + final stage", "smac", final=True),
    "random+final": Method("random search + final stage", "random", final=True),
    "moasha+final": Method("MO-ASHA + final stage", "moasha", final=True),
    "nsga2+final": Method("NSGA-II + final stage", "nsga2", final=True),
    "smac_seeds2": Method("SMAC racing 2 seeds (full budget)", "smac", settings={"n_seeds": 2}),
    "smac_seeds3": Method("SMAC racing 3 seeds (full budget)", "smac", settings={"n_seeds": 3}),
    "botorch": Method("BoTorch GP, full budget", "botorch", settings=BOTORCH_FULL),
    "botorch_early_stop": Method(
        "BoTorch GP, early stopping", "botorch", settings={"botorch": {"fidelity": "early_stop"}}
    ),
    "botorch_momf": Method("BoTorch GP, MOMF", "botorch", settings={"botorch": {"fidelity": "momf"}}),
    "botorch+final": Method("BoTorch GP + final stage", "botorch", settings=BOTORCH_FULL, final=True),
    "botorch_refit5": Method(
        "BoTorch GP, hyperparameters fitted every 5th suggestion", "botorch", settings=BOTORCH_REFIT5
    ),
    "botorch_refit5+final": Method(
        "BoTorch GP, fitted every 5th + final stage", "botorch", settings=BOTORCH_REFIT5, final=True
    ),
    "reference_full": Method("plain BoTorch loop, full budget", "reference"),
    "reference_momf": Method("plain BoTorch loop, MOMF", "reference"),
}
"""``reference_*``: BoTorch's own loop outside fairnas (``botorch_reference.py``), on the BoTorch problems only."""
DEFAULT_METHODS = ("smac", "smac_scratch", "random", "moasha", "nsga2")
FINAL = FinalSettings()  # the final stage of the methods that have one: search.final's defaults
FACE_OVERRIDES = (
    "experiment=smoke",
    "trainer=cpu",
    "logger=none",
    "trainer.enable_progress_bar=false",
    "trainer.enable_model_summary=false",
    "data.eval_batch_size=64",
    "embedding_dim=64",
)


@dataclass(frozen=True)
class Problem:
    """A search problem: space, objectives, budgets, fixed reference point, and how to build its target."""

    name: str
    space: SearchSpace
    objectives: tuple[str, ...]
    min_budget: float
    max_budget: float
    eta: int
    reference_point: tuple[float, ...]
    default_total_budget: float
    make_target: Callable[[Path, bool, int], tuple[Target, CostMeter]]
    """``make_target(run_dir, continue_across_fidelities, seed)`` -> (target, meter of the epochs each call trains);
    ``seed`` is the search's seed (a table target draws its order of table seeds from it)."""
    max_hypervolume: float | None = None
    """The best hypervolume any search can reach (a table's own front, an analytic front), when known: results are
    also reported as a share of it."""
    truth: Truth | None = None
    """A noisy table's true values (means over its training seeds), by which a search's answer is judged."""
    botorch: bool = False
    """One of BoTorch's test problems: the plain BoTorch loop (``reference_*``) runs on it."""


def analytic_problem() -> Problem:
    zdt1 = NoisyMultiFidelityProblem("zdt1", n_variables=4, noise=0.3)
    configspace = zdt1.configspace()
    return Problem(
        name="analytic",
        space=SearchSpace(configspace=configspace, keys={name: name for name in configspace}),
        objectives=zdt1.objectives,
        min_budget=1,
        max_budget=8,
        eta=2,
        reference_point=(1.1, 11.0),
        default_total_budget=400,
        make_target=lambda run_dir, continuing, seed: (zdt1, RetrainingCost(continuing)),
        max_hypervolume=1.1 * 11.0 - 1 / 3,  # the noise-free front f2 = 1 - sqrt(f1) inside (1.1, 11)
    )


def botorch_problem(name: str, fidelity_mapping: str = "linear_from_min", total_budget: float = 400) -> Problem:
    """BoTorch's ``MOMFBraninCurrin`` or ``MOMFPark`` (``botorch_problems.py``) over budgets 1 to 8 epochs, the budget
    mapped onto the fidelity input by ``fidelity_mapping``."""
    from botorch_problems import MomfTarget  # BoTorch is in the bench extra only

    target = MomfTarget(name, min_budget=1, max_budget=8, fidelity_mapping=fidelity_mapping)
    configspace = target.configspace()
    return Problem(
        name=name if fidelity_mapping == "linear_from_min" else f"{name}_s8",
        space=SearchSpace(configspace=configspace, keys={name: name for name in configspace}),
        objectives=target.objectives,
        min_budget=target.min_budget,
        max_budget=target.max_budget,
        eta=2,
        reference_point=target.reference_point,
        default_total_budget=total_budget,
        make_target=lambda run_dir, continuing, seed: (target, RetrainingCost(continuing)),
        max_hypervolume=target.max_hypervolume,
        botorch=True,
    )


def face_problem(
    name: str = "faces",
    overrides: Sequence[str] = FACE_OVERRIDES,
    reference_point: tuple[float, float] = (1.0, 1.0),
    default_total_budget: float = 32,
    max_budget: float = 4,
    space_file: Path = REPOSITORY / "searchspaces" / "dpn_paper.yaml",
    max_hypervolume: float | None = None,
) -> Problem:
    """A DPN space (default: the paper's) trained live on synthetic faces with ``overrides`` (default:
    ``experiment=smoke``)."""
    space = load_space(space_file)
    objectives = ("error", "rank_disparity")

    def make_target(run_dir: Path, continuing: bool, seed: int) -> tuple[Target, CostMeter]:
        target = TrainingTarget(
            space.overrides,
            objectives=objectives,
            trials_dir=run_dir / "trials",
            max_budget=max_budget,
            base_overrides=overrides,
            continue_across_fidelities=continuing,
        )
        return target, EpochsTrained(run_dir / "trials")

    return Problem(
        name=name,
        space=space,
        objectives=objectives,
        min_budget=1,
        max_budget=max_budget,
        eta=2,
        reference_point=reference_point,
        default_total_budget=default_total_budget,
        make_target=make_target,
        max_hypervolume=max_hypervolume,
    )


def table_problem(name: str = "dpn_showcase_noisy", tables: Path | None = None) -> Problem:
    """The tabular benchmark ``bench/tables/<name>`` (``bench/tabular.py``): look-ups instead of training, so
    consumed epochs are charged as if trained (``RetrainingCost``). A search with seed s reads the table's training
    seeds in an order drawn from s (``Truth.seed_order``): its trials the first, each new training seed (the final
    stage's, SMAC's racing seeds) the next. Reference point: error 1 and 1.1 x the largest validation rank disparity
    of the table at the maximum budget, so every configuration of the table lies inside. ``max_hypervolume`` is that
    of the front of the true values (means over the table's seeds)."""
    table, spec = load_table(name, *([tables] if tables else []))
    objectives, max_budget = tuple(spec["objectives"]), spec["max_budget"]
    final = table[table["epoch"] == max_budget]
    reference_point = (1.0, 1.1 * float(final["val/rank_disparity"].max()))
    truth = Truth(table, objectives, max_budget)

    def make_target(run_dir: Path, continuing: bool, seed: int) -> tuple[Target, CostMeter]:
        return TableTarget(table, objectives, seed_order=truth.seed_order(seed)), RetrainingCost(continuing)

    return Problem(
        name=f"table:{name}",
        space=load_space(REPOSITORY / spec["space"]),
        objectives=objectives,
        min_budget=1,
        max_budget=max_budget,
        eta=2,
        reference_point=reference_point,
        default_total_budget=30 * max_budget,
        make_target=make_target,
        max_hypervolume=front_hypervolume(table, objectives, max_budget, reference_point),
        truth=truth,
    )


PROBLEMS = {
    "analytic": analytic_problem,
    "momf_branin_currin": lambda: botorch_problem("momf_branin_currin"),
    "momf_park": lambda: botorch_problem("momf_park"),
    # the protocol for the GP comparison: fidelity s = budget / 8, 800 epochs
    "momf_branin_currin_s8": lambda: botorch_problem("momf_branin_currin", "share_of_max", 800),
    "momf_park_s8": lambda: botorch_problem("momf_park", "share_of_max", 800),
    "faces": face_problem,
    "table": table_problem,
}


def run_method(
    problem: Problem,
    method: str,
    *,
    seed: int,
    total_budget: float,
    run_dir: Path,
    settings: Mapping[str, Any] | None = None,
    final: FinalSettings = FINAL,
) -> pd.DataFrame:
    """One search until ``total_budget`` epochs are consumed; its trials in finishing order with their ``cost`` and
    ``stage`` (``search``; ``final`` for the final stage's re-training runs). ``settings`` override the problem's
    ``SearchSettings`` (e.g. ``eta``; ``bench/smac_defaults.py``).

    A method with the final stage searches until ``total_budget`` less the stage's cost (``final.top_k`` x
    ``final.seeds`` runs at the maximum budget) is consumed, then re-trains its best configurations: the stage's
    epochs are charged within the same total. The result is kept in ``run_dir/consumed.csv``; a run that finished
    before is read back from it, not re-run, and an interrupted one resumes (its recorded trials count towards
    ``total_budget``).
    """
    finished = run_dir / "consumed.csv"
    if finished.is_file():
        return pd.read_csv(finished)
    spec = METHODS[method]
    if spec.strategy == "reference":
        trials = _reference_run(problem, method.removeprefix("reference_"), seed, total_budget)
        write_csv_atomic(trials, finished)
        return trials
    final_cost = final.top_k * final.seeds * problem.max_budget if spec.final else 0.0
    if total_budget - final_cost < problem.max_budget:
        raise ValueError(
            f"{method}: total budget {total_budget:g} leaves less than one full trial beside the final stage's "
            f"{final_cost:g} epochs"
        )
    target, meter = problem.make_target(run_dir, spec.continuing, seed)
    metered = MeteredTarget(target, meter, limit=total_budget - final_cost)
    search_dir = run_dir / "search"
    if (search_dir / TRIALS_FILE).is_file():  # an interrupted run resumes: its trials are charged first
        metered.replay(_replayed_seeds(pd.read_csv(search_dir / TRIALS_FILE), target))
    values = {
        "objectives": problem.objectives,
        "min_budget": problem.min_budget,
        "max_budget": problem.max_budget,
        "eta": problem.eta,
        "strategy": spec.strategy,
        "seed": seed,
        "reference_point": problem.reference_point,
        "final": {"seeds": 0},
        **spec.settings,
        **(settings or {}),
    }
    nominal_cap = total_budget * values["eta"] / (values["eta"] - 1) + problem.max_budget
    search_settings = SearchSettings(**values, total_budget=nominal_cap)
    with contextlib.suppress(ComputeBudgetReached):  # trials.csv holds every finished trial
        run_search(metered, problem.space, search_settings, output_dir=search_dir)
    trials = SearchResult.load(search_dir).trials
    trials = trials.assign(cost=metered.costs_of(trials), stage="search")
    if spec.final:
        trials = pd.concat([trials, _final_stage(problem, target, meter, trials, search_settings, final, search_dir)])
    write_csv_atomic(trials, finished)
    return trials


def _reference_run(problem: Problem, variant: str, seed: int, total_budget: float) -> pd.DataFrame:
    """The plain BoTorch loop (``botorch_reference.py``) on a BoTorch problem, its trials as a search's."""
    if not problem.botorch:
        raise ValueError(f"the plain BoTorch loop runs on the BoTorch problems only, not on {problem.name}")
    from botorch_reference import run_reference, rungs_of  # BoTorch is in the bench extra only

    target, _ = problem.make_target(Path(), True, seed)
    rungs = rungs_of(problem.min_budget, problem.max_budget, problem.eta)
    trials = run_reference(target, variant, seed=seed, total_budget=total_budget, rungs=rungs)  # type: ignore[arg-type]
    return trials.assign(stage="search")


def _replayed_seeds(trials: pd.DataFrame, target: Target) -> pd.DataFrame:
    """``trials`` of an interrupted run, after their training seeds were replayed to a table target (so that it
    assigns the table seeds it assigned before)."""
    if isinstance(target, TableTarget):
        for seed in trials["seed"]:
            target.assign(int(seed))
    return trials


def _final_stage(
    problem: Problem,
    target: Target,
    meter: CostMeter,
    trials: pd.DataFrame,
    search_settings: SearchSettings,
    final: FinalSettings,
    search_dir: Path,
) -> pd.DataFrame:
    """The final stage on a finished search (``run_search`` once more, with no trial left to run): its re-training
    runs with their cost and ``stage`` ``final``."""
    final_file = search_dir / FINAL_TRIALS_FILE
    if final_file.is_file():  # resumed mid-stage: replay the seeds already assigned
        _replayed_seeds(pd.read_csv(final_file), target)
    metered = MeteredTarget(target, meter, limit=math.inf)
    settings = dataclasses.replace(search_settings, n_trials=len(trials), total_budget=None, final=final)
    result = run_search(_never_searched, problem.space, settings, output_dir=search_dir, final_target=metered)
    if result.final is None:
        return trials.iloc[:0].assign(stage="final")
    runs = result.final.trials
    done_before = len(runs) - len(metered.charges)  # read back on resume: charged as trained
    costs = [*runs["budget"].iloc[:done_before], *(charge.cost for charge in metered.charges)]
    return runs.assign(cost=np.asarray(costs, dtype=float), stage="final")


def _never_searched(config: dict[str, Any], seed: int, budget: float) -> Mapping[str, float]:
    raise AssertionError("the search is finished: only the final stage runs")


def consumed_curve(trials: pd.DataFrame, problem: Problem) -> pd.DataFrame:
    """Hypervolume of the observed max-budget front after each trial of the search proper against the compute
    consumed so far (the final stage's runs come after the search and add to the consumed compute only)."""
    search = trials[trials["stage"] == "search"] if "stage" in trials else trials
    curve = hypervolume_curve(search, problem.objectives, problem.max_budget, problem.reference_point)
    curve["consumed_budget"] = search["cost"].cumsum().to_numpy()
    return curve


def benchmark(
    problem: Problem,
    *,
    methods: Sequence[str],
    seeds: Sequence[int],
    total_budget: float,
    work_dir: Path,
    final: FinalSettings = FINAL,
) -> pd.DataFrame:
    """Every method with every seed; one row per trial (the final stage's runs last, ``stage`` final): problem,
    method, seed, the trial and its training seed, its cost, and the curve of the observed hypervolume."""
    unknown = sorted(set(methods) - set(METHODS))
    if unknown:
        raise ValueError(f"unknown methods {unknown}; allowed: {list(METHODS)}")
    if total_budget < problem.max_budget:
        raise ValueError(f"total budget {total_budget:g} is below one max-budget trial ({problem.max_budget:g})")
    if not problem.botorch:
        skipped = [method for method in methods if METHODS[method].strategy == "reference"]
        if skipped:
            print(f"{problem.name}: {skipped} skipped, they run on the BoTorch problems only", file=sys.stderr)
        methods = [method for method in methods if method not in skipped]
    runs = []
    for seed in seeds:
        for method in methods:
            start = time.perf_counter()
            # a method with the final stage keeps the stage's settings in its folder name: runs of other settings
            # are other runs
            folder = f"{method}@top{final.top_k}x{final.seeds}" if METHODS[method].final else method
            run_dir = work_dir / problem.name / folder / f"seed{seed}"
            trials = run_method(problem, method, seed=seed, total_budget=total_budget, run_dir=run_dir, final=final)
            curve = consumed_curve(trials, problem)
            wall_time_s = time.perf_counter() - start
            print(
                f"{problem.name} {method} seed {seed}: {len(trials)} trials, {curve['consumed_budget'].iloc[-1]:g} "
                f"epochs, hypervolume {curve['hypervolume'].iloc[-1]:.4f}, {wall_time_s:.0f} s",
                file=sys.stderr,
                flush=True,
            )
            searched = len(curve)
            last = curve.iloc[-1]
            consumed = np.concatenate(
                [curve["consumed_budget"], last["consumed_budget"] + trials["cost"].iloc[searched:].cumsum()]
            )
            runs.append(
                pd.DataFrame(
                    {
                        "problem": problem.name,
                        "method": method,
                        "seed": seed,
                        "stage": trials["stage"].to_numpy(),
                        "training_seed": trials["seed"].to_numpy(),
                        "n_trials": np.arange(1, len(trials) + 1),
                        "config_id": trials["config_id"].to_numpy(),
                        "budget": trials["budget"].to_numpy(dtype=float),
                        "status": trials["status"].to_numpy(),
                        **{name: trials[name].to_numpy(dtype=float) for name in problem.objectives},
                        "cost": trials["cost"].to_numpy(),
                        "consumed_budget": consumed,
                        "hypervolume": np.concatenate(
                            [curve["hypervolume"], np.full(len(trials) - searched, last["hypervolume"])]
                        ),
                        "run_wall_time_s": wall_time_s,
                    }
                )
            )
    return pd.concat(runs, ignore_index=True)


def hypervolume_at(curve: pd.DataFrame, budget: float) -> float:
    """Hypervolume of the trials finished within ``budget`` consumed epochs (0 before any)."""
    return float(volume_on_grid(curve, np.array([budget]))[0])


def budget_to_reach(curve: pd.DataFrame, volume: float) -> float:
    """Consumed epochs after which the hypervolume first reaches ``volume`` (inf if it never does)."""
    reached = curve.loc[curve["hypervolume"] >= volume - 1e-12, "consumed_budget"]
    return float(reached.min()) if len(reached) else np.inf


def run_volumes(runs: pd.DataFrame, total_budget: float, max_hypervolume: float | None = None) -> pd.DataFrame:
    """Per run (method, seed): its hypervolume at ``total_budget`` consumed epochs and, when ``max_hypervolume`` is
    given, its share of it (what ``--runs-output`` writes and the README's strategy table is rendered from)."""
    at_budget = runs.groupby(["method", "seed"], sort=False).apply(lambda curve: hypervolume_at(curve, total_budget))
    frame = at_budget.rename("hypervolume").reset_index()
    if max_hypervolume:
        frame["share"] = frame["hypervolume"] / max_hypervolume
    return frame


def summarize(runs: pd.DataFrame, total_budget: float, max_hypervolume: float | None = None) -> pd.DataFrame:
    """Per method: hypervolume at ``total_budget`` (mean, standard deviation and standard error over seeds; as a
    share of ``max_hypervolume`` when given), its difference from random search paired by seed (mean and standard
    error), and the budget to reach random search's mean hypervolume."""
    per_run = runs.groupby(["method", "seed"], sort=False)
    at_budget = run_volumes(runs, total_budget).set_index(["method", "seed"])["hypervolume"]
    random = at_budget.xs("random", level="method") if "random" in at_budget.index.get_level_values(0) else None
    goal = None if random is None else random.mean()
    rows = []
    for method, volumes in at_budget.groupby(level="method", sort=False):
        volumes = volumes.droplevel("method")
        row = {
            "method": method,
            "seeds": len(volumes),
            "hv_mean": volumes.mean(),
            "hv_std": volumes.std(ddof=1) if len(volumes) > 1 else 0.0,
            "hv_sem": volumes.sem() if len(volumes) > 1 else 0.0,
            "trials_mean": per_run.size()[method].mean(),
            "wall_time_s_mean": per_run["run_wall_time_s"].first()[method].mean(),
        }
        if max_hypervolume:
            row.update(share_mean=row["hv_mean"] / max_hypervolume, share_sem=row["hv_sem"] / max_hypervolume)
        if random is not None:
            difference = (volumes - random).dropna()  # paired by seed
            row.update(
                diff_mean=difference.mean(),
                diff_sem=difference.sem() if len(difference) > 1 else 0.0,
                ahead=int((difference > 0).sum()),
            )
            budgets = np.array([budget_to_reach(curve, goal) for (name, _), curve in per_run if name == method])
            within = budgets <= total_budget + 1e-9
            row.update(budget_to_random=float(np.median(np.where(within, budgets, np.inf))), reached=int(within.sum()))
        rows.append(row)
    summary = pd.DataFrame(rows)
    summary.attrs["random_hypervolume"] = goal
    return summary


def answer_quality(runs: pd.DataFrame, problem: Problem) -> pd.DataFrame:
    """Per run (method, seed) on a noisy table: the true quality of its answer (``_answer_quality.quality``)."""
    truth = problem.truth
    assert truth is not None and problem.max_hypervolume, "answer quality needs a noisy table's true values"
    rows = []
    for (method, seed), trials in runs.groupby(["method", "seed"], sort=False):
        read = truth.seed_order(int(seed))[: trials["training_seed"].nunique()]
        returned = answer(trials, problem.objectives, problem.max_budget)
        row = quality(returned, truth, problem.reference_point, problem.max_hypervolume, read)
        rows.append({"method": method, "seed": seed, "epochs": trials["cost"].sum(), **row})
    return pd.DataFrame(rows)


QUALITY_COLUMNS = ("true_share", "pick_error", "pick_rank_disparity", "pick_error_gap", "pick_rank_disparity_gap")


def format_quality(quality_runs: pd.DataFrame, problem: Problem, total_budget: float, held_out: bool = False) -> str:
    """A markdown table of the answers' true quality per method: mean ± s.e. over seeds, and the paired difference
    from random search and, for a method with the final stage, from the same method without it, in s.e."""
    prefix = "heldout_" if held_out else ""
    columns = [f"{prefix}{name}" for name in QUALITY_COLUMNS]
    wide = quality_runs.set_index(["method", "seed"])
    header = ["method", "epochs", *columns, "vs random search", "vs the method alone", "answer size"]
    lines = [
        f"{problem.name}: {'held-out ' if held_out else ''}true quality of the answer at {total_budget:g} consumed "
        f"epochs ({quality_runs['seed'].nunique()} seeds; mean ± s.e.; differences paired by seed, in s.e.)",
        "",
        "| " + " | ".join(header) + " |",
        "|" + " --- |" * len(header),
    ]
    for method, runs in wide.groupby(level="method", sort=False):
        runs = runs.droplevel("method")
        cells = [METHODS[method].label, f"{runs['epochs'].mean():.0f}"]
        cells += [f"{runs[c].mean():.3f} ± {runs[c].sem():.3f}" for c in columns]
        for other in ("random", method.removesuffix("+final") if METHODS[method].final else None):
            compared = other is not None and other != method and other in wide.index
            cells.append(_paired(runs, wide, other, columns) if compared else "")
        cells.append(f"{runs['answer_size'].mean():.1f}")
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def _paired(runs: pd.DataFrame, wide: pd.DataFrame, other: str, columns: Sequence[str]) -> str:
    """Paired differences ``runs`` - ``other``'s runs of the same seeds, per column: mean (margin in s.e.)."""
    base = wide.xs(other, level="method")
    parts = []
    for column in columns:
        difference = (runs[column] - base[column].reindex(runs.index)).dropna()
        margin = difference.mean() / difference.sem() if len(difference) > 1 and difference.sem() > 0 else np.nan
        parts.append(f"{difference.mean():+.3f} ({margin:+.1f})")
    return " / ".join(parts)


def format_table(summary: pd.DataFrame, problem: Problem, total_budget: float) -> str:
    """A markdown table: per method hypervolume (mean ± s.e.), its share of the problem's maximum when summarised,
    the paired difference from random search in standard errors, trials, and the epochs to reach random search."""
    goal = summary.attrs["random_hypervolume"]
    lines = [
        f"{problem.name}: hypervolume at {total_budget:g} consumed epochs, reference point "
        f"{tuple(round(value, 4) for value in problem.reference_point)}, budgets {problem.min_budget:g}-"
        f"{problem.max_budget:g} (eta {problem.eta}), {summary['seeds'].max()} seeds, mean ± standard error",
        "",
    ]
    header = ["method", "hypervolume"]
    shares = "share_mean" in summary
    if shares:
        header.append(f"share of max ({problem.max_hypervolume:.4g})")
    if goal is not None:
        header += ["minus random search (paired)", "seeds ahead", f"epochs to reach random ({goal:.4g})"]
    header.append("trials")
    lines += ["| " + " | ".join(header) + " |", "|" + " --- |" * len(header)]
    for row in summary.itertuples():
        cells = [METHODS[row.method].label, f"{row.hv_mean:.4f} ± {row.hv_sem:.4f}"]
        if shares:
            cells.append(f"{row.share_mean:.3f} ± {row.share_sem:.3f}")
        if goal is not None:
            margin = row.diff_mean / row.diff_sem if row.diff_sem > 0 else float("nan")
            median = f"{row.budget_to_random:g}" if np.isfinite(row.budget_to_random) else f">{total_budget:g}"
            cells += [
                "" if row.method == "random" else f"{row.diff_mean:+.4f} ± {row.diff_sem:.4f} ({margin:+.1f} s.e.)",
                "" if row.method == "random" else f"{row.ahead}/{row.seeds}",
                f"{median} ({row.reached}/{row.seeds} seeds)",
            ]
        cells.append(f"{row.trials_mean:.1f}")
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def quiet_training_logs() -> None:
    """Keep the per-trial output of Lightning and SMAC's progress lines out of the benchmark's report."""
    for name in ("pytorch_lightning", "lightning", "lightning.pytorch", "lightning_fabric", "fairnas.search"):
        logging.getLogger(name).setLevel(logging.ERROR)
    warnings.filterwarnings("ignore", category=UserWarning)
    warnings.filterwarnings("ignore", category=DeprecationWarning)
    warnings.filterwarnings("ignore", category=FutureWarning)


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--problem", nargs="+", choices=[*PROBLEMS, "all"], default=["analytic"])
    parser.add_argument("--seeds", type=int, default=5, help="seeds 0 .. N-1 per method")
    parser.add_argument(
        "--shard",
        type=parse_shard,
        default=(0, 1),
        help="K/N: run only seeds s with s %% N == K (N processes on one --work-dir; a run without --shard then "
        "reads every finished run back and reports them all)",
    )
    parser.add_argument(
        "--total-budget",
        type=float,
        nargs="+",
        help="consumed epochs per run, one or more budgets (default: faces 32, table 30 max-budget trials, others 400)",
    )
    parser.add_argument("--methods", nargs="+", choices=list(METHODS), default=list(DEFAULT_METHODS))
    parser.add_argument("--final-top-k", type=int, default=FINAL.top_k, help="the final stage's candidates")
    parser.add_argument("--final-seeds", type=int, default=FINAL.seeds, help="the final stage's seeds per candidate")
    parser.add_argument("--output", type=Path, help="CSV of every trial of every run")
    parser.add_argument("--quality-output", type=Path, help="CSV of every run's answer quality (noisy tables)")
    parser.add_argument("--runs-output", type=Path, help="CSV of every run's hypervolume (and share) at the budget")
    parser.add_argument("--work-dir", type=Path, help="keep the searches here (default: a temporary directory)")
    parser.add_argument("--figure", type=Path, help="PNG of hypervolume against consumed epochs, a panel per problem")
    args = parser.parse_args(argv)
    if args.seeds < 1:
        parser.error(f"--seeds must be >= 1, got {args.seeds}")
    try:
        final = FinalSettings(top_k=args.final_top_k, seeds=args.final_seeds)
        FinalSettings.from_mapping(dataclasses.asdict(final))
    except ValueError as error:
        parser.error(str(error))
    if os.environ.get("PYTHONHASHSEED") != "0":
        print("note: set PYTHONHASHSEED=0 for repeatable SMAC runs", file=sys.stderr)
    quiet_training_logs()
    # The tiny face models gain nothing from intra-op threads, and threads thrash when the cores are shared.
    torch.set_num_threads(1)

    problems = [factory() for name, factory in PROBLEMS.items() if {name, "all"} & set(args.problem)]
    all_runs, all_quality, all_volumes, figure_runs, figure_budgets = [], [], [], [], []
    with tempfile.TemporaryDirectory(prefix="search_efficiency_") as scratch:
        work_dir = args.work_dir or Path(scratch)
        for problem in problems:
            budgets = args.total_budget or [problem.default_total_budget]
            for total_budget in budgets:
                runs = benchmark(
                    problem,
                    methods=args.methods,
                    seeds=[seed for seed in range(args.seeds) if seed % args.shard[1] == args.shard[0]],
                    total_budget=total_budget,
                    work_dir=work_dir if len(budgets) == 1 else work_dir / f"budget{total_budget:g}",
                    final=final,
                )
                searched = runs[runs["stage"] == "search"]
                summary = summarize(searched, total_budget, problem.max_hypervolume)
                volumes = run_volumes(searched, total_budget, problem.max_hypervolume)
                all_volumes.append(volumes.assign(problem=problem.name, budget=total_budget))
                print(format_table(summary, problem, total_budget), flush=True)
                if problem.truth is not None:
                    quality_runs = answer_quality(runs, problem).assign(problem=problem.name, budget=total_budget)
                    all_quality.append(quality_runs)
                    for held_out in (False, True):
                        print("\n" + format_quality(quality_runs, problem, total_budget, held_out), flush=True)
                all_runs.append(runs.assign(total_budget=total_budget))
            figure_runs.append(runs)  # the problem's largest budget, the last one run
            figure_budgets.append(budgets[-1])
    if args.output is not None:
        write_text_atomic(args.output, pd.concat(all_runs, ignore_index=True).to_csv(index=False))
    if args.runs_output is not None:
        write_text_atomic(args.runs_output, pd.concat(all_volumes, ignore_index=True).to_csv(index=False))
    if args.quality_output is not None and all_quality:
        write_text_atomic(args.quality_output, pd.concat(all_quality, ignore_index=True).to_csv(index=False))
    if args.figure is not None:
        labels = {name: method.label for name, method in METHODS.items()}
        efficiency_figure(problems, figure_runs, figure_budgets, labels).savefig(args.figure, dpi=100)
    print(f"load average at the end (1/5/15 min): {' '.join(f'{load:.1f}' for load in os.getloadavg())}")


if __name__ == "__main__":
    main()
