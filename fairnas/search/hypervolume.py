"""Hypervolume of a front and its growth with consumed budget, via pymoo's HV indicator."""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import pandas as pd
from pymoo.indicators.hv import HV

from fairnas.search.trial import SUCCESS

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
    curve = HypervolumeCurve(objectives, max_budget, reference)
    values = trials[list(objectives)].to_numpy(dtype=float)
    for budget, status, point in zip(trials["budget"].to_numpy(dtype=float), trials["status"], values, strict=True):
        curve.add(budget, status, point)
    return curve.frame()


class HypervolumeCurve:
    """:func:`hypervolume_curve`'s table kept up to date one finished trial at a time, at a cost that does not grow
    with the trials: a trial costs a dominance check against the front, and a hypervolume only when it changes the
    front. Without a ``reference_point`` the curve uses :func:`default_reference_point` of the max-budget trials so
    far (NaN before there is one), as a search's outputs do; when a trial moves it, the hypervolume of every earlier
    front is computed again under the new point (:attr:`moved` says so after :meth:`add`, and
    :attr:`front_changed` whether the trial changed the front)."""

    def __init__(self, objectives: Sequence[str], max_budget: float, reference_point: ReferencePoint | None = None):
        self.objectives, self.max_budget = list(objectives), float(max_budget)
        self._fixed = reference_point is not None
        self.reference = np.asarray(reference_point, dtype=float) if self._fixed else np.full(len(objectives), np.nan)
        self._rows: list[tuple[int, float, int, int]] = []  # n_trials, consumed budget, front size, front version
        self._front: list[np.ndarray] = []  # the current front's points, in trial order
        self._fronts: list[np.ndarray] = []  # each version of the front
        self._volumes: list[float] = []  # the hypervolume of each version under the current reference point
        self._lowest: np.ndarray = np.full(len(self.objectives), np.inf)  # of the max-budget points so far
        self._highest: np.ndarray = np.full(len(self.objectives), -np.inf)
        self.moved = self.front_changed = False

    def add(self, budget: float, status: str, values: Sequence[float]) -> None:
        """The trial that finished next: its budget, status and objective values (the crash cost when crashed)."""
        consumed = (self._rows[-1][1] if self._rows else 0.0) + float(budget)
        self.moved = self.front_changed = False
        if np.isclose(budget, self.max_budget) and status == SUCCESS:
            point = np.asarray(values, dtype=float)
            self.moved = not self._fixed and self._widen(point)
            self.front_changed = self._joins_front(point)
            if self.front_changed:
                self._fronts.append(np.vstack(self._front))
                self._volumes.append(math.nan)
            if self.moved:
                self.reference = default_reference_point(np.vstack([self._lowest, self._highest]))
                self._volumes = [hypervolume(front, self.reference) for front in self._fronts]
            elif math.isnan(self._volumes[-1]):
                self._volumes[-1] = hypervolume(self._fronts[-1], self.reference)
        self._rows.append((len(self._rows) + 1, consumed, len(self._front), len(self._fronts) - 1))

    def frame(self) -> pd.DataFrame:
        """The curve so far, as :func:`hypervolume_curve` returns it."""
        rows = np.array([row[:3] for row in self._rows], dtype=float).reshape(-1, 3)
        versions = np.array([row[3] for row in self._rows], dtype=int)
        volumes = np.array([0.0, *self._volumes])[versions + 1]
        curve = pd.DataFrame(
            {
                "n_trials": rows[:, 0].astype(int),
                "consumed_budget": rows[:, 1],
                "front_size": rows[:, 2].astype(int),
                "hypervolume": volumes,
            }
        )
        for name, value in zip(self.objectives, self.reference, strict=True):
            curve[f"ref_{name}"] = value
        return curve

    def last(self) -> dict[str, float]:
        """The curve's last row without the reference point, in the table's column order (after an :meth:`add`)."""
        n_trials, consumed, front_size, version = self._rows[-1]
        volume = 0.0 if version < 0 else self._volumes[version]
        return {"n_trials": n_trials, "consumed_budget": consumed, "front_size": front_size, "hypervolume": volume}

    def _joins_front(self, point: np.ndarray) -> bool:
        """Whether ``point`` is non-dominated; if so it joins the front and the points it dominates leave."""
        if any(np.all(other <= point) and np.any(other < point) for other in self._front):
            return False
        self._front = [other for other in self._front if not (np.all(point <= other) and np.any(point < other))]
        self._front.append(point)
        return True

    def _widen(self, point: np.ndarray) -> bool:
        """Track the max-budget points' lowest and highest values; whether they changed (the derived reference)."""
        lowest, highest = np.minimum(self._lowest, point), np.maximum(self._highest, point)
        changed = not (np.array_equal(lowest, self._lowest) and np.array_equal(highest, self._highest))
        self._lowest, self._highest = lowest, highest
        return changed
