"""Search efficiency: hypervolume at equal consumed compute for SMAC, random search and Syne Tune's MO-ASHA.

Methods (every one minimises all objectives; same space, budgets and target per problem):

- ``smac``: ``run_search`` with ``SearchSettings(strategy="smac")``, Hyperband with eta and ParEGO, promoted
  configurations continue from their lower-budget checkpoints (fairnas's default, beyond the paper);
- ``smac_scratch``: the same SMAC search, every promoted configuration retrained from scratch (the paper);
- ``random``: ``run_search`` with ``SearchSettings(strategy="random")``, every configuration trained to the
  maximum budget;
- ``moasha``: ``run_search`` with ``SearchSettings(strategy="moasha")``, Syne Tune's MO-ASHA (the closest peer:
  multi-fidelity, multi-objective; ``fairnas/search/moasha.py``), promoted configurations continue.

Problems:

- ``analytic``: ``NoisyMultiFidelityProblem`` (ZDT1 on [0, 1]^4, noise sd 0.3 / budget), budgets 1 to 8
  "epochs" with eta = 2; reference point (1.1, 11): the objective box [0, 1] x [0, 10] plus 10 %.
- ``faces``: ``TrainingTarget`` on the paper's DPN space (searchspaces/dpn_paper.yaml) with the small
  synthetic-face set of ``experiment=smoke`` on the CPU, budgets 1 to 4 epochs with eta = 2, objectives
  validation error and rank disparity; reference point (1, 1): error 1 is chance, a rank disparity of one
  identity is the worst the front is credited for.

Equal consumed compute. The unit is the epoch actually trained. Random search pays the maximum budget per
trial; ``smac_scratch`` pays each trial's budget; ``smac`` pays a promoted configuration only the epochs between
its highest earlier budget (same seed) and the new one; MO-ASHA pays each trial (one rung) the epochs from the
rung below. On ``faces`` these are measured: ``TrainingTarget(continue_across_fidelities=True/False)`` trains them
and its trial records are read with ``epochs_saved`` (a trial that crashes mid-training records none and costs 0).
On ``analytic`` nothing trains and the same rule is applied to the calls (``RetrainingCost``). Every run is
stopped by one rule on consumed compute (``MeteredTarget``): a trial starts only while the compute consumed is
below ``--total-budget``. ``run_search``'s own ``total_budget`` bounds the nominal
budget (what retraining from scratch costs) and would hand the continuing search less compute than the others,
so it is set to a cap that cannot bind first: promotions go up by eta, so continuing saves at most 1/eta of a
trial's budget and nominal <= eta / (eta - 1) x consumed. The hypervolume at the budget counts the trials that
finished within it (max-budget successful trials, observed objectives, the fixed reference point; pymoo's HV
through ``fairnas.search.hypervolume``). Seed s is the seed of SMAC, of the random sampler (MO-ASHA draws the
same configurations as random search), and of the target (training seed; analytic noise stream).

Budget to reach random search: the target is the mean over seeds of random search's hypervolume at the total
budget; for each run, the consumed compute after which its hypervolume first reaches it; the table gives the
median over seeds and how many seeds reached it within the total budget (the median is ">B" when fewer than half
did).

    PYTHONHASHSEED=0 python bench/search_efficiency.py --problem all --seeds 5 --output search_efficiency.csv
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
import tempfile
import time
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
import torch

from fairnas.io import write_csv_atomic, write_text_atomic
from fairnas.search import SearchResult, SearchSettings, SearchSpace, load_space, run_search
from fairnas.search.hypervolume import hypervolume_curve
from fairnas.search.trial import Target
from fairnas.tasks.search_target import TrainingTarget

from _compute_meter import ComputeBudgetReached, CostMeter, EpochsTrained, MeteredTarget, RetrainingCost
from analytic import NoisyMultiFidelityProblem

REPOSITORY = Path(__file__).resolve().parents[1]
METHODS = {
    "smac": "SMAC, continuing",
    "smac_scratch": "SMAC, from scratch",
    "random": "random search",
    "moasha": "Syne Tune MO-ASHA",
}
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
    make_target: Callable[[Path, bool], tuple[Target, CostMeter]]
    """``make_target(run_dir, continue_across_fidelities)`` -> (target, meter of the epochs each call trains)."""


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
        make_target=lambda run_dir, continuing: (zdt1, RetrainingCost(continuing)),
    )


def face_problem(
    name: str = "faces",
    overrides: Sequence[str] = FACE_OVERRIDES,
    reference_point: tuple[float, float] = (1.0, 1.0),
    default_total_budget: float = 32,
    max_budget: float = 4,
) -> Problem:
    """The paper's DPN space trained on synthetic faces with ``overrides`` (default: ``experiment=smoke``)."""
    space = load_space(REPOSITORY / "searchspaces" / "dpn_paper.yaml")
    objectives = ("error", "rank_disparity")

    def make_target(run_dir: Path, continuing: bool) -> tuple[Target, CostMeter]:
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
    )


