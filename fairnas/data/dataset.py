"""Datasets and samplers over a split of a :class:`~fairnas.data.table.FaceTable`.

Two ways to the same batches. The file path (:class:`FaceImageDataset`, :class:`EpochSeededSampler`) opens every
image from disk per item, in DataLoader workers, for data sets too large to hold decoded. The in-memory path
(:class:`DecodedBatches`, :class:`EpochSeededBatches`) gathers whole batches from the split's decoded uint8 array
(:mod:`fairnas.data.decoded`). Both deliver the resized uint8 pixels of the same images in the same batches:
the training order is a permutation drawn from (seed, epoch), and training batches carry their epoch so that
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
    ``group`` (group index) and ``index``; an item asked for as ``(index, epoch)`` (training) also has ``epoch``."""

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

    def __getitem__(self, key: int | tuple[int, int]) -> dict:
        index, epoch = key if isinstance(key, tuple) else (key, None)
        item = {
            "image": self.transform(self.read(index)),
            "label": self.labels[index],
            "group": self.groups[index],
            "index": index,
        }
        return item if epoch is None else {**item, "epoch": epoch}

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
    ``(indices, epoch)`` from :class:`EpochSeededBatches` is the batch of those images, in the format of
    :class:`FaceImageDataset`'s collated items (``epoch`` only for training batches)."""

    def __init__(self, pixels: np.ndarray, labels: np.ndarray, groups: np.ndarray):
        self.pixels = pixels
        self.labels = torch.tensor(labels, dtype=torch.long)
        self.groups = torch.tensor(groups, dtype=torch.long)

    def __len__(self) -> int:
        return len(self.pixels)

    def __getitem__(self, key: tuple[np.ndarray, int | None]) -> dict:
        indices, epoch = key
        index = torch.from_numpy(indices)
        batch = {
            "image": torch.from_numpy(np.ascontiguousarray(self.pixels[indices])),
            "label": self.labels[index],
            "group": self.groups[index],
            "index": index,
        }
        return batch if epoch is None else {**batch, "epoch": torch.full((len(indices),), epoch)}


def epoch_order(n: int, seed: int, epoch: int, shuffle: bool = True) -> torch.Tensor:
    """The order of a split's ``n`` images in ``epoch``: a permutation drawn from (seed, epoch), or 0..n-1."""
    if not shuffle:
        return torch.arange(n)
    return torch.randperm(n, generator=torch.Generator().manual_seed(mix_seed(seed, epoch)))


_Key = TypeVar("_Key")


class _EpochSeeded(Sampler[_Key]):
    """What both samplers share: ``n`` images ordered by :func:`epoch_order`, and the epoch Lightning sets."""

    def __init__(self, n: int, seed: int = 0, shuffle: bool = True):
        self.n, self.seed, self.shuffle, self.epoch = n, seed, shuffle, 0

    def set_epoch(self, epoch: int) -> None:
        self.epoch = epoch

    def __len__(self) -> int:
        return self.n


class EpochSeededSampler(_EpochSeeded[int | tuple[int, int]]):
    """Image indices in :func:`epoch_order`; training (``shuffle``) yields ``(index, epoch)`` for the dataset.

    Lightning calls :meth:`set_epoch` before each training epoch, also after resuming from a checkpoint.
    """

    def __iter__(self) -> Iterator[int | tuple[int, int]]:
        order = epoch_order(self.n, self.seed, self.epoch, self.shuffle).tolist()
        return ((index, self.epoch) for index in order) if self.shuffle else iter(order)


class EpochSeededBatches(_EpochSeeded[tuple[np.ndarray, int | None]]):
    """Keys ``(indices, epoch)`` of :class:`DecodedBatches`: :func:`epoch_order` cut into batches of ``batch_size``
    (the last, shorter one dropped when ``drop_last``), as a DataLoader batches :class:`EpochSeededSampler`'s
    indices; ``epoch`` is None for evaluation (``shuffle=False``)."""

    def __init__(self, n: int, batch_size: int, seed: int = 0, shuffle: bool = True, drop_last: bool = False):
        super().__init__(n, seed, shuffle)
        self.batch_size, self.drop_last = batch_size, drop_last

    def __len__(self) -> int:
        return self.n // self.batch_size if self.drop_last else -(-self.n // self.batch_size)

    def __iter__(self) -> Iterator[tuple[np.ndarray, int | None]]:
        order = epoch_order(self.n, self.seed, self.epoch, self.shuffle).numpy()
        epoch = self.epoch if self.shuffle else None
        return (
            (order[start : start + self.batch_size], epoch)
            for start in range(0, len(self) * self.batch_size, self.batch_size)
        )
