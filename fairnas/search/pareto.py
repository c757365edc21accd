"""Pareto fronts of a search: non-dominated successful trials at the maximum budget (thesis Sec. 4.4).

All objectives are minimised. Non-domination is pymoo's (weak: identical points are all kept).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd
from pymoo.util.nds.non_dominated_sorting import find_non_dominated

from fairnas.search.trial import SUCCESS


def non_dominated_mask(points: np.ndarray) -> np.ndarray:
    """Boolean mask of the rows of ``points`` (n x m, minimised) that no other row dominates."""
    points = np.asarray(points, dtype=float)
    if points.ndim != 2:
        raise ValueError(f"points must be a 2-D array (n points x m objectives), got shape {points.shape}")
    mask = np.zeros(len(points), dtype=bool)
    mask[find_non_dominated(points)] = True
    return mask


def final_trials(trials: pd.DataFrame, max_budget: float) -> pd.DataFrame:
    """The successful trials that ran at the maximum budget (the candidates for the front)."""
    at_max = np.isclose(trials["budget"].to_numpy(dtype=float), max_budget)
    return trials[at_max & (trials["status"] == SUCCESS).to_numpy()]


def pareto_front(trials: pd.DataFrame, objectives: Sequence[str], max_budget: float) -> pd.DataFrame:
    """Non-dominated successful trials at ``max_budget``, sorted by the first objective."""
    candidates = final_trials(trials, max_budget)
    front = candidates[non_dominated_mask(candidates[list(objectives)].to_numpy(dtype=float))]
    return front.sort_values(list(objectives), kind="stable").reset_index(drop=True)