PROBLEMS = {"analytic": analytic_problem, "faces": face_problem}


def run_method(problem: Problem, method: str, *, seed: int, total_budget: float, run_dir: Path) -> pd.DataFrame:
    """One search until ``total_budget`` epochs are consumed; its trials in finishing order with their ``cost``.

    The result is kept in ``run_dir/consumed.csv``; a run that finished before is read back from it, not re-run.
    """
    finished = run_dir / "consumed.csv"
    if finished.is_file():
        return pd.read_csv(finished)
    target, meter = problem.make_target(run_dir, method != "smac_scratch")
    metered = MeteredTarget(target, meter, limit=total_budget)
    nominal_cap = total_budget * problem.eta / (problem.eta - 1) + problem.max_budget
    settings = SearchSettings(
        objectives=problem.objectives,
        min_budget=problem.min_budget,
        max_budget=problem.max_budget,
        eta=problem.eta,
        total_budget=nominal_cap,
        strategy="smac" if method == "smac_scratch" else method,
        seed=seed,
        reference_point=problem.reference_point,
    )
    try:
        run_search(metered, problem.space, settings, output_dir=run_dir / "search")
    except ComputeBudgetReached:
        pass  # trials.csv holds every finished trial
    trials = SearchResult.load(run_dir / "search").trials
    trials = trials.assign(cost=metered.costs_of(trials))
    write_csv_atomic(trials, finished)
    return trials


def consumed_curve(trials: pd.DataFrame, problem: Problem) -> pd.DataFrame:
    """Hypervolume of the max-budget front after each trial against the compute consumed so far."""
    curve = hypervolume_curve(trials, problem.objectives, problem.max_budget, problem.reference_point)
    curve["consumed_budget"] = trials["cost"].cumsum().to_numpy()
    return curve


def benchmark(
    problem: Problem, *, methods: Sequence[str], seeds: Sequence[int], total_budget: float, work_dir: Path
) -> pd.DataFrame:
    """Every method with every seed; one row per trial: problem, method, seed, the trial, its cost and the curve."""
    unknown = sorted(set(methods) - set(METHODS))
    if unknown:
        raise ValueError(f"unknown methods {unknown}; allowed: {list(METHODS)}")
    if total_budget < problem.max_budget:
        raise ValueError(f"total budget {total_budget:g} is below one max-budget trial ({problem.max_budget:g})")
    runs = []
    for seed in seeds:
        for method in methods:
            start = time.perf_counter()
            run_dir = work_dir / problem.name / method / f"seed{seed}"
            trials = run_method(problem, method, seed=seed, total_budget=total_budget, run_dir=run_dir)
            curve = consumed_curve(trials, problem)
            wall_time_s = time.perf_counter() - start
            print(
                f"{problem.name} {method} seed {seed}: {len(trials)} trials, {curve['consumed_budget'].iloc[-1]:g} "
                f"epochs, hypervolume {curve['hypervolume'].iloc[-1]:.4f}, {wall_time_s:.0f} s",
                file=sys.stderr,
                flush=True,
            )
            runs.append(pd.DataFrame({
                "problem": problem.name,
                "method": method,
                "seed": seed,
                "n_trials": curve["n_trials"],
                "config_id": trials["config_id"].to_numpy(),
                "budget": trials["budget"].to_numpy(dtype=float),
                "status": trials["status"].to_numpy(),
                **{name: trials[name].to_numpy(dtype=float) for name in problem.objectives},
                "cost": trials["cost"].to_numpy(),
                "consumed_budget": curve["consumed_budget"],
                "hypervolume": curve["hypervolume"],
                "run_wall_time_s": wall_time_s,
            }))
    return pd.concat(runs, ignore_index=True)


def hypervolume_at(curve: pd.DataFrame, budget: float) -> float:
    """Hypervolume of the trials finished within ``budget`` consumed epochs (0 before any)."""
    within = curve.loc[curve["consumed_budget"] <= budget + 1e-9, "hypervolume"]
    return float(within.max()) if len(within) else 0.0


def budget_to_reach(curve: pd.DataFrame, volume: float) -> float:
    """Consumed epochs after which the hypervolume first reaches ``volume`` (inf if it never does)."""
    reached = curve.loc[curve["hypervolume"] >= volume - 1e-12, "consumed_budget"]
    return float(reached.min()) if len(reached) else np.inf


