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
import logging
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
from _compute_meter import ComputeBudgetReached, CostMeter, EpochsTrained, MeteredTarget, RetrainingCost
from _efficiency_figure import efficiency_figure, volume_on_grid
from analytic import NoisyMultiFidelityProblem
from tabular import TableTarget, front_hypervolume, load_table

from fairnas.io import write_csv_atomic, write_text_atomic
from fairnas.search import SearchResult, SearchSettings, SearchSpace, load_space, run_search
from fairnas.search.hypervolume import hypervolume_curve
from fairnas.search.result import TRIALS_FILE
from fairnas.search.trial import Target
from fairnas.tasks.search_target import TrainingTarget

REPOSITORY = Path(__file__).resolve().parents[1]
METHODS = {
    "smac": "SMAC, continuing",
    "smac_scratch": "SMAC, from scratch",
    "random": "random search",
    "moasha": "Syne Tune MO-ASHA",
    "nsga2": "NSGA-II",
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
    max_hypervolume: float | None = None
    """The best hypervolume any search can reach (a table's own front, an analytic front), when known: results are
    also reported as a share of it."""


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
        max_hypervolume=1.1 * 11.0 - 1 / 3,  # the noise-free front f2 = 1 - sqrt(f1) inside (1.1, 11)
    )


def botorch_problem(name: str) -> Problem:
    """BoTorch's ``MOMFBraninCurrin`` or ``MOMFPark`` (``botorch_problems.py``) over budgets 1 to 8 epochs."""
    from botorch_problems import MomfTarget  # BoTorch is in the bench extra only

    target = MomfTarget(name, min_budget=1, max_budget=8)
    configspace = target.configspace()
    return Problem(
        name=name,
        space=SearchSpace(configspace=configspace, keys={name: name for name in configspace}),
        objectives=target.objectives,
        min_budget=target.min_budget,
        max_budget=target.max_budget,
        eta=2,
        reference_point=target.reference_point,
        default_total_budget=400,
        make_target=lambda run_dir, continuing: (target, RetrainingCost(continuing)),
        max_hypervolume=target.max_hypervolume,
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
        max_hypervolume=max_hypervolume,
    )


def table_problem(name: str = "dpn_showcase", tables: Path | None = None) -> Problem:
    """The tabular benchmark ``bench/tables/<name>`` (``bench/tabular.py``): look-ups instead of training, so
    consumed epochs are charged as if trained (``RetrainingCost``). Reference point: error 1 and 1.1 x the largest
    validation rank disparity of the table at the maximum budget, so every configuration of the table lies inside."""
    table, spec = load_table(name, *([tables] if tables else []))
    objectives, max_budget = tuple(spec["objectives"]), spec["max_budget"]
    final = table[table["epoch"] == max_budget]
    reference_point = (1.0, 1.1 * float(final["val/rank_disparity"].max()))
    target = TableTarget(table, objectives)
    return Problem(
        name=f"table:{name}",
        space=load_space(REPOSITORY / spec["space"]),
        objectives=objectives,
        min_budget=1,
        max_budget=max_budget,
        eta=2,
        reference_point=reference_point,
        default_total_budget=30 * max_budget,
        make_target=lambda run_dir, continuing: (target, RetrainingCost(continuing)),
        max_hypervolume=front_hypervolume(table, objectives, max_budget, reference_point),
    )


