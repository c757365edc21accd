"""The per-group helper (fairnas.groups) on hand-made tables with known answers: values, shapes, order, errors."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from fairnas.groups import by_group, difference, mean_se, mean_se_by_group, standard_error


def table() -> pd.DataFrame:
    """Groups in the order b, a, c (first appearance); c has one row; a has a missing score; one row has no group."""
    return pd.DataFrame(
        {
            "group": ["b", "a", "b", "a", "c", "a", None],
            "cell": [1, 1, 2, 2, 1, 1, 1],
            "score": [1.0, 2.0, 3.0, np.nan, 5.0, 4.0, 100.0],
            "hit": [1, 0, 1, 1, 0, 0, 1],
        }
    )


def test_mean_se_values_and_edge_cases():
    mean, se = mean_se([1.0, 2.0, 3.0, 4.0])
    assert mean == 2.5 and se == pytest.approx(math.sqrt(5 / 3) / 2)
    assert type(mean) is float and type(se) is float
    assert mean_se(pd.Series([1.0, 2.0, 3.0, 4.0])) == (mean, se)
    assert mean_se([0.5])[0] == 0.5 and math.isnan(mean_se([0.5])[1])
    assert all(math.isnan(v) for v in mean_se([]))
    assert all(math.isnan(v) for v in mean_se([1.0, np.nan, 3.0]))
    mean, se = mean_se([1.0, math.inf])
    assert mean == math.inf and math.isnan(se)  # an infinite value has no standard error either


def test_standard_error_is_mean_se_s_for_pandas_agg():
    frame = pd.DataFrame({"cell": ["x", "x", "y"], "value": [2.0, 4.0, 7.0]})
    errors = frame.groupby("cell")["value"].agg(standard_error)
    assert errors["x"] == mean_se([2.0, 4.0])[1] == 1.0 and math.isnan(errors["y"])
    assert math.isnan(standard_error([1.0, math.inf]))


def test_by_group_keeps_first_appearance_or_sorts_and_skips_missing_values():
    means = by_group(table(), ["score", "hit"], ["group"])
    assert list(means.index) == ["b", "a", "c"] and list(means.columns) == ["score", "hit"]
    assert means.loc["a", "score"] == 3.0 and means.loc["b", "hit"] == 1.0
    assert list(by_group(table(), ["score"], ["group"], sort=True).index) == ["a", "b", "c"]
    sums = by_group(table(), ["score"], ["group"], statistic="sum")["score"]
    assert sums.to_dict() == {"b": 4.0, "a": 6.0, "c": 5.0}


def test_by_group_of_several_columns_has_one_row_per_combination():
    means = by_group(table(), ["score"], ["group", "cell"])
    assert means.index.names == ["group", "cell"]
    assert list(means.index) == [("b", 1), ("a", 1), ("b", 2), ("a", 2), ("c", 1)]
    assert means.loc[("a", 1), "score"] == 3.0 and math.isnan(means.loc[("a", 2), "score"])


def test_by_group_names_an_unknown_column_or_statistic():
    with pytest.raises(KeyError, match="missing"):
        by_group(table(), ["missing"], ["group"])
    with pytest.raises(KeyError, match="nowhere"):
        by_group(table(), ["score"], ["nowhere"])
    with pytest.raises(AttributeError, match="average"):
        by_group(table(), ["score"], ["group"], statistic="average")


def test_mean_se_by_group_columns_and_values():
    frame = table()
    curves = mean_se_by_group(frame, ["score", "hit"], ["group"])
    assert list(curves.columns) == ["group", "n", "score_mean", "score_se", "hit_mean", "hit_se"]
    curves = curves.set_index("group")
    assert curves["n"].to_dict() == {"b": 2, "a": 3, "c": 1}  # rows, a missing score included
    for group in ("a", "b"):
        scores = frame.loc[frame["group"] == group, "score"].dropna()
        assert (curves.loc[group, "score_mean"], curves.loc[group, "score_se"]) == pytest.approx(mean_se(scores))
    assert curves.loc["c", "score_mean"] == 5.0 and math.isnan(curves.loc["c", "score_se"])
    assert mean_se_by_group(frame.iloc[:0], ["score"], ["group"]).empty


def test_difference_between_groups():
    means = by_group(table(), ["score", "hit"], ["group"])
    assert difference(means).to_dict() == {"score": 3.0, "hit": 1.0}
    assert difference(pd.Series([0.2, np.nan, 0.5])) == pytest.approx(0.3)
    assert math.isnan(difference(pd.Series([], dtype=float)))
