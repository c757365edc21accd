"""Fairness Indicators: planted effects, exact hand-made examples, settings, and one tiny end-to-end audit."""

from __future__ import annotations

import json
import re

import numpy as np
import pandas as pd
import pytest
import torch
from matplotlib.figure import Figure

from fairnas.audits.base import AuditData
from fairnas.audits.fairness_indicators import (
    DEFAULTS,
    _keep_identities,
    aggregate,
    association_rates,
    attribute_precision,
    audit,
    check_config,
    checked_settings,
    identity_hit_rates,
    identity_precision,
    label_association,
    nearest,
    split_identities,
    top_predictions,
)


def grouped_identities(n_per_group=(40, 40), images=5, seed=0):
    """Identity names and per-image groups of identities with ``images`` images each."""
    identities, groups = [], []
    for group, n in enumerate(n_per_group):
        for i in range(n):
            identities += [f"g{group}_{i}"] * images
            groups += [group] * images
    rng = np.random.default_rng(seed)
    order = rng.permutation(len(groups))  # rows of an identity need not be adjacent
    return np.array(identities)[order], np.array(groups)[order]


def test_query_and_database_halves_are_identity_disjoint_stratified_and_seeded():
    identities, groups = grouped_identities((7, 10))
    is_query = split_identities(identities, groups, seed=3)
    assert not set(identities[is_query]) & set(identities[~is_query])
    for group, n in ((0, 7), (1, 10)):
        assert len(set(identities[is_query & (groups == group)])) == n // 2
        assert len(set(identities[~is_query & (groups == group)])) == n - n // 2
    assert (split_identities(identities, groups, seed=3) == is_query).all()
    assert (split_identities(identities, groups, seed=4) != is_query).any()
    with pytest.raises(ValueError, match="group y has 1 identity.*at least two per group"):
        split_identities(np.array(["a", "a", "b", "c"]), np.array([0, 0, 1, 0]), group_order=["x", "y"])


def test_identity_cap_keeps_whole_identities_per_group_and_drops_groups_outside_the_order():
    identities, groups = grouped_identities((6, 3))
    groups = np.where(identities == "g0_0", -1, groups)  # one identity outside the group order
    rows = _keep_identities(identities, groups, 2, seed=0)
    kept = pd.DataFrame({"identity": identities[rows], "group": groups[rows]})
    assert kept.groupby("group")["identity"].nunique().tolist() == [2, 2] and (kept["group"] >= 0).all()
    assert (kept.groupby("identity").size() == 5).all()
    assert len(_keep_identities(identities, groups, None, seed=0)) == (groups >= 0).sum()


def test_group_planted_in_a_coordinate_is_retrieved_with_precision_one():
    identities, groups = grouped_identities((30, 30))
    rng = np.random.default_rng(0)
    embeddings = torch.as_tensor(rng.normal(size=(len(groups), 16)) * 0.1, dtype=torch.float32)
    embeddings[:, 0] += torch.as_tensor(np.where(groups == 0, 3.0, -3.0), dtype=torch.float32)
    is_query = split_identities(identities, groups)
    for k in (10, 50):
        precision = attribute_precision(
            embeddings[is_query], groups[is_query], embeddings[~is_query], groups[~is_query], k
        )
        assert precision.min() == 1.0
    table = aggregate(precision, groups[is_query], ["a", "b"])
    assert table["precision"].tolist() == [1.0, 1.0, 1.0] and table["gap"].iloc[1] == 0.0


def test_random_embeddings_retrieve_the_base_rate_within_four_standard_errors():
    identities, groups = grouped_identities((120, 280), images=5)  # base rates 0.3 and 0.7
    embeddings = torch.as_tensor(np.random.default_rng(1).normal(size=(len(groups), 32)), dtype=torch.float32)
    is_query = split_identities(identities, groups)
    k = 10
    precision = attribute_precision(embeddings[is_query], groups[is_query], embeddings[~is_query], groups[~is_query], k)
    for group in (0, 1):
        base = (groups[~is_query] == group).mean()
        n = (groups[is_query] == group).sum()
        se = np.sqrt(base * (1 - base) / (n * k))  # binomial s.e. of the mean of n * K draws
        assert abs(precision[groups[is_query] == group].mean() - base) < 4 * se


