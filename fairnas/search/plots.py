"""Matplotlib figure of a search: every trial, the max-budget trials, the observed Pareto front and, after the final
stage, the re-trained candidates' means with their standard errors and the final front."""

from __future__ import annotations

import itertools
from collections.abc import Sequence

import pandas as pd
from matplotlib.figure import Figure

from fairnas.search.pareto import final_trials
from fairnas.search.trial import SUCCESS


def pareto_figure(
    trials: pd.DataFrame,
    front: pd.DataFrame,
    objectives: Sequence[str],
    max_budget: float,
    final_candidates: pd.DataFrame | None = None,
) -> Figure:
    """One panel per pair of objectives: lower-budget trials, max-budget trials, the observed front (a staircase)
    and, given ``final_candidates`` (``final_candidates.csv``), their means ± one standard error over seeds with the
    final front (those ``on_front``) as a staircase."""
    # one objective: plot it against the budget
    pairs = list(itertools.combinations(objectives, 2)) if len(objectives) > 1 else [("budget", objectives[0])]
    figure = Figure(figsize=(5 * len(pairs), 4.5), layout="tight")  # no pyplot: no display or global state
    axes = figure.subplots(1, len(pairs), squeeze=False)
    successes = trials[trials["status"] == SUCCESS]
    final = final_trials(trials, max_budget)
    lower = successes.drop(index=final.index)
    observed = "Pareto front" if final_candidates is None else "observed front (one run)"
    for axis, (x, y) in zip(axes[0], pairs, strict=True):
        axis.scatter(lower[x], lower[y], s=12, color="0.75", label="lower budget")
        axis.scatter(final[x], final[y], s=18, color="tab:blue", label=f"budget {max_budget:g}")
        _staircase(axis, front, x, y, color="tab:red", label=observed, alpha=0.6 if final_candidates is None else 0.35)
        if final_candidates is not None and x != "budget":
            _final(axis, final_candidates, x, y)
        axis.set_xlabel(x)
        axis.set_ylabel(y)
        axis.grid(alpha=0.3)
    axes[0][0].legend(loc="best", fontsize="small")
    return figure


def _staircase(axis, points: pd.DataFrame, x: str, y: str, *, color: str, label: str, alpha: float) -> None:
    staircase = points.sort_values([x, y])
    axis.step(staircase[x], staircase[y], where="post", color=color, alpha=alpha)
    axis.scatter(staircase[x], staircase[y], s=40, color=color, alpha=min(1.0, alpha + 0.4), label=label, zorder=3)


def _final(axis, candidates: pd.DataFrame, x: str, y: str) -> None:
    """The candidates' means with error bars (one s.e.), the final front highlighted."""
    measured = candidates[candidates["n_seeds"] > 0]
    means = measured.rename(columns={f"{x}_mean": x, f"{y}_mean": y})
    axis.errorbar(
        means[x],
        means[y],
        xerr=measured[f"{x}_se"],
        yerr=measured[f"{y}_se"],
        fmt="none",
        ecolor="black",
        elinewidth=1,
        capsize=3,
        zorder=4,
    )
    axis.scatter(
        means[x],
        means[y],
        s=30,
        facecolors="white",
        edgecolors="black",
        zorder=5,
        label="re-trained candidates (mean ± s.e.)",
    )
    on_front = means[measured["on_front"].astype(bool)]
    _staircase(axis, on_front, x, y, color="tab:green", label="final front (means)", alpha=0.8)
