"""Reading the benchmark's runs: hypervolume at the budget per run and per method, the budget to reach random
search, the answers' true quality on a noisy table or a surrogate, and their markdown tables.

The hypervolume at the budget counts the trials that finished within it (max-budget successful trials, observed
objectives, the fixed reference point; pymoo's HV through ``fairnas.search.hypervolume``). Budget to reach random
search: the target is the mean over seeds of random search's hypervolume at the total budget; for each run, the
consumed compute after which its hypervolume first reaches it; the table gives the median over seeds and how many
seeds reached it within the total budget (the median is ">B" when fewer than half did).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd

from bench.comparison.figure import volume_on_grid
from bench.comparison.methods import METHODS
from bench.comparison.methods import method as resolved
from fairnas.benchmarks.answer_quality import answer, evaluated, quality
from fairnas.benchmarks.problems import Problem
from fairnas.groups import mean_se


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
    error), and the budget to reach random search's mean hypervolume. A single seed's deviation and standard errors
    are NaN (:func:`~fairnas.groups.mean_se`)."""
    per_run = runs.groupby(["method", "seed"], sort=False)
    at_budget = run_volumes(runs, total_budget).set_index(["method", "seed"])["hypervolume"]
    random = at_budget.xs("random", level="method") if "random" in at_budget.index.get_level_values(0) else None
    goal = None if random is None else random.mean()
    rows = []
    for method, volumes in at_budget.groupby(level="method", sort=False):
        volumes = volumes.droplevel("method")
        hv_mean, hv_sem = mean_se(volumes.dropna())
        row = {
            "method": method,
            "seeds": len(volumes),
            "hv_mean": hv_mean,
            "hv_std": volumes.std(ddof=1),
            "hv_sem": hv_sem,
            "trials_mean": per_run.size()[method].mean(),
            "wall_time_s_mean": per_run["run_wall_time_s"].first()[method].mean(),
        }
        if max_hypervolume:
            row.update(share_mean=row["hv_mean"] / max_hypervolume, share_sem=row["hv_sem"] / max_hypervolume)
        if random is not None:
            difference = (volumes - random).dropna()  # paired by seed
            diff_mean, diff_sem = mean_se(difference)
            row.update(
                diff_mean=diff_mean,
                diff_sem=diff_sem,
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
    """Per run (method, seed) on a noisy table or a surrogate: the true quality of its answer
    (:func:`fairnas.benchmarks.answer_quality.quality`) and ``gap_closed``, its true share as a share of the gap that
    random search leaves: 0 is random search's mean true share at this budget, 1 the best front (NaN without random
    search among the runs; ``heldout_gap_closed`` likewise)."""
    truth = problem.truth
    assert truth is not None and problem.max_hypervolume, "answer quality needs a noisy table's true values"
    rows = []
    for (method, seed), trials in runs.groupby(["method", "seed"], sort=False):
        read = trials["training_seed"].nunique()
        returned = answer(trials, problem.objectives, problem.max_budget)
        trained = evaluated(trials, problem.objectives, problem.max_budget)
        row = quality(returned, truth, problem.reference_point, problem.max_hypervolume, int(seed), read, trained)
        wall = {"run_wall_time_s": float(trials["run_wall_time_s"].iloc[0])} if "run_wall_time_s" in trials else {}
        rows.append({"method": method, "seed": seed, "epochs": trials["cost"].sum(), **row, **wall})
    quality_runs = pd.DataFrame(rows)
    for prefix in ("", "heldout_"):
        shares = quality_runs[f"{prefix}true_share"]
        random = shares[quality_runs["method"] == "random"].mean()
        quality_runs[f"{prefix}gap_closed"] = (shares - random) / (1.0 - random)
    return quality_runs


QUALITY_COLUMNS = (
    "true_share",
    "evaluated_true_share",
    "gap_closed",
    "pick_error",
    "pick_rank_disparity",
    "pick_error_gap",
    "pick_rank_disparity_gap",
)


def format_quality(quality_runs: pd.DataFrame, problem: Problem, total_budget: float, held_out: bool = False) -> str:
    """A markdown table of the answers' true quality per method: mean ± s.e. over seeds, and the paired difference
    from random search and, for a method with the final stage, from the same method without it, in s.e."""
    prefix = "heldout_" if held_out else ""
    columns = [f"{prefix}{name}" for name in QUALITY_COLUMNS if f"{prefix}{name}" in quality_runs]
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
        for other in ("random", method.removesuffix("+final") if resolved(method).final else None):
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
