"""The in-memory and the file data path: the same batches, augmentation as a pure function of (seed, epoch, image),
and the decoded-image cache."""

from __future__ import annotations

import logging
import os

import numpy as np
import pytest
import torch
from torchvision.transforms.v2 import functional as F

from fairnas.data import FaceDataModule, read_generic
from fairnas.data.dataset import EpochSeededBatches, EpochSeededSampler, UnreadableImageError
from fairnas.data.decoded import decoded_images
from fairnas.data.transforms import BatchTransform, TransformSettings, crop_and_flip
from tests.test_data import balanced_rows, write_generic

TRANSFORMS = {"image_size": 16, "resize": 20, "hflip": 0.5}


@pytest.fixture
def faces(tmp_path):
    """A generic-format set of 20 x 20 noise images: 6 training identities of 4 images per group."""
    write_generic(
        tmp_path / "faces",
        balanced_rows(n_images=4)
        + [(f"extra-{group}-{k}", "train", group) for group in "ab" for k in range(4) for _ in range(4)],
    )
    return tmp_path / "faces"


def module(root, tmp_path, **options) -> FaceDataModule:
    datamodule = FaceDataModule(
        lambda: read_generic(root),
        transforms=TRANSFORMS,
        batch_size=8,
        eval_batch_size=10,
        decoded_dir=tmp_path / "decoded",
        seed=3,
        **options,
    )
    datamodule.setup()
    return datamodule


def epoch_batches(datamodule: FaceDataModule, split: str, epoch: int = 0) -> list[dict]:
    """The loader's batches of ``split`` as the model receives them (after the batch transform)."""
    loader = getattr(datamodule, f"{split}_dataloader")()
    loader.sampler.set_epoch(epoch)
    return [datamodule.on_after_batch_transfer(batch, 0) for batch in loader]


@pytest.mark.parametrize("workers", [0, 2])
def test_in_memory_and_file_path_deliver_identical_batches(faces, tmp_path, workers):
    memory = module(faces, tmp_path, in_memory=True)
    files = module(faces, tmp_path, in_memory=False, num_workers=workers)
    assert memory.in_memory and not files.in_memory
    for split, epochs in (("train", (0, 1)), ("val", (0,)), ("test", (0,))):
        for epoch in epochs:
            ours, theirs = epoch_batches(memory, split, epoch), epoch_batches(files, split, epoch)
            assert len(ours) == len(theirs) > 0
            for a, b in zip(ours, theirs, strict=False):
                assert a.keys() == b.keys() == {"image", "label", "group", "index"}
                for key in a:
                    assert torch.equal(a[key], b[key]), (split, epoch, key)
    train = epoch_batches(memory, "train")
    assert len(train) == len(memory.splits["train"]) // 8 and all(len(b["label"]) == 8 for b in train)


def test_evaluation_batches_equal_the_per_image_evaluation_transform(faces, tmp_path):
    """The batch path's centre crop and normalisation are bit-identical to the one-image pipeline audits use."""
    datamodule = module(faces, tmp_path, in_memory=True)
    batch = epoch_batches(datamodule, "val")[0]
    dataset = datamodule.dataset("val")
    for row, index in enumerate(batch["index"].tolist()):
        assert torch.equal(batch["image"][row], dataset[index]["image"])
    assert batch["image"].dtype == torch.float32 and batch["image"].shape[1:] == (3, 16, 16)


def test_augmentation_is_a_function_of_seed_epoch_and_image(faces, tmp_path):
    datamodule = module(faces, tmp_path, in_memory=True)
    transform = BatchTransform(datamodule.transform_settings, len(datamodule.splits["train"]), seed=3)
    pixels = torch.from_numpy(np.array(datamodule.decoded_pixels("train")))
    index = torch.tensor([5, 2, 9])
    alone = transform.train(pixels[index], index, epoch=1)
    within = transform.train(pixels[torch.tensor([0, 5, 2, 9])], torch.tensor([0, 5, 2, 9]), epoch=1)[1:]
    assert torch.equal(alone, within)  # an image's crop and flip do not depend on its batch
    again = BatchTransform(datamodule.transform_settings, len(pixels), seed=3).train(pixels[index], index, epoch=1)
    assert torch.equal(alone, again)
    assert not torch.equal(alone, transform.train(pixels[index], index, epoch=2))
    assert not torch.equal(
        alone, BatchTransform(datamodule.transform_settings, len(pixels), seed=4).train(pixels[index], index, epoch=1)
    )


def test_crops_stay_inside_the_image_and_flips_follow_hflip():
    settings = TransformSettings(image_size=16, resize=20, hflip=0.3)
    top, left, flip = BatchTransform(settings, 20000, seed=0).draws(epoch=0)
    assert top.min() == left.min() == 0 and top.max() == left.max() == 4
    assert (torch.bincount(top) > 3000).all() and (torch.bincount(left) > 3000).all()  # 0..4, about uniform
    assert abs(flip.float().mean().item() - 0.3) < 0.02
    fixed = BatchTransform(TransformSettings(image_size=16, resize=20, random_crop=False, hflip=0.0), 50)
    top, left, flip = fixed.draws(epoch=0)
    assert (top == 2).all() and (left == 2).all() and not flip.any()


