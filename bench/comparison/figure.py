"""The search-efficiency figure: hypervolume against consumed epochs, mean ± standard error band per method over
seeds, one panel per problem (``bench/search_efficiency.py --figure``)."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

import numpy as np
import pandas as pd
from matplotlib.figure import Figure

from fairnas.groups import standard_error

GRID_POINTS = 201
PANELS_PER_ROW = 3


def volume_on_grid(curve: pd.DataFrame, grid: np.ndarray) -> np.ndarray:
    """A run's hypervolume after each of ``grid``'s consumed budgets: that of the last trial finished within it
    (0 before any); ``curve`` is in finishing order and its hypervolume never decreases."""
    consumed = curve["consumed_budget"].to_numpy(dtype=float)
    volume = curve["hypervolume"].to_numpy(dtype=float)
    last = np.searchsorted(consumed, grid + 1e-9, side="right") - 1
    return np.where(last >= 0, volume[np.maximum(last, 0)], 0.0)


def efficiency_figure(
    problems: Sequence, runs: Sequence[pd.DataFrame], total_budgets: Sequence[float], labels: Mapping[str, str]
) -> Figure:
    """One panel per problem (``problems[i]`` with ``runs[i]`` over ``total_budgets[i]`` epochs): per method, the mean
    hypervolume over seeds (as a share of the problem's maximum where known) with a ± one standard error band."""
    columns = min(len(problems), PANELS_PER_ROW)
    rows = math.ceil(len(problems) / columns)
    figure = Figure(figsize=(4.2 * columns, 3.4 * rows), layout="constrained")
    axes = figure.subplots(rows, columns, squeeze=False).ravel()
    for axis, problem, problem_runs, total_budget in zip(axes, problems, runs, total_budgets, strict=False):
        grid = np.linspace(0.0, total_budget, GRID_POINTS)
        scale = problem.max_hypervolume or 1.0
        for method, method_runs in problem_runs.groupby("method", sort=False):
            volumes = np.array([volume_on_grid(curve, grid) for _, curve in method_runs.groupby("seed")]) / scale
            mean = volumes.mean(axis=0)
            sem = np.apply_along_axis(standard_error, 0, volumes)  # NaN with one seed: no band
            (line,) = axis.plot(grid, mean, label=labels[method], linewidth=1.4)
            axis.fill_between(grid, mean - sem, mean + sem, color=line.get_color(), alpha=0.2, linewidth=0)
        seeds = problem_runs["seed"].nunique()
        axis.set_title(f"{problem.name} ({seeds} seeds)", fontsize=10)
        axis.set_xlabel("consumed epochs")
        axis.set_ylabel("share of the maximum hypervolume" if problem.max_hypervolume else "hypervolume")
        axis.grid(alpha=0.3)
    for axis in axes[len(problems) :]:
        axis.set_visible(False)
    axes[0].legend(fontsize="small", loc="lower right")
    return figure
