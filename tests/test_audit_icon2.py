"""ICON²: the formulas on hand-computed tables, attribute handling, settings, and planted confounders end to end."""

from __future__ import annotations

import dataclasses
import io
import math

import numpy as np
import pandas as pd
import pytest
import torch
import torch.nn.functional as F
from omegaconf import OmegaConf

from fairnas.audits.base import AuditData
from fairnas.audits.icon2 import (
    analyse,
    audit,
    cell_sums,
    check_config,
    discretise,
    explanatory_columns,
    icon2_statistics,
    identity_bootstrap,
    probe_performance,
)
from fairnas.data import FaceDataModule, read_generic
from fairnas.data.synthetic.identities import sample_identities
from fairnas.data.synthetic.rendering import render_face, sample_conditions
from fairnas.data.synthetic.spec import SyntheticFaceSpec

# ---------------------------------------------------------------------------------------------------------------
# Exact small tables. Two groups a, b and one attribute E with values x, y; M per probe (1 = correct):
#   a: x -> 1 1 1 1   y -> 0 1          (M_a = 5/6)
#   b: x -> 1 1       y -> 0 0 0 1      (M_b = 3/6)
# M_x = 6/6 = 1, M_y = 2/6 = 1/3; P(x|a) = 4/6, P(x|b) = 2/6.
# Proxy_a = 4/6 * 1 + 2/6 * 1/3 = 7/9; Proxy_b = 2/6 * 1 + 4/6 * 1/3 = 5/9.
# Cells: M_{a,x} = 1, M_{b,x} = 1; M_{a,y} = 1/2, M_{b,y} = 1/4.
# ---------------------------------------------------------------------------------------------------------------
SMALL = pd.DataFrame(
    {
        "identity": ["a1", "a1", "a2", "a2", "a3", "a3", "b1", "b1", "b2", "b2", "b3", "b3"],
        "group": ["a"] * 6 + ["b"] * 6,
        "E": ["x", "x", "x", "x", "y", "y", "x", "x", "y", "y", "y", "y"],
        "performance": [1, 1, 1, 1, 0, 1, 1, 1, 0, 0, 0, 1],
    }
)


def _sd(values, ddof):
    mean = sum(values) / len(values)
    return math.sqrt(sum((v - mean) ** 2 for v in values) / (len(values) - ddof))


@pytest.mark.parametrize("ddof", [0, 1])
def test_formulas_match_hand_computed_numbers(ddof):
    result = analyse(SMALL, SMALL[["E"]], ["a", "b"], ddof=ddof, min_cell=1, n_bootstrap=0)
    row = result.ranking.iloc[0]
    sigma_groups = _sd([5 / 6, 3 / 6], ddof)  # |5/6 - 3/6| / 2 (ddof 0), / sqrt 2 (ddof 1)
    mu = (_sd([1, 1], ddof) + _sd([1 / 2, 1 / 4], ddof)) / 2  # value x: 0, value y: |1/2 - 1/4| * c
    assert result.group == pytest.approx({"a": 5 / 6, "b": 3 / 6})
    assert result.sigma_groups == pytest.approx(sigma_groups)
    assert row["proxy_a"] == pytest.approx(7 / 9) and row["proxy_b"] == pytest.approx(5 / 9)
    assert row["sigma_proxy"] == pytest.approx(_sd([7 / 9, 5 / 9], ddof))
    assert row["mu_controlled"] == pytest.approx(mu)
    assert row["delta"] == pytest.approx(sigma_groups - mu)
    assert row["reduction_pct"] == pytest.approx(100 * (sigma_groups - mu) / sigma_groups)  # 62.5% either ddof
    assert row["skipped_cells"] == 0 and row["skipped_values"] == 0
    assert np.isnan(row["delta_ci_low"])  # no bootstrap, no interval
    cells = result.cells.set_index(["value", "group"])
    assert cells.loc[("y", "a"), "performance"] == pytest.approx(0.5)
    assert cells.loc[("y", "b"), ["n", "share"]].tolist() == pytest.approx([4, 4 / 6])
    assert cells.loc[("y", "b"), "value_performance"] == pytest.approx(1 / 3)


