"""Group-disparity formulas of face-identification fairness (thesis Section 4.3.4, Table 4.1).

From per-group mean rank R_g, accuracy A_g and error E_g this module derives the five fairness metrics of
Table 4.1. With two groups (g0, g1 in the configured order, e.g. male, female as in the paper):

    rank_disparity = |R_g0 - R_g1|        (Eq. 4.1)
    disparity      = |A_g0 - A_g1|
    ratio          = |1 - A_g0 / A_g1|
    rank_ratio     = |1 - R_g0 / R_g1|
    error_ratio    = |1 - E_g0 / E_g1|

With more groups the spread between the extreme groups is used instead: max - min for the differences and
max / min - 1 for the ratios. Over a single group a disparity is undefined (not 0): it is refused.
A ratio whose denominator is 0 is 0 when its numerator is 0 too (the groups are equal) and +inf otherwise.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

import numpy as np

GROUP_STATISTICS = ("rank", "accuracy", "error")
DISPARITY_METRICS = ("rank_disparity", "disparity", "ratio", "rank_ratio", "error_ratio")


def group_disparities(per_group: Mapping[str, Mapping[str, float]], group_order: Sequence[str]) -> dict[str, float]:
    """The five Table 4.1 disparity metrics from per-group statistics.

    Args:
        per_group: group name -> {"rank": R_g, "accuracy": A_g, "error": E_g}.
        group_order: names of the groups to compare; with two groups the first is the numerator g0.

    Returns:
        {"rank_disparity", "disparity", "ratio", "rank_ratio", "error_ratio"} -> value (may be +inf).

    Raises:
        ValueError: ``group_order`` names fewer than two groups (:func:`check_disparity_groups`), or a group or
            statistic is missing.
    """
    check_disparity_groups(group_order)
    for group in group_order:
        if group not in per_group:
            raise ValueError(f"group {group!r} in group_order is missing from per_group (has {sorted(per_group)})")
        missing = [name for name in GROUP_STATISTICS if name not in per_group[group]]
        if missing:
            raise ValueError(f"per_group[{group!r}] lacks {missing}; needs {list(GROUP_STATISTICS)}")

    columns = {name: [float(per_group[g][name]) for g in group_order] for name in GROUP_STATISTICS}
    if len(group_order) == 2:
        gap, relative_gap = _pair_gap, _pair_relative_gap
    else:
        gap, relative_gap = _spread, _spread_ratio
    return {
        "rank_disparity": gap(columns["rank"]),
        "disparity": gap(columns["accuracy"]),
        "ratio": relative_gap(columns["accuracy"]),
        "rank_ratio": relative_gap(columns["rank"]),
        "error_ratio": relative_gap(columns["error"]),
    }


OUTSIDE_GROUP_ORDER = "<outside group_order>"
"""Name given to images of groups that ``group_order`` does not list: no per-group metric or disparity reports it."""


def group_names(codes: Sequence[int] | np.ndarray, group_order: Sequence[str]) -> np.ndarray:
    """Group names of group-index ``codes`` (indices into ``group_order``; -1 for a group outside it).

    Code -1 becomes :data:`OUTSIDE_GROUP_ORDER`, never the last listed group: such images still take part in
    ranking as gallery images and impostors, but are reported under no group.
    """
    return np.asarray([*group_order, OUTSIDE_GROUP_ORDER], dtype=object)[np.asarray(codes, dtype=np.int64)]


def check_disparity_groups(group_order: Sequence[str]) -> None:
    """A group order to compare: at least two groups (a disparity over one group is undefined), each once."""
    check_group_order(group_order)
    if len(group_order) < 2:
        raise ValueError(f"a disparity needs at least two groups, not {len(group_order)}: {list(group_order)}")


def check_group_order(group_order: Sequence[str]) -> None:
    """A group order names at least one group, and each group once."""
    if len(group_order) == 0:
        raise ValueError("group_order must name at least one group")
    if len(set(group_order)) != len(group_order):
        raise ValueError(f"group_order has duplicate groups: {list(group_order)}")


def _ratio_distance_from_one(numerator: float, denominator: float) -> float:
    """|1 - numerator / denominator| with 0/0 -> 0 and x/0 -> +inf."""
    if denominator == 0.0:
        return 0.0 if numerator == 0.0 else math.inf
    return abs(1.0 - numerator / denominator)


def _pair_gap(values: list[float]) -> float:
    return abs(values[0] - values[1])


def _pair_relative_gap(values: list[float]) -> float:
    return _ratio_distance_from_one(values[0], values[1])


def _spread(values: list[float]) -> float:
    return max(values) - min(values)


def _spread_ratio(values: list[float]) -> float:
    """max / min - 1, which equals |1 - max / min| for non-negative statistics."""
    return _ratio_distance_from_one(max(values), min(values))
