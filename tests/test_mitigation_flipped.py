"""Flipped: exactly the stated share of the stated group's training labels changes, nothing else does."""

from __future__ import annotations

import json

import numpy as np
import pytest
from hydra.utils import instantiate

from fairnas.data import FaceDataModule
from fairnas.tasks.runs import build_datamodule
from fairnas.mitigations import FlipGroupLabels, group_by_accuracy, resolve_group


def labelled_groups():
    """60 images: group a holds identities 0-4 (8 images each), group b identities 5-9 (4 images each)."""
    labels = np.concatenate([np.repeat(np.arange(5), 8), np.repeat(np.arange(5, 10), 4)])
    groups = np.array(["a"] * 40 + ["b"] * 20)
    return labels, groups


@pytest.mark.parametrize(("fraction", "n_changed"), [(0.25, 10), (0.5, 20), (1.0, 40), (0.0, 0)])
def test_exactly_the_stated_fraction_of_the_group_changes(fraction, n_changed):
    labels, groups = labelled_groups()
    flipped = FlipGroupLabels(fraction, group="a", seed=3)(labels.copy(), groups)

    changed = flipped != labels
    assert changed.sum() == n_changed
    assert not changed[groups == "b"].any()
    assert set(flipped[changed]) <= set(range(5))  # to other identities of the same group


def test_flips_repeat_for_a_seed_and_differ_across_seeds():
    labels, groups = labelled_groups()
    first = FlipGroupLabels(0.5, group="a", seed=1)(labels.copy(), groups)
    assert np.array_equal(first, FlipGroupLabels(0.5, group="a", seed=1)(labels.copy(), groups))
    assert not np.array_equal(first, FlipGroupLabels(0.5, group="a", seed=2)(labels.copy(), groups))


def test_new_labels_are_uniform_over_the_other_identities():
    labels = np.zeros(20000, dtype=np.int64)
    labels[:5] = [1, 2, 3, 4, 5]  # identities 0-5 in one group; nearly every image is identity 0
    flipped = FlipGroupLabels(1.0, group="a", seed=0)(labels.copy(), np.array(["a"] * len(labels)))
    counts = np.bincount(flipped[5:], minlength=6)
    assert counts[0] == 0
    assert np.allclose(counts[1:] / counts[1:].sum(), 0.2, atol=0.02)


def write_metrics(path, accuracies):
    path.write_text(json.dumps({"group_order": list(accuracies),
                                "val": {f"accuracy/{g}": a for g, a in accuracies.items()}}))
    return path


def test_group_is_measured_from_an_earlier_runs_validation_accuracy(tmp_path):
    metrics = write_metrics(tmp_path / "metrics.json", {"g0": 0.6, "g1": 0.8, "g2": 0.7})
    assert group_by_accuracy(metrics, best=True) == "g1"
    assert group_by_accuracy(metrics, best=False) == "g0"
    assert FlipGroupLabels(0.3, reference_metrics=metrics).group == "g1"
    assert resolve_group("g2", metrics, best=True) == "g2"  # a named group wins


@pytest.mark.parametrize(("kwargs", "message"), [
    ({"fraction": 1.5, "group": "a"}, r"mitigation.fraction=1.5 must lie in \[0, 1\]"),
    ({"fraction": 0.3}, "mitigation.group: name the group with the better accuracy"),
    ({"fraction": 0.3, "reference_metrics": "/no/metrics.json"}, "mitigation.reference_metrics: '/no/metrics.json'"),
])
def test_bad_settings_are_named(kwargs, message):
    with pytest.raises((ValueError, FileNotFoundError), match=message):
        FlipGroupLabels(**kwargs)


def test_unknown_group_lists_the_groups_present():
    labels, groups = labelled_groups()
    with pytest.raises(ValueError, match=r"mitigation.group='c' has no training images; groups present: \['a', 'b'\]"):
        FlipGroupLabels(0.3, group="c")(labels, groups)


def test_data_module_flips_only_training_labels_of_the_group(tiny_config):
    plain = build_datamodule(tiny_config())
    cfg = tiny_config("mitigation=flipped", "mitigation.group=g0", "mitigation.fraction=0.5")
    flipped = build_datamodule(cfg)

    groups = flipped.splits["train"]["group"].to_numpy()
    changed = flipped.train_labels != plain.train_labels
    assert changed.sum() == round(0.5 * (groups == "g0").sum()) > 0
    assert not changed[groups != "g0"].any()
    assert np.array_equal(flipped.dataset("train").labels.numpy(), flipped.train_labels)
    for split in ("val", "test"):
        assert np.array_equal(flipped.dataset(split).labels.numpy(), plain.dataset(split).labels.numpy())


def test_data_module_rejects_a_transform_returning_unknown_classes(tiny_config):
    table = instantiate(tiny_config().data.table)
    with pytest.raises(ValueError, match=r"data.label_transform must return 96 class indices in \[0, 16\)"):
        FaceDataModule(table, label_transform=lambda labels, groups: labels + 1000).setup()


def test_config_reads_the_better_group_from_reference_metrics(tiny_config, tmp_path):
    metrics = write_metrics(tmp_path / "metrics.json", {"g0": 0.9, "g1": 0.4})
    cfg = tiny_config("mitigation=flipped", f"mitigation.reference_metrics={metrics}", "mitigation.fraction=0.25")
    data = build_datamodule(cfg)
    plain = build_datamodule(tiny_config())

    groups = data.splits["train"]["group"].to_numpy()
    changed = data.train_labels != plain.train_labels
    assert changed.sum() == round(0.25 * (groups == "g0").sum()) and not changed[groups == "g1"].any()
