"""The study report's forest plot of the claims: one row per claim in the table's order, each effect in paired s.d.
units with its noncentral-t interval (checked against scipy's noncentral t) coloured by its verdict, and the claims
whose effect cannot be put on that scale (no s.d., no effect) drawn at the axis edge, hollow when degenerate (zero
variance, no interval), or as "n/a" instead of breaking the figure."""

from __future__ import annotations

import math
import warnings

import numpy as np
import pandas as pd
import pytest
from matplotlib.colors import to_rgba
from matplotlib.lines import Line2D
from scipy import stats

from fairnas.study.inference import ZERO_VARIANCE
from fairnas.study.report import FOREST_CLIP, VERDICT_COLOURS, forest_figure

NAN = math.nan
CLAIMS = pd.DataFrame(
    [
        # id, family, verdict, n, effect, ci_low, ci_high, sd, p, p_holm
        ("M1", "primary", "holds", 8, -0.02, -0.03, -0.01, 0.01, 0.001, 0.002),
        ("M2", "primary", "does not hold", 8, 0.005, -0.01, 0.02, 0.01, 0.7, 0.7),
        ("E1", "exploratory", "holds", 5, -0.01, NAN, NAN, 0.0, 0.0, NAN),  # the same difference in every seed
        ("E2", "exploratory", "too few seeds", 1, 0.02, NAN, NAN, NAN, NAN, NAN),  # one seed: no s.d.
        ("E3", "exploratory", "not applicable", 0, NAN, NAN, NAN, NAN, NAN, NAN),
    ],
    columns=["id", "family", "verdict", "n", "effect", "ci_low", "ci_high", "sd", "p", "p_holm"],
).assign(status=["tested", "tested", ZERO_VARIANCE, "one seed", "not trained"])
CLAIMS.insert(1, "claim", [f"claim {i}: a searched model lowers the rank disparity of a baseline" for i in range(5)])


@pytest.fixture(scope="module")
def figure():
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # e.g. a glyph missing from the font, a division by zero
        figure = forest_figure(CLAIMS)
        figure.canvas.draw()
    return figure


def _point(axis, claim_id: str) -> Line2D:
    (point,) = [line for line in axis.lines if line.get_gid() == claim_id]
    return point


def test_one_row_per_claim_from_the_top_with_the_primary_claims_marked(figure):
    axis = figure.axes[0]
    ticks = sorted(zip(axis.get_yticks(), axis.get_yticklabels(), strict=True), key=lambda tick: -tick[0])
    assert [label.get_text() for _, label in ticks] == ["★ M1", "★ M2", "E1", "E2", "E3"]
    assert [label.get_fontweight() for _, label in ticks] == ["bold", "bold", "normal", "normal", "normal"]
    assert axis.get_xlabel() == "improvement in the claimed direction (paired s.d. units, d_z)"
    assert figure.get_figheight() == pytest.approx(1.5 + 0.35 * 5)
    legend = [text.get_text() for text in axis.get_legend().get_texts()]
    assert legend[:4] == list(VERDICT_COLOURS)


def test_an_effect_is_drawn_in_paired_sd_units_with_its_noncentral_t_interval(figure):
    axis = figure.axes[0]
    position = {label.get_text(): tick for tick, label in zip(axis.get_yticks(), axis.get_yticklabels(), strict=True)}
    for claim_id, d_z in (("M1", 2.0), ("M2", -0.5)):
        point = _point(axis, claim_id)
        assert point.get_xdata()[0] == pytest.approx(d_z)  # -effect / sd
        assert point.get_ydata()[0] == position[f"★ {claim_id}"] and point.get_marker() == "o"
        row = CLAIMS.set_index("id").loc[claim_id]
        assert to_rgba(point.get_color()) == to_rgba(VERDICT_COLOURS[row["verdict"]])
        (bar,) = [
            line
            for line in axis.lines
            if line.get_gid() is None and len(line.get_xdata()) == 2 and line.get_ydata()[0] == point.get_ydata()[0]
        ]
        low, high = bar.get_xdata()
        # the observed t = d_z sqrt(n) is the 97.5 % quantile of the noncentral t at the lower end, 2.5 % at the upper
        t, df, root_n = d_z * math.sqrt(row["n"]), row["n"] - 1, math.sqrt(row["n"])
        assert stats.nct.cdf(t, df, low * root_n) == pytest.approx(0.975, abs=1e-7)
        assert stats.nct.cdf(t, df, high * root_n) == pytest.approx(0.025, abs=1e-7)
        # not (-ci_high / sd, -ci_low / sd), which takes the s.d. as known
        assert (low, high) != pytest.approx((-row["ci_high"] / row["sd"], -row["ci_low"] / row["sd"]), abs=0.05)
    assert (bar.get_xdata()[0], bar.get_xdata()[1]) == pytest.approx((-1.2237, 0.2543), abs=1e-4)  # M2: d_z -0.5, n 8


def test_effects_without_an_sd_are_clipped_to_the_axis_and_no_effect_reads_n_a(figure):
    axis = figure.axes[0]
    low, high = axis.get_xlim()
    assert low == -high and 3.0 < high <= 1.1 * FOREST_CLIP
    same_every_seed, one_seed = _point(axis, "E1"), _point(axis, "E2")
    assert low < same_every_seed.get_xdata()[0] < high and same_every_seed.get_marker() == ">"  # a decrease: right
    assert same_every_seed.get_fillstyle() == "none" and one_seed.get_fillstyle() == "full"  # degenerate: hollow
    assert (
        not [  # no interval for zero variance
            line
            for line in axis.lines
            if line.get_gid() is None and line.get_ydata()[0] == same_every_seed.get_ydata()[0]
        ]
    )
    assert ZERO_VARIANCE in [text.get_text() for text in axis.get_legend().get_texts()]
    assert low < one_seed.get_xdata()[0] < high and one_seed.get_marker() == "<"  # an increase: left
    assert all(low < x < high for line in axis.lines for x in line.get_xdata())  # points, intervals, the 0 line
    assert not [line for line in axis.lines if line.get_gid() == "E3"]
    (n_a,) = [text for text in axis.texts if text.get_gid() == "E3"]
    assert n_a.get_text().strip() == "n/a"


def test_intervals_beyond_the_clip_are_cut_at_the_axis_edge():
    claims = CLAIMS.iloc[:1].assign(effect=-0.5, ci_low=-0.8, ci_high=-0.2, sd=0.01)  # d_z = 50, from 25 to 76
    axis = forest_figure(claims).axes[0]
    low, high = axis.get_xlim()
    assert high == pytest.approx(1.08 * FOREST_CLIP)
    assert _point(axis, "M1").get_xdata()[0] == FOREST_CLIP and _point(axis, "M1").get_marker() == ">"
    assert max(x for line in axis.lines for x in line.get_xdata()) <= high


def test_the_figure_saves_as_a_drawn_png(figure, tmp_path):
    from PIL import Image

    figure.savefig(tmp_path / "forest.png")
    pixels = np.asarray(Image.open(tmp_path / "forest.png").convert("L")).astype(float)
    assert pixels.std() > 10  # drawn, not blank


def test_an_empty_claims_table_gives_an_empty_figure(tmp_path):
    figure = forest_figure(CLAIMS.iloc[:0])
    figure.savefig(tmp_path / "empty.png")
    assert figure.axes[0].get_title() == "no claims" and not figure.axes[0].get_yticks().size