def test_cells_below_min_cell_are_skipped_with_their_value_and_counted():
    # min_cell = 3: cells (a, y) (2 probes) and (b, x) (2 probes) are skipped, so no value has both groups:
    # nothing to control for (mu, delta NaN); the proxy uses every probe and is unchanged.
    result = analyse(SMALL, SMALL[["E"]], ["a", "b"], ddof=1, min_cell=3, n_bootstrap=0).ranking.iloc[0]
    assert result["skipped_cells"] == 2 and result["skipped_values"] == 2
    assert np.isnan(result["mu_controlled"]) and np.isnan(result["delta"])
    assert result["sigma_proxy"] == pytest.approx(_sd([7 / 9, 5 / 9], 1))
    # One more x probe in group b: only value x is complete; mu = sigma(1, 1) = 0, delta = sigma(M_A).
    extra = pd.concat([SMALL, pd.DataFrame({"identity": ["b4"], "group": ["b"], "E": ["x"], "performance": [1]})])
    row = analyse(extra, extra[["E"]], ["a", "b"], ddof=1, min_cell=3, n_bootstrap=0).ranking.iloc[0]
    sigma_groups = _sd([5 / 6, 4 / 7], 1)
    assert row["skipped_cells"] == 1 and row["skipped_values"] == 1
    assert row["mu_controlled"] == pytest.approx(0.0) and row["delta"] == pytest.approx(sigma_groups)


def test_bootstrap_intervals_are_seeded_and_ordered():
    first = analyse(SMALL, SMALL[["E"]], ["a", "b"], min_cell=1, n_bootstrap=100, seed=1).ranking
    again = analyse(SMALL, SMALL[["E"]], ["a", "b"], min_cell=1, n_bootstrap=100, seed=1).ranking
    pd.testing.assert_frame_equal(first, again)
    for key in ("sigma_proxy", "mu_controlled", "delta"):
        assert first.loc[0, f"{key}_ci_low"] <= first.loc[0, f"{key}_ci_high"]
        assert np.isfinite(first.loc[0, f"{key}_ci_low"])


def test_statistics_broadcast_over_bootstrap_axes_and_three_groups():
    counts = np.array([[[2, 2], [1, 3], [3, 1]]], float)
    sums = np.array([[[2, 1], [1, 0], [3, 1]]], float)
    stats = icon2_statistics(np.repeat(counts, 3, axis=0), np.repeat(sums, 3, axis=0), ddof=0, min_cell=1)
    value = np.array([6 / 6, 2 / 6])
    proxy = np.array(
        [0.5 * value[0] + 0.5 * value[1], 0.25 * value[0] + 0.75 * value[1], 0.75 * value[0] + 0.25 * value[1]]
    )
    assert stats["sigma_proxy"].shape == (3,)
    assert stats["proxy"][0] == pytest.approx(proxy) and stats["sigma_proxy"][0] == pytest.approx(np.std(proxy))
    assert stats["controlled"][0] == pytest.approx([0.0, np.std([0.5, 0.0, 1.0])])


def test_cell_sums_and_identity_bootstrap_keep_group_sizes():
    performance, groups, values = np.array([1.0, 0.0, 1.0, 1.0]), np.array([0, 0, 1, 1]), np.array([0, 1, 1, 1])
    counts, sums = cell_sums(performance, groups, values, 2, 2, weights=np.array([[2, 1, 0, 1]]))
    assert counts[0].tolist() == [[2, 1], [0, 1]] and sums[0].tolist() == [[2, 0], [0, 1]]
    identities = np.array(["p", "p", "q", "r", "s", "s", "t"])
    groups = np.array([0, 0, 0, 0, 1, 1, 1])
    weights = identity_bootstrap(identities, groups, 50, seed=3)
    assert weights.shape == (50, 7)
    assert (weights[:, 0] == weights[:, 1]).all() and (weights[:, 4] == weights[:, 5]).all()  # whole identities
    per_identity_a = weights[:, [0, 2, 3]].sum(axis=1)  # p, q, r
    assert (per_identity_a == 3).all() and (weights[:, [4, 6]].sum(axis=1) == 2).all()
    assert (identity_bootstrap(identities, groups, 50, seed=3) == weights).all()


def test_discretise_bins_numeric_columns_and_keeps_few_values_categorical():
    values, kind = discretise(pd.Series(np.arange(100, dtype=float)), bins=4)
    assert kind == "binned" and len(values.categories) == 4
    assert np.bincount(values.codes).tolist() == [25, 25, 25, 25]
    values, kind = discretise(pd.Series([0, 1, 1, 0, 1]), bins=4)  # CelebA-style 0/1: categorical
    assert kind == "categorical" and list(values.categories) == ["0", "1"]
    values, kind = discretise(pd.Series(["hat", None, "none", "hat"]), bins=4)
    assert list(values.categories) == ["hat", "none", "missing"] and values[1] == "missing"


