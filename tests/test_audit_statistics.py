"""Group-disparity statistics on hand-made data with known answers: tests, Holm correction, odds ratios."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from statsmodels.stats.multitest import multipletests

from fairnas.audits.statistics import (
    KRUSKAL,
    WILCOXON,
    group_tests,
    holm,
    odds_ratios,
    scoped_tests,
    unit_means,
)

CELLS = [(c, s) for c in ("blur", "noise") for s in (1, 2)]


def records(shift: float = 0.0, n_units: int = 60, seed: int = 0, groups=("a", "b")) -> pd.DataFrame:
    """One record per unit x cell; metric ``score`` ~ N(0, 1) + ``shift`` for the last group; ``hit`` in {0, 1}."""
    rng = np.random.default_rng(seed)
    rows = []
    for unit in range(n_units * len(groups)):
        group = groups[unit % len(groups)]
        for corruption, severity in CELLS:
            score = rng.normal() + (shift if group == groups[-1] else 0.0)
            rows.append(
                {
                    "unit": unit,
                    "group": group,
                    "corruption": corruption,
                    "severity": severity,
                    "score": score,
                    "hit": int(score > 0),
                }
            )
    return pd.DataFrame(rows)


def test_identical_groups_give_no_significant_test():
    tests = scoped_tests(records(), ["score", "hit"], ["a", "b"], unit="unit", scopes=("corruption", "severity"))
    assert len(tests) == 2 * (1 + 2 + 2) * 2  # metrics x scopes x (Kruskal-Wallis + one pair)
    assert set(tests["test"]) == {KRUSKAL, WILCOXON} and not tests["significant"].any()
    assert (tests["n"][tests["scope"] == "pooled"] == 120).all()  # per-unit means: one value per unit


def test_shifted_group_is_significant_and_named_worse():
    tests = scoped_tests(records(shift=-1.0), ["score"], ["a", "b"], unit="unit", scopes=("corruption",))
    assert tests["significant"].all() and (tests["worse"] == "b").all()
    flipped = scoped_tests(records(shift=-1.0), ["score"], ["a", "b"], unit="unit", lower_is_better=("score",))
    assert (flipped["worse"] == "a").all()


def test_holm_adjustment_is_statsmodels_multipletests_over_the_whole_table():
    tests = scoped_tests(
        records(shift=-0.3, seed=1),
        ["score", "hit"],
        ["a", "b"],
        unit="unit",
        scopes=("corruption", "severity"),
        alpha=0.05,
    )
    reject, adjusted = multipletests(tests["p"], alpha=0.05, method="holm")[:2]
    np.testing.assert_allclose(tests["p_holm"], adjusted)
    assert ((tests["p_holm"] < 0.05) == reject).all()
    adjusted, rejected = holm(np.array([0.01, np.nan, 0.04]))
    assert np.isnan(adjusted[1]) and not rejected[1]
    np.testing.assert_allclose(adjusted[[0, 2]], multipletests([0.01, 0.04], method="holm")[1])


def test_pairwise_tests_need_a_significant_kruskal_wallis():
    frame = records(shift=-1.2, n_units=40, groups=("a", "b", "c"))
    tests = scoped_tests(frame, ["score"], ["a", "b", "c"], unit="unit")
    pairs = tests[tests["test"] == WILCOXON].set_index("groups")
    assert list(pairs.index) == ["a,b", "a,c", "b,c"]
    assert not pairs.loc["a,b", "significant"] and pairs.loc["a,c", "significant"]
    kruskal = tests[tests["test"] == KRUSKAL].set_index(["metric", "scope", "scope_value"])["significant"]
    for row in tests[(tests["test"] == WILCOXON) & tests["significant"]].itertuples():
        assert kruskal[(row.metric, row.scope, row.scope_value)]


def test_constant_metric_gives_p_one_and_a_note_and_missing_groups_take_no_part():
    frame = records().assign(score=1.0)
    rows = group_tests(frame, "score", ["a", "b", "absent"])
    assert [row["test"] for row in rows] == [KRUSKAL, WILCOXON]
    assert all(row["p"] == 1.0 and np.isnan(row["statistic"]) and row["note"] == "constant" for row in rows)
    assert group_tests(frame[frame["group"] == "a"], "score", ["a", "b"]) == []
    assert scoped_tests(frame.iloc[:0], ["score"], ["a", "b"], unit="unit").empty


def test_unit_means():
    frame = records()
    means = unit_means(frame, ["score"], "unit", ["severity"])
    assert len(means) == 120 * 2
    assert list(means.columns) == ["severity", "group", "unit", "score"]
    expected = frame[(frame["unit"] == 3) & (frame["severity"] == 2)]["score"].mean()
    assert means[(means["unit"] == 3) & (means["severity"] == 2)]["score"].item() == pytest.approx(expected)


def planted_logit(log_or: float, n_units: int = 400, seed: int = 3) -> pd.DataFrame:
    """Binary outcomes with cell effects, a per-unit random effect and the group effect ``log_or``."""
    rng = np.random.default_rng(seed)
    cell_effect = {cell: effect for cell, effect in zip(CELLS, (1.0, 0.2, -0.4, -1.0), strict=True)}
    rows = []
    for unit in range(n_units):
        group, unit_effect = ("a", "b")[unit % 2], rng.normal(scale=0.5)
        for cell in CELLS:
            logit = cell_effect[cell] + unit_effect + (log_or if group == "b" else 0.0)
            rows.append(
                {
                    "unit": unit,
                    "group": group,
                    "corruption": cell[0],
                    "severity": cell[1],
                    "hit": int(rng.random() < 1 / (1 + np.exp(-logit))),
                }
            )
    return pd.DataFrame(rows)


def test_odds_ratio_of_a_planted_logistic_effect_is_recovered_within_its_ci():
    ratios = odds_ratios(
        planted_logit(np.log(0.5)), "hit", ["a", "b"], cluster="unit", fixed=("corruption", "severity")
    )
    row = ratios.iloc[0]
    assert (row["group"], row["reference"], row["note"]) == ("b", "a", "")
    assert row["ci_low"] < 0.5 < row["ci_high"] and row["ci_high"] < 1 and row["p"] < 0.05
    assert row["n"] == 1600 and row["n_clusters"] == 400
    null = odds_ratios(planted_logit(0.0), "hit", ["a", "b"], cluster="unit", fixed=("corruption", "severity"))
    assert null.iloc[0]["ci_low"] < 1 < null.iloc[0]["ci_high"]


def test_odds_ratios_drop_constant_cells_and_report_separation_with_a_reason():
    frame = planted_logit(np.log(0.5))
    constant_cell = pd.DataFrame(
        {"unit": range(400), "group": ["a", "b"] * 200, "corruption": "fog", "severity": 1, "hit": 1}
    )
    ratios = odds_ratios(
        pd.concat([frame, constant_cell]), "hit", ["a", "b"], cluster="unit", fixed=("corruption", "severity")
    )
    assert ratios.iloc[0]["n"] == 1600 and ratios.iloc[0]["note"] == ""
    separated = frame.assign(hit=np.where(frame["group"] == "b", 1, frame["hit"]))
    row = odds_ratios(separated, "hit", ["a", "b"], cluster="unit", fixed=("corruption", "severity")).iloc[0]
    assert np.isnan(row["odds_ratio"]) and "perfect separation" in row["note"]
    row = odds_ratios(frame.assign(hit=0), "hit", ["a", "b"], cluster="unit", fixed=("corruption",)).iloc[0]
    assert np.isnan(row["odds_ratio"]) and "constant within every cell" in row["note"]
    three = odds_ratios(
        frame.assign(group=np.where(frame["unit"] % 3 == 0, "c", frame["group"])),
        "hit",
        ["a", "b", "c"],
        cluster="unit",
        fixed=("corruption", "severity"),
    )
    assert list(three["group"]) == ["b", "c"] and three["odds_ratio"].notna().all()
