"""LightningDataModule over a :class:`~fairnas.data.table.FaceTable` with identity-disjoint splits."""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence

import numpy as np
import pandas as pd
import pytorch_lightning as pl
import torch
from torch.utils.data import DataLoader

from fairnas.data.dataset import EpochSeededSampler, FaceImageDataset
from fairnas.data.table import SPLITS, FaceTable, apply_subset_rules
from fairnas.data.transforms import build_transforms


class FaceDataModule(pl.LightningDataModule):
    """Train on the identities of the ``train`` split; evaluate open-set on ``val`` and ``test`` identities.

    ``table()`` produces the :class:`~fairnas.data.table.FaceTable` (a data source from config with
    ``_partial_: true``: reading a format renders or indexes files, so it waits for :meth:`prepare_data` /
    :meth:`setup` rather than running at construction). :meth:`setup` applies the subset rules (thesis Sec. 4.3)
    per split and checks the data before a model is trained: every group must have training images and probes
    (identities with at least two images) in validation and test. ``num_classes``, ``group_order`` and the splits
    exist from then on.

    ``seed`` (the run's training seed) drives shuffling and augmentation; ``subset_seed`` alone decides which
    identities and images the subset rules keep in every split, so runs with different training seeds train and
    evaluate on the same identities.
    """

    def __init__(
        self,
        table: Callable[[], FaceTable],
        *,
        group_order: Sequence[str] | None = None,
        min_images: int = 3,
        balance_identities: bool = False,
        max_images_per_group: int | None = None,
        transforms: Mapping | None = None,
        batch_size: int = 64,
        eval_batch_size: int = 256,
        num_workers: int | str = 0,
        seed: int = 0,
        subset_seed: int = 0,
    ):
        super().__init__()
        self.table_source = table
        self.batch_size, self.eval_batch_size, self.num_workers, self.seed = (
            batch_size, eval_batch_size, resolve_num_workers(num_workers), seed,
        )
        self.transforms = dict(transforms or {})
        self.rules = dict(min_images=min_images, balance_identities=balance_identities,
                          max_images_per_group=max_images_per_group, seed=subset_seed)
        self.requested_group_order = group_order
        self.table: FaceTable | None = None
        self.splits: dict[str, pd.DataFrame] = {}

    def prepare_data(self) -> None:
        """Render or index the data set (Lightning calls this once per node before :meth:`setup`)."""
        if self.table is None:
            self.table = self.table_source()

    def setup(self, stage: str | None = None) -> None:
        """Read the table (if :meth:`prepare_data` did not), apply the subset rules and check the splits; once."""
        if self.splits:
            return
        self.prepare_data()
        self.splits = {name: apply_subset_rules(self.table.split(name), self.table.attribute, **self.rules)
                       for name in SPLITS}
        self.group_order = self._resolve_group_order(self.requested_group_order)
        self._check_splits()
        self.class_names = sorted(self.splits["train"]["identity"].unique())
        self.num_classes = len(self.class_names)
        self.train_labels = pd.Categorical(self.splits["train"]["identity"],
                                           categories=self.class_names).codes.astype(np.int64)

    def _resolve_group_order(self, group_order: Sequence[str] | None) -> list[str]:
        present = sorted(self.table.frame[self.table.attribute].unique())
        if group_order is None:
            return present
        order = [str(g) for g in group_order]
        unknown = [g for g in order if g not in present]
        if unknown:
            raise ValueError(f"data.group_order: groups {unknown} not in column '{self.table.attribute}'; "
                             f"present: {present}")
        return order

    def _check_splits(self) -> None:
        attribute = self.table.attribute
        for name, frame in self.splits.items():
            if frame.empty:
                raise ValueError(f"data: split '{name}' is empty after the subset rules (min_images etc.)")
            for group in self.group_order:
                rows = frame[frame[attribute] == group]
                if name == "train":
                    if rows.empty:
                        raise ValueError(f"data: protected group '{group}' has no training images")
                elif not (rows.groupby("identity").size() >= 2).any():
                    raise ValueError(f"data: protected group '{group}' has no probes in split '{name}' "
                                     "(needs an identity with >= 2 images)")

    def group_index(self, frame: pd.DataFrame) -> np.ndarray:
        """Group labels as indices into :attr:`group_order` (-1 for groups outside it)."""
        lookup = {g: i for i, g in enumerate(self.group_order)}
        return frame[self.table.attribute].map(lambda g: lookup.get(g, -1)).to_numpy()

    def dataset(self, split: str, train_transforms: bool | None = None) -> FaceImageDataset:
        frame = self.splits[split]
        if split == "train":
            labels = self.train_labels
        else:
            labels = pd.factorize(frame["identity"], sort=True)[0]
        transform = build_transforms(train=split == "train" if train_transforms is None else train_transforms,
                                     **self.transforms)
        return FaceImageDataset(self.table.root, frame["path"].tolist(), labels, self.group_index(frame),
                                transform, seed=self.seed)

    def train_groups(self) -> np.ndarray:
        """The protected group name of every training image, in the order of :attr:`train_labels`."""
        return self.splits["train"][self.table.attribute].to_numpy().astype(str)

    def train_dataloader(self) -> DataLoader:
        data = self.dataset("train")
        return self._loader(data, self.batch_size, EpochSeededSampler(len(data), self.seed), drop_last=True)

    def val_dataloader(self) -> DataLoader:
        return self._eval_loader("val")

    def test_dataloader(self) -> DataLoader:
        return self._eval_loader("test")

    def _eval_loader(self, split: str) -> DataLoader:
        data = self.dataset(split)
        return self._loader(data, self.eval_batch_size, EpochSeededSampler(len(data), shuffle=False))

    def _loader(self, data, batch_size: int, sampler, drop_last: bool = False) -> DataLoader:
        return DataLoader(data, batch_size=min(batch_size, len(data)), sampler=sampler, drop_last=drop_last,
                          num_workers=self.num_workers, persistent_workers=self.num_workers > 0,
                          pin_memory=torch.cuda.is_available())


def resolve_num_workers(num_workers: int | str) -> int:
    """``"auto"``: one DataLoader worker per CPU core this process may use, less one for the training process
    (at most 8), so a 2-core machine gets 1; an int is taken as is."""
    if num_workers == "auto":
        cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
        return min(8, max(0, cores - 1))
    if isinstance(num_workers, bool) or not isinstance(num_workers, int) or num_workers < 0:
        raise ValueError(f"data.num_workers={num_workers!r} must be a non-negative integer or auto")
    return num_workers
