"""Flipped: exactly the stated share of the stated group's training labels changes, nothing else does; with
``redraw=batch`` anew in every epoch, as a pure function of (seed, epoch)."""

from __future__ import annotations

import json
import logging

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
    ({"fraction": 0.3, "group": "a", "redraw": "x"}, r"^mitigation.redraw='x' must be one of batch, run$"),
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


def epoch_labels(loader, epoch):
    """The training labels ``loader`` delivers in ``epoch``, by image index."""
    loader.sampler.set_epoch(epoch)
    labels = np.full(len(loader.dataset), -1)
    for batch in loader:
        labels[batch["index"].numpy()] = batch["label"].numpy()
    assert (labels >= 0).all()
    return labels


def test_data_module_delivers_each_epochs_flips_through_the_loader(tiny_config, caplog):
    plain = build_datamodule(tiny_config())
    cfg = tiny_config("mitigation=flipped", "mitigation.group=g0", "mitigation.fraction=0.5",
                      "data.batch_size=12")  # 96 training images: no batch dropped
    with caplog.at_level(logging.INFO, logger="fairnas.mitigations.flipped"):
        flipped = build_datamodule(cfg)
        loader = flipped.train_dataloader()
        by_epoch = [epoch_labels(loader, epoch) for epoch in (0, 1, 0)]

    groups = flipped.splits["train"]["group"].to_numpy()
    changed = [labels != plain.train_labels for labels in by_epoch]
    assert np.array_equal(by_epoch[0], flipped.train_labels) and np.array_equal(by_epoch[2], by_epoch[0])
    for chosen in changed[:2]:
        assert chosen.sum() == round(0.5 * (groups == "g0").sum()) and not chosen[groups != "g0"].any()
    assert not np.array_equal(changed[0], changed[1])
    assert len([r for r in caplog.records if r.getMessage().startswith("Flipped:")]) == 1


def test_data_module_keeps_a_once_per_run_draw_in_every_epoch(tiny_config):
    cfg = tiny_config("mitigation=flipped", "mitigation.group=g0", "mitigation.redraw=run", "data.batch_size=12")
    flipped = build_datamodule(cfg)
    assert np.array_equal(epoch_labels(flipped.train_dataloader(), 3), flipped.train_labels)


def test_data_module_applies_a_plain_transform_once(tiny_config):
    table = instantiate(tiny_config().data.table)
    calls = []

    def shift(labels, groups):
        calls.append(1)
        return (labels + 1) % 16

    data = FaceDataModule(table, label_transform=shift)
    data.setup()
    train = data.dataset("train")
    assert [train[(i, 4)]["label"].item() for i in range(3)] == data.train_labels[:3].tolist()
    assert len(calls) == 1


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