def test_nearest_in_chunks_equals_one_pass_and_never_returns_the_query_itself():
    embeddings = torch.randn(37, 8, generator=torch.Generator().manual_seed(0))
    whole = nearest(embeddings, embeddings, 4, exclude_self=True, chunk=1000)
    assert (nearest(embeddings, embeddings, 4, exclude_self=True, chunk=5) == whole).all()
    assert not (whole == np.arange(37)[:, None]).any()
    assert (nearest(embeddings, embeddings, 1)[:, 0] == np.arange(37)).all()
    with pytest.raises(ValueError, match="database size"):
        attribute_precision(embeddings[:2], np.zeros(2), embeddings[2:5], np.zeros(3), 4)


def on_circle(degrees) -> torch.Tensor:
    radians = np.deg2rad(np.asarray(degrees, float))
    return torch.as_tensor(np.stack([np.cos(radians), np.sin(radians)], axis=1), dtype=torch.float32)


def test_identity_precision_is_over_min_k_and_the_identitys_other_images():
    embeddings = on_circle([0, 10, 25, 33, 100, 180])
    identities = np.array(["A", "A", "A", "B", "B", "C"])  # C has no other image: left out (NaN)
    expected = {1: [1, 1, 0, 0, 1], 2: [1, 1, 0.5, 0, 1], 3: [1, 1, 1, 0, 1], 4: [1, 1, 1, 1, 1]}
    for k, values in expected.items():
        precision = identity_precision(embeddings, identities, k)
        assert precision[:5].tolist() == pytest.approx(values) and np.isnan(precision[5])
    with pytest.raises(ValueError, match="number of images - 1"):
        identity_precision(embeddings, identities, 6)


def test_label_association_counts_wrong_identities_of_the_same_and_other_groups():
    scores = torch.tensor(
        [
            [0.9, 0.8, 0.7, 0.2],  # identity 0 (group 0)
            [0.6, 0.1, 0.3, 0.5],
        ]
    )  # identity 2 (group 1)
    top_scores, top_labels = top_predictions(scores)
    assert top_labels.tolist() == [[0, 1, 2, 3], [0, 3, 2, 1]]  # 4 templates: top-5 is top-4
    truth, template_groups, probe_groups = np.array([0, 2]), np.array([0, 0, 1, 1]), np.array([0, 1])
    every = label_association(top_scores, top_labels, truth, template_groups, probe_groups)
    assert every[["n_same", "n_other"]].to_numpy().tolist() == [[1, 2], [1, 2]]
    assert every["true"].all() and every["chance"].tolist() == pytest.approx([1 / 3, 1 / 3])
    strict = label_association(top_scores, top_labels, truth, template_groups, probe_groups, threshold=0.55)
    assert strict[["n_same", "n_other"]].to_numpy().tolist() == [[1, 1], [0, 1]]
    assert strict["true"].tolist() == [True, False]
    none = label_association(top_scores, top_labels, truth, template_groups, probe_groups, threshold=0.95)
    assert none[["n_same", "n_other"]].to_numpy().sum() == 0 and not none["true"].any()

    rates = association_rates(strict, probe_groups, ["a", "b"]).set_index("group")
    assert rates.loc["a", ["rate_same", "rate_other", "share_same", "rate_true"]].tolist() == [1, 1, 0.5, 1]
    assert rates.loc["b", ["rate_same", "rate_other", "share_same", "rate_true"]].tolist() == [0, 1, 0, 0]
    assert np.isnan(association_rates(none, probe_groups, ["a", "b"])["share_same"]).all()


def test_hit_rates_count_each_identity_once_with_a_seeded_bootstrap():
    hits = np.array([1, 1, 1, 1, 0, 1, 0, 0, 0])
    identities = np.array(["a", "a", "a", "a", "b", "c", "c", "d", "d"])
    groups = np.array([0, 0, 0, 0, 0, 1, 1, 1, 1])
    table, gap = identity_hit_rates(hits, identities, groups, ["g0", "g1"], n_bootstrap=50, seed=0)
    table = table.set_index("group")
    assert table["identity_averaged"].tolist() == [0.5, 0.25]  # (1 + 0) / 2 and (0.5 + 0) / 2
    assert table["image_averaged"].tolist() == [0.8, 0.25]  # 4 / 5 and 1 / 4
    assert table["n_identities"].tolist() == [2, 2] and table["n_probes"].tolist() == [5, 4]
    assert (table["ci_low"] <= table["identity_averaged"]).all()
    assert (table["identity_averaged"] <= table["ci_high"]).all()
    assert gap["value"] == 0.25 and gap["ci"][0] <= gap["ci"][1]
    again, _ = identity_hit_rates(hits, identities, groups, ["g0", "g1"], n_bootstrap=50, seed=0)
    assert again.set_index("group")["ci_low"].equals(table["ci_low"])
    single, _ = identity_hit_rates(np.array([1, 0]), np.array(["a", "a"]), np.array([0, 0]), ["g0"], n_bootstrap=9)
    assert single[["identity_averaged", "ci_low", "ci_high"]].iloc[0].tolist() == [0.5, 0.5, 0.5]


