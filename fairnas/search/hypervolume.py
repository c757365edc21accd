"""Hypervolume of a front and its growth with consumed budget, via pymoo's HV indicator."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd
from pymoo.indicators.hv import HV

from fairnas.search.pareto import final_trials, non_dominated_mask

ReferencePoint = Sequence[float] | np.ndarray
"""A reference point: one value per objective, as a sequence or a 1-d array."""


def hypervolume(points: np.ndarray, reference_point: ReferencePoint) -> float:
    """Volume dominated by ``points`` (n x m, minimised) and bounded by ``reference_point``.

    Points that do not dominate the reference point contribute nothing; no points give 0.
    """
    reference = np.asarray(reference_point, dtype=float)
    points = np.asarray(points, dtype=float).reshape(-1, len(reference))
    inside = points[np.all(points < reference, axis=1)]
    if len(inside) == 0:
        return 0.0
    return float(HV(ref_point=reference)(inside))


def default_reference_point(points: np.ndarray, margin: float = 0.1) -> np.ndarray:
    """Worst value per objective plus ``margin`` times its range (1.0 where the range is 0)."""
    points = np.asarray(points, dtype=float)
    if points.ndim != 2 or len(points) == 0:
        raise ValueError("default_reference_point needs at least one point (n x m array)")
    worst, best = points.max(axis=0), points.min(axis=0)
    span = np.where(worst > best, worst - best, 1.0)
    return worst + margin * span


def hypervolume_curve(
    trials: pd.DataFrame, objectives: Sequence[str], max_budget: float, reference_point: ReferencePoint
) -> pd.DataFrame:
    """Hypervolume of the max-budget front after each finished trial (in trials' row order).

    Columns: n_trials, consumed_budget (summed budget of finished trials, crashed included),
    front_size, hypervolume, and ref_<objective> holding the reference point.
    """
    reference = np.asarray(reference_point, dtype=float)
    if len(reference) != len(objectives):
        raise ValueError(f"reference_point has {len(reference)} values for {len(objectives)} objectives")
    final_rows = set(final_trials(trials, max_budget).index)
    points: list[np.ndarray] = []
    rows, volume, front_size = [], 0.0, 0
    for n_done, (index, budget) in enumerate(
        zip(trials.index, trials["budget"].to_numpy(dtype=float), strict=True), start=1
    ):
        if index in final_rows:
            points.append(trials.loc[index, list(objectives)].to_numpy(dtype=float))
            stacked = np.vstack(points)
            volume = hypervolume(stacked, reference)
            front_size = int(non_dominated_mask(stacked).sum())
        rows.append((n_done, budget, front_size, volume))
    curve = pd.DataFrame(rows, columns=["n_trials", "budget", "front_size", "hypervolume"])
    curve.insert(1, "consumed_budget", curve.pop("budget").cumsum())
    for name, value in zip(objectives, reference, strict=True):
        curve[f"ref_{name}"] = value
    return curve
