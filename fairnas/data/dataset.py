"""Datasets and samplers over a split of a :class:`~fairnas.data.table.FaceTable`.

Two ways to the same batches. The file path (:class:`FaceImageDataset`, :class:`EpochSeededSampler`) opens every
image from disk per item, in DataLoader workers, for data sets too large to hold decoded. The in-memory path
(:class:`DecodedBatches`, :class:`EpochSeededBatches`) gathers whole batches from the split's decoded uint8 array
(:mod:`fairnas.data.decoded`). Both deliver the resized uint8 pixels of the same images in the same batches:
the training order is a permutation drawn from (seed, epoch) (or a group-weighted draw,
:mod:`fairnas.data.sampling`), and training batches carry their epoch and each image's augmentation key so that
:class:`~fairnas.data.transforms.BatchTransform` can crop and flip them on the model's device. A run resumed
from a checkpoint therefore sees exactly the batches of an uninterrupted run, whatever the path or the number of
workers; this is what lets the search continue a configuration across fidelities instead of retraining it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TypeVar

import numpy as np
import torch
from PIL import Image
from torch.utils.data import Dataset, Sampler

from fairnas.data.transforms import mix_seed


class UnreadableImageError(ValueError):
    """An image of the table cannot be read (checked at load time unless the format verified every image)."""


class FaceImageDataset(Dataset):
    """Items from image files: dicts with ``image`` (``transform`` of the RGB image), ``label`` (class index),
    ``group`` (group index) and ``index``; an item asked for as ``(index, epoch, augment)`` (training) also has
    ``epoch`` and ``augment`` (the key its crop and flip are drawn for)."""

    def __init__(
        self,
        root: Path,
        paths: list[str],
        labels: np.ndarray,
        groups: np.ndarray,
        transform: Callable[[Image.Image], torch.Tensor],
    ):
        self.root = Path(root)
        self.paths = list(paths)
        self.labels = torch.tensor(labels, dtype=torch.long)
        self.groups = torch.tensor(groups, dtype=torch.long)
        self.transform = transform

    def __len__(self) -> int:
        return len(self.paths)

    def __getitem__(self, key: int | tuple[int, int, int]) -> dict:
        index, epoch, augment = key if isinstance(key, tuple) else (key, None, None)
        item = {
            "image": self.transform(self.read(index)),
            "label": self.labels[index],
            "group": self.groups[index],
            "index": index,
        }
        return item if epoch is None else {**item, "epoch": epoch, "augment": augment}

    def read(self, index: int) -> Image.Image:
        """The RGB image of item ``index``; an unreadable file is one line naming it."""
        path = self.root / self.paths[index]
        try:
            with Image.open(path) as file:
                return file.convert("RGB")
        except OSError as error:  # missing, truncated or not an image (PIL's UnidentifiedImageError included)
            raise UnreadableImageError(
                f"data: cannot read image '{path}' ({str(error).splitlines()[0]}); "
                "the image formats' data.table.verify_images=true skips such files when the "
                "data is read"
            ) from None


class DecodedBatches(Dataset):
    """Whole batches from decoded uint8 images [N, 3, H, W] (a NumPy array, memory-mapped or not): the item of a key
    ``(indices, epoch, augment)`` from :class:`EpochSeededBatches` is the batch of those images, in the format of
    :class:`FaceImageDataset`'s collated items (``epoch`` and ``augment`` only for training batches)."""

    def __init__(self, pixels: np.ndarray, labels: np.ndarray, groups: np.ndarray):
        self.pixels = pixels
        self.labels = torch.tensor(labels, dtype=torch.long)
        self.groups = torch.tensor(groups, dtype=torch.long)

    def __len__(self) -> int:
        return len(self.pixels)

    def __getitem__(self, key: tuple[np.ndarray, int | None, np.ndarray | None]) -> dict:
        indices, epoch, augment = key
        index = torch.from_numpy(indices)
        batch = {
            "image": torch.from_numpy(np.ascontiguousarray(self.pixels[indices])),
            "label": self.labels[index],
            "group": self.groups[index],
            "index": index,
        }
        if epoch is None:
            return batch
        return {**batch, "epoch": torch.full((len(indices),), epoch), "augment": torch.from_numpy(augment)}


