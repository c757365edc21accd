"""Image dataset over a split of a :class:`~fairnas.data.table.FaceTable`, with reproducible augmentation.

Shuffling and augmentation are pure functions of ``(seed, epoch, index)``: a run resumed from a checkpoint sees
exactly the batches an uninterrupted run would have seen, whatever the number of DataLoader workers. This is what
lets the search continue a configuration across fidelities instead of retraining it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Callable, Iterator

import numpy as np
import torch
from PIL import Image
from torch.utils.data import Dataset, Sampler


class UnreadableImageError(ValueError):
    """An image of the table cannot be read (checked at load time unless the format verified every image)."""


class FaceImageDataset(Dataset):
    """Returns dicts with ``image``, ``label`` (class index), ``group`` (group index) and ``index``."""

    def __init__(
        self,
        root: Path,
        paths: list[str],
        labels: np.ndarray,
        groups: np.ndarray,
        transform: Callable[[Image.Image], torch.Tensor],
        seed: int = 0,
    ):
        self.root = Path(root)
        self.paths = list(paths)
        self.labels = torch.tensor(labels, dtype=torch.long)
        self.groups = torch.tensor(groups, dtype=torch.long)
        self.transform = transform
        self.seed = seed

    def __len__(self) -> int:
        return len(self.paths)

    def __getitem__(self, key: int | tuple[int, int]) -> dict:
        index, epoch = key if isinstance(key, tuple) else (key, 0)
        path = self.root / self.paths[index]
        try:
            with Image.open(path) as file:
                image = file.convert("RGB")
        except OSError as error:  # missing, truncated or not an image (PIL's UnidentifiedImageError included)
            raise UnreadableImageError(f"data: cannot read image '{path}' ({str(error).splitlines()[0]}); "
                                       "the image formats' data.table.verify_images=true skips such files when the data is read") from None
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(_mix(self.seed, epoch, index))
            tensor = self.transform(image)
        return {"image": tensor, "label": self.labels[index], "group": self.groups[index], "index": index}


class EpochSeededSampler(Sampler):
    """Random permutation per epoch from ``(seed, epoch)``; yields ``(index, epoch)`` for the dataset.

    Lightning calls :meth:`set_epoch` before each training epoch, also after resuming from a checkpoint.
    """

    def __init__(self, n: int, seed: int = 0, shuffle: bool = True):
        self.n, self.seed, self.shuffle, self.epoch = n, seed, shuffle, 0

    def set_epoch(self, epoch: int) -> None:
        self.epoch = epoch

    def __len__(self) -> int:
        return self.n

    def __iter__(self) -> Iterator[tuple[int, int]]:
        if self.shuffle:
            order = torch.randperm(self.n, generator=torch.Generator().manual_seed(_mix(self.seed, self.epoch)))
        else:
            order = torch.arange(self.n)
        return ((int(i), self.epoch) for i in order)


def _mix(*values: int) -> int:
    """A 63-bit seed from several integers (stable across processes, unlike ``hash``)."""
    return int(np.random.SeedSequence(list(values)).generate_state(1, dtype=np.uint64)[0] >> 1)
