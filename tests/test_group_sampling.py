"""Group-weighted training (``data.group_sampling``): the drawn group shares follow the setting, an epoch keeps its
number of steps, validation and test are never re-sampled, every draw of an image is augmented anew, DDP ranks take
disjoint parts of one weighted draw, the loss variant weights the loss, and bad settings are one line each."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from lightning_fabric.utilities.distributed import DistributedSamplerWrapper

from fairnas.data import FaceDataModule, read_generic
from fairnas.data.dataset import EpochSeededBatches
from fairnas.data.sampling import GroupSampling, GroupWeightedDraw, as_group_sampling
from tests.test_data import write_generic

TRANSFORMS = {"image_size": 16, "resize": 20, "hflip": 0.5}


@pytest.fixture(scope="module")
def skewed(tmp_path_factory):
    """A generic-format set whose training split is 3:1 between groups a and b: 15 and 5 identities of 4 images
    (60 and 20 images); 2 identities of 3 images per group in val and test."""
    root = tmp_path_factory.mktemp("skewed")
    rows = [(f"train-a-{k}", "train", "a") for k in range(15) for _ in range(4)]
    rows += [(f"train-b-{k}", "train", "b") for k in range(5) for _ in range(4)]
    held_out = [(split, group, k) for split in ("val", "test") for group in "ab" for k in range(2)]
    rows += [(f"{split}-{group}-{k}", split, group) for split, group, k in held_out for _ in range(3)]
    write_generic(root, rows)
    return root


def datamodule(root, tmp_path, in_memory=True, **sampling) -> FaceDataModule:
    module = FaceDataModule(
        lambda: read_generic(root),
        transforms=TRANSFORMS,
        batch_size=8,
        eval_batch_size=10,
        in_memory=in_memory,
        decoded_dir=tmp_path / "decoded",
        seed=5,
        group_sampling=sampling,
    )
    module.setup()
    return module


def epoch_batches(module: FaceDataModule, split: str, epoch: int) -> list[dict]:
    loader = getattr(module, f"{split}_dataloader")()
    loader.sampler.set_epoch(epoch)
    return [module.on_after_batch_transfer(batch, 0) for batch in loader]


def b_share(batches: list[dict]) -> float:
    groups = torch.cat([batch["group"] for batch in batches])
    return float((groups == 1).float().mean())


@pytest.mark.parametrize(
    ("sampling", "expected"),
    [
        ({"alpha": 0}, 0.25),  # natural shares
        ({"alpha": 1}, 0.5),  # balanced
        ({"alpha": 2}, 0.75),  # w = share^-2: 1/0.75^2 * 60 vs 1/0.25^2 * 20
        ({"weights": {"a": 1, "b": 9}}, 0.75),  # 20 * 9 / (60 + 180)
    ],
)
def test_drawn_group_shares_follow_the_setting(skewed, tmp_path, sampling, expected):
    for replacement in (True, False):
        module = datamodule(skewed, tmp_path, **sampling, replacement=replacement)
        shares = [b_share(epoch_batches(module, "train", epoch)) for epoch in range(40)]
        draws = 80 // 8 * 8  # per epoch
        if replacement:  # independent draws: the mean over 40 epochs within 4 binomial standard errors
            assert np.mean(shares) == pytest.approx(expected, abs=4 * np.sqrt(expected * (1 - expected) / (40 * draws)))
        else:  # fixed draws per group; the last, dropped batch is the only variation
            assert np.mean(shares) == pytest.approx(expected, abs=8 / draws)


def test_weighted_epochs_keep_the_number_of_steps_and_evaluation_is_not_resampled(skewed, tmp_path):
    plain, balanced = datamodule(skewed, tmp_path), datamodule(skewed, tmp_path, alpha=1)
    assert len(balanced.train_dataloader()) == len(plain.train_dataloader()) == 80 // 8
    for split in ("val", "test"):
        indices = torch.cat([batch["index"] for batch in epoch_batches(balanced, split, 0)])
        assert sorted(indices.tolist()) == list(range(len(balanced.splits[split])))  # every image once, as is


def test_without_replacement_an_image_repeats_only_after_its_whole_group(skewed, tmp_path):
    groups = np.array([0] * 60 + [1] * 20)
    draw = GroupWeightedDraw(groups, [1 / 0.75, 1 / 0.25], seed=3, replacement=False)
    assert draw.quotas() == [40, 40]
    drawn = draw(epoch=0).numpy()
    counts = np.bincount(drawn, minlength=80)
    assert counts[60:].tolist() == [2] * 20  # each image of b twice: 40 draws of 20 images
    assert counts[:60].max() == 1 and counts[:60].sum() == 40  # a: 40 distinct images of 60
    assert not np.array_equal(drawn, draw(epoch=1).numpy()) and np.array_equal(drawn, draw(epoch=0).numpy())


def test_every_draw_of_an_image_is_augmented_anew(skewed, tmp_path):
    module = datamodule(skewed, tmp_path, alpha=2)
    loader = module.train_dataloader()
    loader.sampler.set_epoch(0)
    raw = list(loader)
    indices = torch.cat([batch["index"] for batch in raw])
    keys = torch.cat([batch["augment"] for batch in raw])
    assert sorted(keys.tolist()) == list(range(len(keys)))  # the draw's positions: one key per draw
    images = torch.cat([module.on_after_batch_transfer(batch, 0)["image"] for batch in raw])
    repeated = int(np.flatnonzero(np.bincount(indices.numpy()) >= 3)[0])
    copies = images[indices == repeated]
    assert not all(torch.equal(copies[0], copy) for copy in copies[1:])


def test_in_memory_and_file_path_draw_the_same_weighted_batches(skewed, tmp_path):
    ours = epoch_batches(datamodule(skewed, tmp_path, in_memory=True, alpha=1), "train", 2)
    theirs = epoch_batches(datamodule(skewed, tmp_path, in_memory=False, alpha=1), "train", 2)
    for a, b in zip(ours, theirs, strict=True):
        for key in ("image", "index", "group"):
            assert torch.equal(a[key], b[key])


def test_ddp_ranks_take_disjoint_parts_of_one_weighted_draw(skewed, tmp_path):
    """The sampler Lightning wraps around ours under DDP: the ranks' batches partition the weighted draw."""
    module = datamodule(skewed, tmp_path, alpha=1)
    draw = module._training_draw()
    single = EpochSeededBatches(80, 8, seed=5, draw=draw, drop_last=True)
    single.set_epoch(3)
    whole = sorted(tuple(key[2].tolist()) for key in single)  # each batch by its draw positions
    parts = []
    for rank in (0, 1):
        wrapped = DistributedSamplerWrapper(
            EpochSeededBatches(80, 8, seed=5, draw=draw, drop_last=True), num_replicas=2, rank=rank, shuffle=True
        )
        wrapped.set_epoch(3)
        parts.append([tuple(key[2].tolist()) for key in wrapped])
    assert len(parts[0]) == len(parts[1]) == 5
    assert not set(parts[0]) & set(parts[1]) and sorted(parts[0] + parts[1]) == whole