def test_crop_and_flip_matches_cropping_and_mirroring_each_image():
    generator = torch.Generator().manual_seed(0)
    pixels = torch.randint(0, 256, (6, 3, 11, 13), dtype=torch.uint8, generator=generator)
    top, left = torch.tensor([0, 1, 3, 2, 0, 3]), torch.tensor([0, 5, 2, 1, 4, 0])
    flip = torch.tensor([False, True, True, False, True, False])
    batch = crop_and_flip(pixels, top, left, flip, size=8)
    for b in range(6):
        expected = F.crop(pixels[b], int(top[b]), int(left[b]), 8, 8)
        assert torch.equal(batch[b], F.horizontal_flip(expected) if flip[b] else expected)


def test_batch_keys_cover_the_epoch_order_once(faces, tmp_path):
    sampler, batches = EpochSeededSampler(30, seed=1), EpochSeededBatches(30, 8, seed=1, drop_last=True)
    for epoch in (0, 4):
        sampler.set_epoch(epoch)
        batches.set_epoch(epoch)
        order = [index for index, _, _ in sampler]
        keys = list(batches)
        assert len(keys) == len(batches) == 3 and {key[1] for key in keys} == {epoch}
        assert np.concatenate([key[0] for key in keys]).tolist() == order[:24]
        assert np.concatenate([key[2] for key in keys]).tolist() == order[:24]  # augmented as the image itself
    evaluation = EpochSeededBatches(30, 8, shuffle=False)
    assert len(evaluation) == 4 and [len(key[0]) for key in evaluation] == [8, 8, 8, 6]
    assert {key[1] for key in evaluation} == {None}


def test_decoded_images_are_cached_and_mapped(faces, tmp_path, monkeypatch):
    paths = read_generic(faces).frame["path"].tolist()[:5]
    first = decoded_images(faces, paths, 20, tmp_path / "cache")
    assert first.shape == (5, 3, 20, 20) and first.dtype == np.uint8 and isinstance(first, np.memmap)
    assert len(list((tmp_path / "cache").glob("*.npy"))) == 1
    monkeypatch.setattr("fairnas.data.decoded._decode", lambda *args: pytest.fail("decoded again"))
    assert np.array_equal(decoded_images(faces, paths, 20, tmp_path / "cache"), first)
    monkeypatch.undo()
    assert np.array_equal(decoded_images(faces, paths, 20, None), first)  # no cache: decoded in memory

    stat = (faces / paths[0]).stat()  # a replaced image gets a new key
    os.utime(faces / paths[0], ns=(stat.st_atime_ns, stat.st_mtime_ns + 10**9))
    decoded_images(faces, paths, 20, tmp_path / "cache")
    assert len(list((tmp_path / "cache").glob("*.npy"))) == 2


def test_a_read_only_cache_decodes_for_this_run_only(faces, tmp_path, caplog):
    blocked = tmp_path / "not_a_folder"
    blocked.write_text("a file where the cache folder would be")
    paths = read_generic(faces).frame["path"].tolist()[:3]
    with caplog.at_level(logging.WARNING):
        pixels = decoded_images(faces, paths, 20, blocked / "decoded")
    assert pixels.shape == (3, 3, 20, 20) and "cannot cache decoded images" in caplog.text


def test_unreadable_and_missing_images_are_named(faces, tmp_path):
    paths = read_generic(faces).frame["path"].tolist()[:3]
    (faces / paths[1]).write_bytes(b"not a png")
    with pytest.raises(UnreadableImageError, match=rf"cannot read image '.*{paths[1]}'"):
        decoded_images(faces, paths, 20, tmp_path / "cache")
    assert not list((tmp_path / "cache").glob("*.npy"))  # nothing half-written is left
    with pytest.raises(UnreadableImageError, match=r"cannot read image '.*missing.png'"):
        decoded_images(faces, [*paths[:1], "missing.png"], 20, tmp_path / "cache")


def test_in_memory_auto_follows_the_limit_and_bad_settings_are_named(faces, tmp_path):
    n_images = len(read_generic(faces).frame)
    decoded_gib = n_images * 3 * 20 * 20 / 2**30
    assert module(faces, tmp_path, in_memory="auto", in_memory_limit_gb=decoded_gib * 1.01).in_memory
    assert not module(faces, tmp_path, in_memory="auto", in_memory_limit_gb=decoded_gib * 0.99).in_memory
    with pytest.raises(ValueError, match=r"^data.in_memory='yes'; allowed: auto, true, false$"):
        module(faces, tmp_path, in_memory="yes")
    with pytest.raises(ValueError, match=r"^data.in_memory_limit_gb=0 must be a positive number"):
        module(faces, tmp_path, in_memory="auto", in_memory_limit_gb=0)