def test_probe_performance_metrics():
    rank = np.array([1, 2, 4])
    assert probe_performance(rank, "correct").tolist() == [1, 0, 0]
    assert probe_performance(rank, "rank").tolist() == [1, 2, 4]
    assert probe_performance(rank, "reciprocal_rank").tolist() == [1, 0.5, 0.25]


def test_explanatory_columns_exclude_reserved_and_check_names():
    frame = pd.DataFrame(columns=["path", "identity", "split", "Male", "Smiling", "lefteye_x", "mask"])
    assert explanatory_columns(frame, "Male") == ["Smiling"]
    assert explanatory_columns(frame, "Male", ["lefteye_x"]) == ["lefteye_x"]
    with pytest.raises(ValueError, match=r"icon2\.attributes: \['Hat'\] .*allowed: \['Smiling', 'lefteye_x', 'mask'\]"):
        explanatory_columns(frame, "Male", ["Hat"])


@pytest.mark.parametrize(
    ("override", "message"),
    [
        ({"metric": "accuracy"}, r"icon2\.metric='accuracy' must be one of \['correct', 'rank', 'reciprocal_rank'\]"),
        ({"bins": 1}, r"icon2\.bins=1 must be an integer >= 2"),
        ({"ddof": 2}, r"icon2\.ddof=2 must be 0"),
        ({"min_cell": 0}, r"icon2\.min_cell=0"),
        ({"n_bootstrap": -1}, r"icon2\.n_bootstrap=-1"),
        ({"max_probes_per_group": 0}, r"icon2\.max_probes_per_group=0"),
        ({"attributes": "occluder"}, r"icon2\.attributes='occluder' must be null"),
        ({"bin": 3}, r"icon2\.bin is not a setting"),
    ],
)
def test_check_config_names_the_bad_key(override, message):
    check_config(OmegaConf.create({}))
    with pytest.raises(ValueError, match=message):
        check_config(OmegaConf.create(override))


# ---------------------------------------------------------------------------------------------------------------
# Planted confounders, end to end: synthetic faces written in the generic format, identified by raw pixels.
# ---------------------------------------------------------------------------------------------------------------
TEST_IDENTITIES, IMAGES, SIZE = 24, 6, 32  # per group; image 0 of each identity is its gallery image