def epoch_order(n: int, seed: int, epoch: int, shuffle: bool = True) -> torch.Tensor:
    """The order of a split's ``n`` images in ``epoch``: a permutation drawn from (seed, epoch), or 0..n-1."""
    if not shuffle:
        return torch.arange(n)
    return torch.randperm(n, generator=torch.Generator().manual_seed(mix_seed(seed, epoch)))


EpochDraw = Callable[[int], torch.Tensor]
"""``draw(epoch)``: the training images of an epoch as indices (:class:`~fairnas.data.sampling.GroupWeightedDraw`)."""

_Key = TypeVar("_Key")


class _EpochSeeded(Sampler[_Key]):
    """What both samplers share: ``n`` images ordered by :func:`epoch_order`, or drawn by ``draw``, and the epoch
    Lightning sets. :meth:`_keys` gives the images of the epoch and the key each one's augmentation is drawn for: its
    image index, or with ``draw`` (where an image may be drawn more than once) its position in the epoch's draw, so
    that every draw of an image is cropped and flipped anew."""

    def __init__(self, n: int, seed: int = 0, shuffle: bool = True, draw: EpochDraw | None = None):
        self.n, self.seed, self.shuffle, self.epoch, self.draw = n, seed, shuffle, 0, draw

    def set_epoch(self, epoch: int) -> None:
        self.epoch = epoch

    def __len__(self) -> int:
        return self.n

    def _keys(self) -> tuple[np.ndarray, np.ndarray]:
        if self.draw is None:
            order = epoch_order(self.n, self.seed, self.epoch, self.shuffle).numpy()
            return order, order
        return self.draw(self.epoch).numpy(), np.arange(self.n)


class EpochSeededSampler(_EpochSeeded[int | tuple[int, int, int]]):
    """Image indices in :func:`epoch_order` (or as ``draw`` gives them); training (``shuffle``) yields
    ``(index, epoch, augment)`` for the dataset.

    Lightning calls :meth:`set_epoch` before each training epoch, also after resuming from a checkpoint.
    """

    def __iter__(self) -> Iterator[int | tuple[int, int, int]]:
        order, augment = (keys.tolist() for keys in self._keys())
        if not self.shuffle:
            return iter(order)
        return ((index, self.epoch, key) for index, key in zip(order, augment, strict=True))


class EpochSeededBatches(_EpochSeeded[tuple[np.ndarray, int | None, np.ndarray | None]]):
    """Keys ``(indices, epoch, augment)`` of :class:`DecodedBatches`: :func:`epoch_order` (or ``draw``) cut into
    batches of ``batch_size`` (the last, shorter one dropped when ``drop_last``), as a DataLoader batches
    :class:`EpochSeededSampler`'s indices; ``epoch`` and ``augment`` are None for evaluation (``shuffle=False``)."""

    def __init__(
        self,
        n: int,
        batch_size: int,
        seed: int = 0,
        shuffle: bool = True,
        drop_last: bool = False,
        draw: EpochDraw | None = None,
    ):
        super().__init__(n, seed, shuffle, draw)
        self.batch_size, self.drop_last = batch_size, drop_last

    def __len__(self) -> int:
        return self.n // self.batch_size if self.drop_last else -(-self.n // self.batch_size)

    def __iter__(self) -> Iterator[tuple[np.ndarray, int | None, np.ndarray | None]]:
        order, augment = self._keys()
        epoch = self.epoch if self.shuffle else None
        return (
            (
                order[start : start + self.batch_size],
                epoch,
                augment[start : start + self.batch_size] if self.shuffle else None,
            )
            for start in range(0, len(self) * self.batch_size, self.batch_size)
        )