def test_loss_variant_sees_every_image_once_and_weights_its_loss(skewed, tmp_path):
    module = datamodule(skewed, tmp_path, alpha=1, via="loss")
    batches = epoch_batches(module, "train", 0)
    indices = torch.cat([batch["index"] for batch in batches])
    assert len(set(indices.tolist())) == len(indices) == 80  # natural sampling, each image once
    for batch in batches:
        expected = torch.where(batch["group"] == 1, 1 / 0.25, 1 / 0.75).float()
        assert torch.allclose(batch["loss_weight"], expected)
    assert "loss_weight" not in epoch_batches(datamodule(skewed, tmp_path, alpha=1), "train", 0)[0]


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        ({"alpha": -1}, r"^data.group_sampling.alpha=-1 must be a number >= 0"),
        ({"alpha": True}, r"^data.group_sampling.alpha=True must be a number >= 0"),
        ({"alpha": 1, "weights": {"a": 1}}, r"^data.group_sampling: give alpha or weights, not both$"),
        ({"weights": {"a": -1, "b": 1}}, r"^data.group_sampling.weights: \{'a': -1\} must be numbers >= 0$"),
        ({"weights": {"a": 0, "b": 0}}, r"^data.group_sampling.weights: at least one weight must be > 0$"),
        ({"alpha": 1, "via": "batch"}, r"^data.group_sampling.via='batch' must be one of \['sampler', 'loss'\]$"),
        ({"alpha": 1, "replacement": "yes"}, r"^data.group_sampling.replacement='yes' must be true or false$"),
        ({"strength": 1}, r"^data.group_sampling: got an unexpected keyword argument 'strength'$"),
    ],
)
def test_bad_settings_are_one_line_naming_the_key(settings, message):
    with pytest.raises(ValueError, match=message):
        as_group_sampling(settings)


def test_weights_must_name_the_data_groups(skewed, tmp_path):
    with pytest.raises(ValueError, match=r"^data.group_sampling.weights: unknown groups \['c'\]; the groups are"):
        datamodule(skewed, tmp_path, weights={"a": 1, "b": 1, "c": 2})
    with pytest.raises(ValueError, match=r"^data.group_sampling.weights: no weight for groups \['b'\]"):
        datamodule(skewed, tmp_path, weights={"a": 1})


def test_off_by_default_and_shares_reported():
    assert not GroupSampling().active and GroupSampling(alpha=0).active
    shares = GroupSampling(alpha=1).draw_shares(["a"] * 3 + ["b"], ["a", "b"])
    assert shares == pytest.approx({"a": 0.5, "b": 0.5})