class PixelModel:
    """Raw pixels of the upper half of the image (hair, brows, eyes: what a hat covers) as the embedding, so a
    probe is identified by its nearest clean template in that part of pixel space."""

    device = torch.device("cpu")

    def embed(self, images: torch.Tensor) -> torch.Tensor:
        return F.normalize(images[:, :, : images.shape[2] // 2].flatten(1), dim=1)


def write_planted(root, hat_share: dict[str, float], seed: int = 0):
    """Two groups of faces drawn from one distribution (the group is only a label). Exactly ``hat_share[group]``
    of a group's test probes wear a hat (of a random colour); every image has a group-independent random
    illumination. Gallery, train and val images are hat-free; pose, background and clothing are fixed, so the
    pixel model identifies hat-free probes almost perfectly."""
    spec = SyntheticFaceSpec(n_identities=6 * (TEST_IDENTITIES + 2), image_size=SIZE, seed=seed)
    faces = [p for p in sample_identities(spec) if p.group == 1]  # one face distribution: equally hard groups
    rng = np.random.default_rng(seed)
    rows = []
    for g, group in enumerate(("g0", "g1")):
        people = faces[g::2][: TEST_IDENTITIES + 2]
        splits = ["train", "val"] + ["test"] * TEST_IDENTITIES
        n_probes = TEST_IDENTITIES * (IMAGES - 1)
        hats = set(rng.permutation(n_probes)[: round(hat_share[group] * n_probes)].tolist())
        probe = 0
        for person, split in zip(people, splits, strict=False):
            for k in range(IMAGES if split == "test" else 2):
                occluder = "none"
                if split == "test" and k > 0:
                    occluder = "hat" if probe in hats else "none"
                    probe += 1
                conditions = dataclasses.replace(
                    sample_conditions(spec, 1, rng),
                    yaw=0.0,
                    roll=0.0,
                    scale=1.0,
                    light_gradient=0.0,
                    noise=0.01,
                    background=(128, 128, 128),
                    clothing=(90, 90, 90),
                    illumination=float(rng.uniform(0.95, 1.05)),
                    occluder=occluder,
                )
                path = f"images/{person.name}_{k}.png"
                (root / "images").mkdir(parents=True, exist_ok=True)
                render_face(person.parameters, conditions, SIZE, rng).save(root / path)
                rows.append(
                    {
                        "path": path,
                        "identity": person.name,
                        "split": split,
                        "group": group,
                        "occluder": occluder,
                        "illumination": round(conditions.illumination, 4),
                    }
                )
    pd.DataFrame(rows).to_csv(root / "metadata.csv", index=False)


def planted_data(root, hat_share) -> AuditData:
    write_planted(root, hat_share)
    datamodule = FaceDataModule(lambda: read_generic(root), min_images=2, transforms={"image_size": SIZE})
    datamodule.setup()
    return AuditData(datamodule, "test", seed=0, batch_size=64)


CONFIG = {"n_bootstrap": 200}


@pytest.fixture(scope="module")
def confounded(tmp_path_factory):
    """Hats on 80% of g0's probes and 20% of g1's."""
    return planted_data(tmp_path_factory.mktemp("confounded"), {"g0": 0.8, "g1": 0.2})


def test_planted_confounder_is_ranked_first_and_explains_most_of_the_gap(confounded):
    result = audit(PixelModel(), confounded, OmegaConf.create(CONFIG))
    ranking = result.tables["ranking"].set_index("attribute")
    summary = result.summary
    assert summary["top_attribute"] == "occluder"
    assert ranking.loc["occluder", "sigma_proxy"] > 5 * ranking.loc["illumination", "sigma_proxy"]
    assert summary["group_performance"]["g0"] < summary["group_performance"]["g1"]
    # Hat-free probes are identified at rate ~1 in both groups and hat probes at a rate ~0.3 in both, so within a
    # value of occluder the groups barely differ: most of sigma(M_A) goes (78-100% over data seeds 0-6).
    assert summary["top_reduction_pct"] > 60 and ranking.loc["occluder", "delta_ci_low"] > 0
    assert ranking.loc["occluder", "skipped_cells"] == 0
    assert set(result.tables) == {"ranking", "cells", "probes"} and set(result.figures) == {"delta", "controlled"}
    for figure in result.figures.values():
        figure.savefig(io.BytesIO(), format="png")
    assert len(result.tables["probes"]) == 2 * TEST_IDENTITIES * (IMAGES - 1)
    assert ranking.loc["illumination", "kind"] == "binned" and ranking.loc["illumination", "n_values"] == 4
    assert "ranks occluder first" in result.finding and "Most of the gap comes from" in result.finding


def test_unknown_attribute_fails_before_any_model_call(confounded):
    class Untouchable:
        device = torch.device("cpu")

        def embed(self, images):
            raise AssertionError("the model must not run")

    allowed = r"allowed: \['occluder', 'illumination'\]"
    with pytest.raises(ValueError, match=r"icon2\.attributes: \['hat_colour'\].*" + allowed):
        audit(Untouchable(), confounded, OmegaConf.create({"attributes": ["hat_colour"]}))


def test_nuisance_independent_of_the_group_has_no_proxy_disparity(tmp_path):
    # Each group's probes carry exactly the same share of hats, so P(e | a) is the same for every group and
    # Proxy_a = sum_j P(e_j | a) M_{e_j} is the same number for both: sigma(Proxy) is 0 up to floating-point
    # rounding (tolerance 1e-12), however much the hats hurt identification.
    data = planted_data(tmp_path, {"g0": 0.5, "g1": 0.5})
    result = audit(PixelModel(), data, OmegaConf.create({"n_bootstrap": 0, "attributes": ["occluder"]}))
    row = result.tables["ranking"].iloc[0]
    cells = result.tables["cells"]
    hat, none = (cells[(cells["value"] == v)]["value_performance"].iloc[0] for v in ("hat", "none"))
    assert none - hat > 0.2  # hats do hurt
    assert row["sigma_proxy"] == pytest.approx(0.0, abs=1e-12)
    assert "nan" not in result.finding and "95% CI" not in result.finding  # no bootstrap: no interval
