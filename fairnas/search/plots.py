"""Matplotlib figure of a search: every trial, the max-budget trials, and the Pareto front highlighted."""

from __future__ import annotations

import itertools
from collections.abc import Sequence

import pandas as pd
from matplotlib.figure import Figure

from fairnas.search.pareto import final_trials
from fairnas.search.trial import SUCCESS


def pareto_figure(trials: pd.DataFrame, front: pd.DataFrame, objectives: Sequence[str], max_budget: float) -> Figure:
    """One panel per pair of objectives: lower-budget trials, max-budget trials, front (as a staircase)."""
    # one objective: plot it against the budget
    pairs = list(itertools.combinations(objectives, 2)) if len(objectives) > 1 else [("budget", objectives[0])]
    figure = Figure(figsize=(5 * len(pairs), 4.5), layout="tight")  # no pyplot: no display or global state
    axes = figure.subplots(1, len(pairs), squeeze=False)
    successes = trials[trials["status"] == SUCCESS]
    final = final_trials(trials, max_budget)
    lower = successes.drop(index=final.index)
    for axis, (x, y) in zip(axes[0], pairs, strict=True):
        axis.scatter(lower[x], lower[y], s=12, color="0.75", label="lower budget")
        axis.scatter(final[x], final[y], s=18, color="tab:blue", label=f"budget {max_budget:g}")
        staircase = front.sort_values([x, y])
        axis.step(staircase[x], staircase[y], where="post", color="tab:red", alpha=0.6)
        axis.scatter(staircase[x], staircase[y], s=40, color="tab:red", label="Pareto front", zorder=3)
        axis.set_xlabel(x)
        axis.set_ylabel(y)
        axis.grid(alpha=0.3)
    axes[0][0].legend(loc="best", fontsize="small")
    return figure