PROBLEMS = {
    "analytic": analytic_problem,
    "momf_branin_currin": lambda: botorch_problem("momf_branin_currin"),
    "momf_park": lambda: botorch_problem("momf_park"),
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
) -> pd.DataFrame:
    """One search until ``total_budget`` epochs are consumed; its trials in finishing order with their ``cost``.
    ``settings`` override the problem's ``SearchSettings`` (e.g. ``eta``; ``bench/smac_defaults.py``).

    The result is kept in ``run_dir/consumed.csv``; a run that finished before is read back from it, not re-run,
    and an interrupted one resumes (its recorded trials count towards ``total_budget``).
    """
    finished = run_dir / "consumed.csv"
    if finished.is_file():
        return pd.read_csv(finished)
    target, meter = problem.make_target(run_dir, method != "smac_scratch")
    metered = MeteredTarget(target, meter, limit=total_budget)
    if (run_dir / "search" / TRIALS_FILE).is_file():  # an interrupted run resumes: its trials are charged first
        metered.replay(pd.read_csv(run_dir / "search" / TRIALS_FILE))
    values = {
        "objectives": problem.objectives,
        "min_budget": problem.min_budget,
        "max_budget": problem.max_budget,
        "eta": problem.eta,
        "strategy": "smac" if method == "smac_scratch" else method,
        "seed": seed,
        "reference_point": problem.reference_point,
        **(settings or {}),
    }
    nominal_cap = total_budget * values["eta"] / (values["eta"] - 1) + problem.max_budget
    search_settings = SearchSettings(**values, total_budget=nominal_cap)
    with contextlib.suppress(ComputeBudgetReached):  # trials.csv holds every finished trial
        run_search(metered, problem.space, search_settings, output_dir=run_dir / "search")
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
            runs.append(
                pd.DataFrame(
                    {
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


def summarize(runs: pd.DataFrame, total_budget: float, max_hypervolume: float | None = None) -> pd.DataFrame:
    """Per method: hypervolume at ``total_budget`` (mean, standard deviation and standard error over seeds; as a
    share of ``max_hypervolume`` when given), its difference from random search paired by seed (mean and standard
    error), and the budget to reach random search's mean hypervolume."""
    per_run = runs.groupby(["method", "seed"], sort=False)
    at_budget = per_run.apply(lambda curve: hypervolume_at(curve, total_budget))
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
        cells = [METHODS[row.method], f"{row.hv_mean:.4f} ± {row.hv_sem:.4f}"]
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
        "--total-budget",
        type=float,
        help="consumed epochs per run (default: faces 32, table 30 max-budget trials, others 400)",
    )
    parser.add_argument("--methods", nargs="+", choices=list(METHODS), default=list(METHODS))
    parser.add_argument("--output", type=Path, help="CSV of every trial of every run")
    parser.add_argument("--work-dir", type=Path, help="keep the searches here (default: a temporary directory)")
    parser.add_argument("--figure", type=Path, help="PNG of hypervolume against consumed epochs, a panel per problem")
    args = parser.parse_args(argv)
    if args.seeds < 1:
        parser.error(f"--seeds must be >= 1, got {args.seeds}")
    if os.environ.get("PYTHONHASHSEED") != "0":
        print("note: set PYTHONHASHSEED=0 for repeatable SMAC runs", file=sys.stderr)
    quiet_training_logs()
    # The tiny face models gain nothing from intra-op threads, and threads thrash when the cores are shared.
    torch.set_num_threads(1)

    problems = [factory() for name, factory in PROBLEMS.items() if {name, "all"} & set(args.problem)]
    all_runs, budgets = [], []
    with tempfile.TemporaryDirectory(prefix="search_efficiency_") as scratch:
        work_dir = args.work_dir or Path(scratch)
        for problem in problems:
            total_budget = args.total_budget or problem.default_total_budget
            runs = benchmark(
                problem, methods=args.methods, seeds=range(args.seeds), total_budget=total_budget, work_dir=work_dir
            )
            all_runs.append(runs)
            budgets.append(total_budget)
            summary = summarize(runs, total_budget, problem.max_hypervolume)
            print(format_table(summary, problem, total_budget), flush=True)
    if args.output is not None:
        write_text_atomic(args.output, pd.concat(all_runs, ignore_index=True).to_csv(index=False))
    if args.figure is not None:
        efficiency_figure(problems, all_runs, budgets, METHODS).savefig(args.figure, dpi=100)
    print(f"load average at the end (1/5/15 min): {' '.join(f'{load:.1f}' for load in os.getloadavg())}")


if __name__ == "__main__":
    main()