def summarize(runs: pd.DataFrame, total_budget: float) -> pd.DataFrame:
    """Per method: hypervolume at ``total_budget`` (mean, std over seeds) and the budget to reach random search."""
    per_run = runs.groupby(["method", "seed"], sort=False)
    at_budget = per_run.apply(lambda curve: hypervolume_at(curve, total_budget))
    goal = at_budget.xs("random", level="method").mean() if "random" in at_budget.index.get_level_values(0) else None
    rows = []
    for method, volumes in at_budget.groupby(level="method", sort=False):
        row = {
            "method": method,
            "seeds": len(volumes),
            "hv_mean": volumes.mean(),
            "hv_std": volumes.std(ddof=1) if len(volumes) > 1 else 0.0,
            "trials_mean": per_run.size()[method].mean(),
            "wall_time_s_mean": per_run["run_wall_time_s"].first()[method].mean(),
        }
        if goal is not None:
            budgets = np.array([
                budget_to_reach(curve, goal) for (name, _), curve in per_run if name == method
            ])
            within = budgets <= total_budget + 1e-9
            row.update(budget_to_random=float(np.median(np.where(within, budgets, np.inf))), reached=int(within.sum()))
        rows.append(row)
    summary = pd.DataFrame(rows)
    summary.attrs["random_hypervolume"] = goal
    return summary


def format_table(summary: pd.DataFrame, problem: Problem, total_budget: float) -> str:
    goal = summary.attrs["random_hypervolume"]
    lines = [
        f"{problem.name}: hypervolume at {total_budget:g} consumed epochs, reference point {problem.reference_point}, "
        f"budgets {problem.min_budget:g}-{problem.max_budget:g} (eta {problem.eta})",
    ]
    header = f"{'method':<20} | {'seeds':>5} | {'hypervolume (mean ± std)':>24} | {'trials':>6} | {'s / run':>7}"
    if goal is not None:
        header += f" | {f'epochs to reach random ({goal:.4f})':>33}"
    lines += [header, "-" * len(header)]
    for row in summary.itertuples():
        line = (
            f"{METHODS[row.method]:<20} | {row.seeds:>5} | {f'{row.hv_mean:.4f} ± {row.hv_std:.4f}':>24} | "
            f"{row.trials_mean:>6.1f} | {row.wall_time_s_mean:>7.0f}"
        )
        if goal is not None:
            median = f"{row.budget_to_random:g}" if np.isfinite(row.budget_to_random) else f">{total_budget:g}"
            line += f" | {f'{median} (median; {row.reached}/{row.seeds} seeds)':>33}"
        lines.append(line)
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
    parser.add_argument("--problem", choices=[*PROBLEMS, "all"], default="analytic")
    parser.add_argument("--seeds", type=int, default=5, help="seeds 0 .. N-1 per method")
    parser.add_argument("--total-budget", type=float, help="consumed epochs per run (default: analytic 400, faces 32)")
    parser.add_argument("--methods", nargs="+", choices=list(METHODS), default=list(METHODS))
    parser.add_argument("--output", type=Path, help="CSV of every trial of every run")
    parser.add_argument("--work-dir", type=Path, help="keep the searches here (default: a temporary directory)")
    args = parser.parse_args(argv)
    if args.seeds < 1:
        parser.error(f"--seeds must be >= 1, got {args.seeds}")
    if os.environ.get("PYTHONHASHSEED") != "0":
        print("note: set PYTHONHASHSEED=0 for repeatable SMAC runs", file=sys.stderr)
    quiet_training_logs()
    # The tiny face models gain nothing from intra-op threads, and threads thrash when the cores are shared.
    torch.set_num_threads(1)

    problems = [factory() for name, factory in PROBLEMS.items() if args.problem in (name, "all")]
    all_runs = []
    with tempfile.TemporaryDirectory(prefix="search_efficiency_") as scratch:
        work_dir = args.work_dir or Path(scratch)
        for problem in problems:
            total_budget = args.total_budget or problem.default_total_budget
            runs = benchmark(
                problem, methods=args.methods, seeds=range(args.seeds), total_budget=total_budget, work_dir=work_dir
            )
            all_runs.append(runs)
            print(format_table(summarize(runs, total_budget), problem, total_budget), flush=True)
    if args.output is not None:
        write_text_atomic(args.output, pd.concat(all_runs, ignore_index=True).to_csv(index=False))
    print(f"load average at the end (1/5/15 min): {' '.join(f'{load:.1f}' for load in os.getloadavg())}")


if __name__ == "__main__":
    main()
