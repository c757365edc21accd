"""Flipped: exactly the stated share of the stated group's training labels changes, nothing else does; with
``redraw=batch`` anew in every epoch, as a pure function of (seed, epoch); the group named, read or measured."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
import torch

from fairnas.mitigations import FlipGroupLabels, group_by_accuracy
from fairnas.training.build import build_datamodule
from fairnas.training.run import train


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


@pytest.mark.parametrize("epoch", [0, 1])
def test_batch_redraw_flips_the_fraction_anew_every_epoch(epoch):
    labels, groups = labelled_groups()
    flip = FlipGroupLabels(0.25, group="a", seed=3)
    assert flip.per_epoch
    relabelled = flip(labels.copy(), groups, epoch=epoch)

    changed = relabelled != labels
    assert changed.sum() == 10 and not changed[groups == "b"].any()
    assert set(relabelled[changed]) <= set(range(5))  # to other identities of the same group
    assert not np.array_equal(changed, flip(labels.copy(), groups, epoch=epoch + 1) != labels)  # other images


def test_a_batch_draw_depends_only_on_seed_and_epoch():
    """What a resumed run relies on: a fresh instance asked for epoch 2 first sees what a run at epoch 2 saw."""
    labels, groups = labelled_groups()
    running = FlipGroupLabels(0.5, group="a", seed=1)
    seen = [running(labels.copy(), groups, epoch=e) for e in range(3)]
    resumed = FlipGroupLabels(0.5, group="a", seed=1)
    assert np.array_equal(resumed(labels.copy(), groups, epoch=2), seen[2])
    assert np.array_equal(resumed(labels.copy(), groups, epoch=0), seen[0])


def test_run_redraw_keeps_one_draw_for_every_epoch():
    labels, groups = labelled_groups()
    flip = FlipGroupLabels(0.5, group="a", seed=1, redraw="run")
    first = flip(labels.copy(), groups)
    assert not flip.per_epoch and (first != labels).sum() == 20
    for epoch in (1, 2, 7):
        assert np.array_equal(flip(labels.copy(), groups, epoch=epoch), first)


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
    path.write_text(
        json.dumps({"group_order": list(accuracies), "val": {f"accuracy/{g}": a for g, a in accuracies.items()}})
    )
    return path


def test_group_is_read_from_an_earlier_runs_validation_accuracy(tmp_path):
    metrics = write_metrics(tmp_path / "metrics.json", {"g0": 0.6, "g1": 0.8, "g2": 0.7})
    assert group_by_accuracy(metrics, best=True) == "g1"
    assert group_by_accuracy(metrics, best=False) == "g0"
    assert FlipGroupLabels(0.3, reference_metrics=metrics).group == "g1"
    assert FlipGroupLabels(0.3, group="g2", reference_metrics=metrics).group == "g2"  # a named group wins


def test_without_a_group_nothing_is_flipped_until_it_is_measured():
    labels, groups = labelled_groups()
    flip = FlipGroupLabels(0.5, seed=1)
    assert flip.group is None and flip.measures
    assert np.array_equal(flip(labels, groups, epoch=3), labels)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"fraction": 1.5, "group": "a"}, r"mitigation.fraction=1.5 must lie in \[0, 1\]"),
        ({"fraction": 0.3, "group": "a", "redraw": "x"}, r"^mitigation.redraw='x' must be one of batch, run$"),
        ({"fraction": 0.3, "warmup_epochs": 0}, r"^mitigation.warmup_epochs=0 must be a positive integer$"),
        (
            {"fraction": 0.3, "reference_metrics": "/no/metrics.json"},
            "mitigation.reference_metrics: '/no/metrics.json'",
        ),
    ],
)
def test_bad_settings_are_named(kwargs, message):
    with pytest.raises((ValueError, FileNotFoundError), match=message):
        FlipGroupLabels(**kwargs)


def test_unknown_group_lists_the_groups_present():
    labels, groups = labelled_groups()
    with pytest.raises(ValueError, match=r"mitigation.group='c' has no training images; groups present: \['a', 'b'\]"):
        FlipGroupLabels(0.3, group="c")(labels, groups)


def trained_labels(tiny_config, tmp_path, *overrides):
    """Train with ``overrides`` (12-image batches: none of the 96 training images is dropped); the labels each
    training step used, as an [epochs, images] array, the clean labels and groups, and metrics.json."""
    record = tmp_path / "labels.csv"
    metrics = train(
        tiny_config(
            "logger=none",
            "data.batch_size=12",
            "+callbacks.record._target_=tests.helpers.RecordTrainingLabels",
            f"+callbacks.record.path={record}",
            *overrides,
            output_dir=tmp_path / "run",
        )
    )
    rows = pd.read_csv(record).pivot(index="epoch", columns="index", values="label")
    clean = build_datamodule(tiny_config())
    return rows.to_numpy(), clean.train_labels, clean.train_groups(), metrics


def test_training_flips_the_stated_share_of_the_named_group_anew_every_epoch(tiny_config, tmp_path):
    used, clean, groups, metrics = trained_labels(
        tiny_config,
        tmp_path,
        "mitigation=flipped",
        "mitigation.group=g0",
        "mitigation.fraction=0.5",
        "trainer.max_epochs=2",
    )
    changed = used != clean
    for epoch in range(2):
        assert changed[epoch].sum() == round(0.5 * (groups == "g0").sum()) > 0
        assert not changed[epoch][groups != "g0"].any()
        assert set(used[epoch][changed[epoch]]) <= set(clean[groups == "g0"])  # identities of the same group
    assert not np.array_equal(changed[0], changed[1])
    assert metrics["mitigation"] == {"group": "g0", "measured": False, "measurements": []}


def test_run_redraw_flips_the_same_labels_in_every_epoch(tiny_config, tmp_path):
    used, clean, _, _ = trained_labels(
        tiny_config,
        tmp_path,
        "mitigation=flipped",
        "mitigation.group=g1",
        "mitigation.redraw=run",
        "trainer.max_epochs=2",
    )
    assert np.array_equal(used[0], used[1]) and (used[0] != clean).any()


def test_without_a_group_the_better_group_is_measured_after_the_warmup(tiny_config, tmp_path):
    used, clean, groups, metrics = trained_labels(
        tiny_config, tmp_path, "mitigation=flipped", "trainer.max_epochs=2", "logger=csv"
    )
    measured = metrics["mitigation"]
    assert measured["measured"] and measured["measurements"] == [{"epoch": 1, "group": measured["group"]}]
    logged = pd.read_csv(tmp_path / "run" / "csv" / "version_0" / "metrics.csv")
    first = logged.dropna(subset=["val/accuracy/g0"]).iloc[0]
    accuracies = {g: first[f"val/accuracy/{g}"] for g in ("g0", "g1")}
    assert measured["group"] == max(accuracies, key=accuracies.get)  # ties: the first group
    assert np.array_equal(used[0], clean)  # the warm-up epoch trains on the true labels
    changed = used[1] != clean
    assert changed.sum() == round(0.3 * (groups == measured["group"]).sum())
    assert not changed[groups != measured["group"]].any()
    state = torch.load(tmp_path / "run" / "checkpoints" / "last.ckpt", weights_only=True)["callbacks"]
    assert state["FlipGroupLabels"]["group"] == measured["group"]