def test_aggregate_reports_intersectional_subgroups_and_their_gap():
    values = np.array([1.0, 0.0, 1.0, 0.5, np.nan])
    groups = np.array([0, 0, 1, 1, 1])
    table = aggregate(values, groups, ["a", "b"], {"occluder": np.array(["hat", "none", "hat", "hat", "none"])})
    sub = table[table["partition"] == "group x occluder"].set_index(["group", "subgroup"])
    assert sub["precision"].drop(("b", "none")).to_dict() == {("a", "hat"): 1.0, ("a", "none"): 0.0, ("b", "hat"): 0.75}
    assert sub["n_queries"].tolist() == [1, 1, 2, 0] and np.isnan(sub["precision"].loc[("b", "none")])
    assert (sub["gap"] == 1.0).all()  # NaN means are left out of the gap
    assert table.set_index("partition").loc["all", "precision"] == pytest.approx(2.5 / 4)


@pytest.mark.parametrize(
    "overrides, key",
    [
        ({"ks": [0, 10]}, "ks"),
        ({"ks": 10}, "ks"),
        ({"subgroups": ["identity"]}, "subgroups"),
        ({"threshold": 1.5}, "threshold"),
        ({"sweep": 1}, "sweep"),
        ({"sweep": [0.2, 3]}, "sweep"),
        ({"n_bootstrap": 0}, "n_bootstrap"),
        ({"max_probes_per_group": -1}, "max_probes_per_group"),
    ],
)
def test_bad_settings_are_named(overrides, key):
    with pytest.raises(ValueError, match=rf"fairness_indicators\.{key}="):
        check_config(overrides)


def test_settings_fill_defaults_and_reject_unknown_keys():
    from omegaconf import OmegaConf

    settings = checked_settings(OmegaConf.create({"ks": [50, 10, 10], "threshold": 0}))
    assert settings["ks"] == [10, 50] and settings["threshold"] == 0 and settings["sweep"] == DEFAULTS["sweep"]
    with pytest.raises(ValueError, match="fairness_indicators.k is not a setting"):
        check_config({"k": [10]})


class PixelModel:
    """A hand-made model: the embedding is the image's pixels."""

    device = torch.device("cpu")

    def embed(self, images: torch.Tensor) -> torch.Tensor:
        return torch.nn.functional.normalize(images.flatten(1), dim=1)


def test_audit_end_to_end_on_tiny_synthetic_faces(tiny_config):
    from fairnas.training.build import build_datamodule

    datamodule = build_datamodule(tiny_config())
    data = AuditData(datamodule, "test", seed=0, batch_size=16)
    config = {"ks": [3, 50], "subgroups": ["occluder"], "n_bootstrap": 20, "sweep": 5, "threshold": 0.5}
    result = audit(PixelModel(), data, config)

    assert set(result.tables) == {"attribute_retrieval", "identity_retrieval", "label_association", "hit_rates"}
    assert set(result.figures) == {"attribute_precision", "association_sweep"}
    assert all(isinstance(figure, Figure) for figure in result.figures.values())
    attribute = result.tables["attribute_retrieval"]
    n_database = len(data.frame) - result.summary["n_queries"]
    assert attribute.loc[attribute["k"] == 50, "k_used"].eq(n_database).all()  # K > database: clipped
    clipped = attribute[(attribute["k"] == 50) & (attribute["partition"] == "group")]
    assert clipped["precision"].to_numpy() == pytest.approx(clipped["base_rate"].to_numpy())
    assert any("clipped" in note for note in result.summary["notes"])
    assert set(attribute["partition"]) == {"all", "group", "group x occluder"}
    assert attribute["precision"].between(0, 1).all()
    association = result.tables["label_association"]
    assert (association["setting"] == "sweep").sum() == 5 * len(data.group_order)
    assert association.loc[association["setting"] == "configured", "threshold"].eq(0.5).all()
    hits = result.tables["hit_rates"]
    assert set(hits["rank"]) == {1, 5} and hits["identity_averaged"].between(0, 1).all()
    json.dumps(result.summary, allow_nan=False)
    assert 2 <= len(re.findall(r"\.(?= [A-Z]|$)", result.finding)) <= 4 and "base rate" in result.finding
    assert isinstance(result.tables["identity_retrieval"], pd.DataFrame)
