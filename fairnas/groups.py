"""Per-group tables of metrics and the disparities between groups, after fairlearn's MetricFrame (a metric per group,
and the difference between groups), and the mean of a sample with its standard error: :func:`mean_se`, the one
rule every table of means over seeds uses (the audits, the study, the search's final stage, the mitigations table and
the search benchmarks).

fairlearn itself is not a dependency: its MetricFrame calls a ``metric(y_true, y_pred)`` on each group's slice, while
the audits and the study reduce columns of a records table (per group, per group x cell, per source image), which
pandas' grouped reductions do in one call. Their mean and standard error (``sem``, ddof 1) are those of
:func:`mean_se` up to rounding in the last digit (pandas sums with compensation). Only numpy and pandas are imported,
so any package can use this module.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import pandas as pd


def mean_se(values: Sequence[float] | np.ndarray | pd.Series) -> tuple[float, float]:
    """Mean and standard error (ddof 1) of ``values``: the one rule of fairnas. NaN without values; the standard
    error is NaN with one value (a single seed has no spread to measure, not a spread of 0) and with an infinite one.
    A NaN among ``values`` makes both NaN (drop missing values first to skip them)."""
    values = np.asarray(values, dtype=float)
    if len(values) == 0:
        return math.nan, math.nan
    spread = len(values) > 1 and not np.isinf(values).any()
    se = values.std(ddof=1) / math.sqrt(len(values)) if spread else math.nan
    return float(values.mean()), float(se)


def standard_error(values: Sequence[float] | np.ndarray | pd.Series) -> float:
    """The standard error of :func:`mean_se` (a reduction for pandas' ``agg``)."""
    return mean_se(values)[1]


def by_group(
    frame: pd.DataFrame, metrics: Sequence[str], by: Sequence[str], *, statistic: str = "mean", sort: bool = False
) -> pd.DataFrame:
    """``statistic`` (a pandas reduction: ``mean``, ``sem``, ``sum``, ...) of each metric per value of the ``by``
    columns: one row per group (indexed by ``by``; in order of first appearance, sorted with ``sort``), one column
    per metric. Missing values are skipped; rows with a missing ``by`` value belong to no group."""
    return frame.groupby(list(by), sort=sort, observed=True)[list(metrics)].agg(statistic)


def mean_se_by_group(frame: pd.DataFrame, metrics: Sequence[str], by: Sequence[str]) -> pd.DataFrame:
    """Per value of ``by`` (in order of first appearance): the ``by`` columns, ``n`` (rows) and ``<metric>_mean``,
    ``<metric>_se`` (standard error, ddof 1, NaN with one value) of each metric."""
    means, errors = (by_group(frame, metrics, by, statistic=statistic) for statistic in ("mean", "sem"))
    out = frame.groupby(list(by), sort=False, observed=True).size().rename("n").to_frame()
    for metric in metrics:
        out[f"{metric}_mean"], out[f"{metric}_se"] = means[metric], errors[metric]
    return out.reset_index()


def difference(table: pd.DataFrame | pd.Series) -> pd.Series | float:
    """Largest minus smallest value over the groups (the rows of ``table``), per metric: MetricFrame's
    ``difference()``. Missing values are skipped; NaN without any value."""
    return table.max() - table.min()
