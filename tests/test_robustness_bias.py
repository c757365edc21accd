"""Robustness-bias scores (thesis eqs. 2.2-2.6) on hand-computed distances."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from fairnas.robustness import clipped_auc, robustness_bias_report, share_beyond

# group a: misclassified, 0.5, 1.0, unbounded (attack failed); group b: 0.2, 0.2, 0.4, 0.6
DISTANCES = np.array([0.0, 0.5, 1.0, math.inf, 0.2, 0.2, 0.4, 0.6])
GROUPS = ["a"] * 4 + ["b"] * 4


def test_share_beyond_counts_strictly_greater_distances():
    np.testing.assert_allclose(share_beyond(DISTANCES[:4], [0.0, 0.5, 0.99, 1.0, 1e9]), [0.75, 0.5, 0.5, 0.25, 0.25])


def test_scores_match_hand_computed_auc_and_sigma():
    report = robustness_bias_report(DISTANCES, GROUPS, n_points=11)
    scores = report.scores.set_index("member")
    assert report.tau_max == 1.0  # largest finite distance
    assert scores.loc["a", "auc"] == pytest.approx((0 + 0.5 + 1 + 1) / 4)  # inf counts as tau_max
    assert scores.loc["b", "auc"] == pytest.approx((0.2 + 0.2 + 0.4 + 0.6) / 4)
    assert scores.loc["a", "sigma"] == pytest.approx(0.625 - 0.35)
    assert scores.loc["b", "sigma"] == pytest.approx(-(0.625 - 0.35))
    assert report.robustness_bias == pytest.approx(0.275)
    assert scores.loc["a", "share_zero"] == 0.25 and scores.loc["a", "share_unbounded"] == 0.25
    assert scores.loc["b", "n"] == 4


def test_curves_hold_i_p_and_rb_at_each_tau():
    report = robustness_bias_report(DISTANCES, GROUPS, n_points=11)
    a = report.curves[report.curves["member"] == "a"].set_index("tau")
    at = a.iloc[3]  # tau = 0.3
    assert a.index[3] == pytest.approx(0.3)
    assert at["share"] == 0.75 and at["share_rest"] == 0.5  # I_a(0.3), I_b(0.3)
    assert at["rb"] == pytest.approx(0.25)  # eq. 2.2
    assert len(report.curves) == 2 * 11


def test_exact_auc_equals_the_integral_of_the_curve():
    distances = np.random.default_rng(0).exponential(0.3, size=200)
    tau_max = float(distances.max())
    taus = np.linspace(0, tau_max, 200_001)
    assert clipped_auc(distances, tau_max) == pytest.approx(np.trapezoid(share_beyond(distances, taus), taus), rel=1e-4)


def test_more_than_two_groups_compare_each_group_with_the_rest():
    distances = np.array([1.0, 1.0, 0.5, 0.5, 0.0, 0.0])
    report = robustness_bias_report(distances, ["x", "x", "y", "y", "z", "z"], ["z", "y", "x"])
    sigma = dict(zip(report.scores["member"], report.scores["sigma"], strict=True))
    assert list(sigma) == ["z", "y", "x"]
    assert sigma["x"] == pytest.approx(1.0 - 0.25) and sigma["y"] == pytest.approx(0.0)
    assert sigma["z"] == pytest.approx(0.0 - 0.75)
    assert report.robustness_bias == pytest.approx(0.75)
    metrics = report.metrics()
    assert metrics["robustness_bias"] == pytest.approx(0.75) and metrics["robustness_sigma/y"] == pytest.approx(0)
    assert metrics["robustness_auc/x"] == pytest.approx(1.0)


def test_no_finite_distance_gives_zero_scores():
    report = robustness_bias_report(np.array([0.0, math.inf, 0.0, 0.0]), ["a", "a", "b", "b"])
    assert report.tau_max == 0.0 and report.robustness_bias == 0.0


@pytest.mark.parametrize(
    "distances, groups, order, match",
    [
        (np.array([0.1, -0.2]), ["a", "b"], None, "non-negative"),
        (np.array([0.1, math.nan]), ["a", "b"], None, "non-negative"),
        (np.array([0.1, 0.2]), ["a", "a"], None, ">= 2 partition members"),
        (np.array([0.1, 0.2]), ["a", "b"], ["a", "c"], "without samples \\['c'\\]"),
        (np.array([0.1, 0.2, 0.3]), ["a", "b"], None, "equal length"),
    ],
)
def test_bad_input_is_rejected(distances, groups, order, match):
    with pytest.raises(ValueError, match=match):
        robustness_bias_report(distances, groups, order)


def test_members_outside_the_order_take_no_part():
    """A group outside data.group_order is neither a member nor in any member's rest, nor sets tau_max."""
    distances = np.array([1.0, 1.0, 0.5, 0.5, 0.0, 0.0, 9.0])
    listed_only = robustness_bias_report(distances[:4], ["x", "x", "y", "y"], n_points=11)
    with_outside = robustness_bias_report(distances, ["x", "x", "y", "y", "z", "z", "z"], ["x", "y"], n_points=11)
    pd.testing.assert_frame_equal(with_outside.scores, listed_only.scores)
    assert with_outside.tau_max == listed_only.tau_max == 1.0
    assert with_outside.robustness_bias == pytest.approx(0.5)
