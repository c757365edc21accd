"""Running a method on a problem until a consumed-compute budget: the benchmark's runs, one row per trial.

Equal consumed compute. The unit is the epoch actually trained. Random search and NSGA-II pay the maximum budget
per trial; ``smac_scratch`` pays each trial's budget; ``smac`` pays a promoted configuration only the epochs between
its highest earlier budget (same seed) and the new one; MO-ASHA pays each trial (one rung) the epochs from the
rung below. A problem's ``make_target`` gives the meter that charges them (:mod:`fairnas.benchmarks.compute_meter`).
Every run is stopped by one rule on consumed compute (``MeteredTarget``): a trial starts only while the compute
consumed is below the total budget. ``run_search``'s own ``total_budget`` bounds the nominal budget (what retraining
from scratch costs) and would hand the continuing search less compute than the others, so it is set to a cap that
cannot bind first: promotions go up by eta, so continuing saves at most 1/eta of a trial's budget and nominal <=
eta / (eta - 1) x consumed. Seed s is the seed of the strategy (SMAC, the random sampler, NSGA-II; MO-ASHA draws
the same configurations as random search), and of the target (training seed; analytic noise stream).
"""

from __future__ import annotations

import contextlib
import dataclasses
import math
import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from bench.comparison.methods import METHODS, Method
from bench.comparison.methods import method as resolved
from fairnas.benchmarks.compute_meter import ComputeBudgetReached, CostMeter, MeteredTarget
from fairnas.benchmarks.problems import Problem
from fairnas.benchmarks.table_target import TableTarget
from fairnas.io import write_csv_atomic
from fairnas.search import SearchResult, SearchSettings, run_search
from fairnas.search.final import FINAL_TRIALS_FILE
from fairnas.search.hypervolume import hypervolume_curve
from fairnas.search.outputs import TRIALS_FILE
from fairnas.search.settings import FinalSettings
from fairnas.search.trial import Target

FOLDER_ANSWER = {"means": "", "observed": "-observed"}
"""A final stage's answer in its run folder's name (the thesis' front of means as before)."""
FINAL = FinalSettings()  # the final stage of the methods that have one: search.final's defaults


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
    ``stage`` (``search``; ``final`` for the final stage's re-training runs; ``final`` is the stage of a method
    without one of its own, the shipped default's is its own). ``settings`` override the problem's
    ``SearchSettings`` and the method's (e.g. ``eta``; ``bench/smac_defaults.py``), the strategy's ``options`` one
    by one.

    A method with the final stage searches until ``total_budget`` less the stage's cost (``final.top_k`` x
    ``final.seeds`` runs at the maximum budget) is consumed, then re-trains its best configurations: the stage's
    epochs are charged within the same total. The result is kept in ``run_dir/consumed.csv``; a run that finished
    before is read back from it, not re-run, and an interrupted one resumes (its recorded trials count towards
    ``total_budget``).
    """
    finished = run_dir / "consumed.csv"
    if finished.is_file():
        return pd.read_csv(finished)
    spec = resolved(method)
    final = spec.final_settings or final
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
        "min_budget": min_budget(problem, spec),
        "max_budget": problem.max_budget,
        "eta": problem.eta,
        "strategy": spec.strategy,
        "seed": seed,
        "reference_point": problem.reference_point,
        "final": {"seeds": 0},
        **spec.settings,
        **(settings or {}),
    }
    if settings and "options" in settings:
        values["options"] = {**spec.settings.get("options", {}), **settings["options"]}
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


def min_budget(problem: Problem, method: Method) -> float:
    """The search's min_budget: the problem's, or the method's share of the problem's max_budget (not below it)."""
    if method.min_budget_share is None:
        return problem.min_budget
    return max(problem.min_budget, method.min_budget_share * problem.max_budget)


def _reference_run(problem: Problem, variant: str, seed: int, total_budget: float) -> pd.DataFrame:
    """The plain BoTorch loop (:mod:`bench.comparison.reference_loop`) on a BoTorch problem, its trials as a
    search's."""
    if not problem.botorch:
        raise ValueError(f"the plain BoTorch loop runs on the BoTorch problems only, not on {problem.name}")
    from bench.comparison.reference_loop import run_reference, rungs_of  # BoTorch is in the bench extra only

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
    runs with their cost, ``stage`` ``final`` and ``in_answer`` (their configuration is in the stage's answer,
    ``final_front.csv``)."""
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
    returned = runs["config_id"].isin(result.final.front["config_id"])
    return runs.assign(cost=np.asarray(costs, dtype=float), stage="final", in_answer=returned)


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
    method, seed, the trial (its configuration) and its training seed, its cost, and the curve of the observed
    hypervolume."""
    unknown = sorted(set(methods) - set(METHODS))
    if unknown:
        raise ValueError(f"unknown methods {unknown}; allowed: {list(METHODS)}")
    if total_budget < problem.max_budget:
        raise ValueError(f"total budget {total_budget:g} is below one max-budget trial ({problem.max_budget:g})")
    if not problem.botorch:
        skipped = [method for method in methods if resolved(method).strategy == "reference"]
        if skipped:
            print(f"{problem.name}: {skipped} skipped, they run on the BoTorch problems only", file=sys.stderr)
        methods = [method for method in methods if method not in skipped]
    runs = []
    for seed in seeds:
        for method in methods:
            start = time.perf_counter()
            # a method with the final stage keeps the stage's settings in its folder name: runs of other settings
            # are other runs
            spec = resolved(method)
            stage = spec.final_settings or final
            folder = f"{method}@top{stage.top_k}x{stage.seeds}{FOLDER_ANSWER[stage.answer]}" if spec.final else method
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
                        "config": trials["config"].to_numpy() if "config" in trials else "",
                        "budget": trials["budget"].to_numpy(dtype=float),
                        "status": trials["status"].to_numpy(),
                        "in_answer": _in_answer(trials),
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


def _in_answer(trials: pd.DataFrame) -> np.ndarray:
    """Whether each row is a final-stage run of a configuration in the stage's answer (False without a stage)."""
    if "in_answer" not in trials:
        return np.zeros(len(trials), dtype=bool)
    return trials["in_answer"].fillna(False).astype(bool).to_numpy()
