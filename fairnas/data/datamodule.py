"""LightningDataModule over a :class:`~fairnas.data.table.FaceTable` with identity-disjoint splits."""

from __future__ import annotations

import functools
import logging
import os
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TypedDict

import numpy as np
import pandas as pd
import pytorch_lightning as pl
import torch
from torch.utils.data import DataLoader

from fairnas.data.dataset import DecodedBatches, EpochSeededBatches, EpochSeededSampler, FaceImageDataset
from fairnas.data.decoded import decoded_bytes, decoded_images
from fairnas.data.sampling import GroupSampling, GroupWeightedDraw, as_group_sampling
from fairnas.data.table import SPLITS, FaceTable, apply_subset_rules
from fairnas.data.transforms import BatchTransform, TransformSettings, eval_transforms, resize_transform
from fairnas.validation import Settings, is_integer

log = logging.getLogger(__name__)


class SubsetRules(TypedDict):
    """The keyword arguments of :func:`~fairnas.data.table.apply_subset_rules` a data module applies per split."""

    min_images: int
    balance_identities: bool
    max_images_per_group: int | None
    seed: int


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

    Loaders deliver resized uint8 pixels, from one of two paths (:mod:`fairnas.data.dataset`): ``in_memory=true``
    decodes every image of a split once into an array cached under ``decoded_dir``
    (:func:`~fairnas.data.decoded.decoded_images`) and gathers batches from it; ``false`` opens the files per item in
    ``num_workers`` DataLoader workers; ``auto`` holds the splits in memory when their decoded size is at most
    ``in_memory_limit_gb``. :meth:`on_after_batch_transfer`, which Lightning calls once the batch is on the model's
    device, crops, flips and normalises it there (:class:`~fairnas.data.transforms.BatchTransform`): the same images
    and augmentation on either path. :meth:`dataset` gives a split's images one at a time with the evaluation
    transform (audits, probes).

    ``group_sampling`` (:class:`~fairnas.data.sampling.GroupSampling`) weights the training draws or the loss by
    protected group; its group names are checked in :meth:`setup`, before a model is trained.
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
        in_memory: bool | str = False,
        in_memory_limit_gb: float = 4.0,
        decoded_dir: str | Path | None = None,
        seed: int = 0,
        subset_seed: int = 0,
        group_sampling: GroupSampling | Mapping | None = None,
    ):
        super().__init__()
        self.table_source = table
        self.batch_size, self.eval_batch_size, self.num_workers, self.seed = (
            batch_size,
            eval_batch_size,
            resolve_num_workers(num_workers),
            seed,
        )
        self.transforms = dict(transforms or {})
        self.transform_settings = TransformSettings(**self.transforms)
        self.in_memory_setting = check_in_memory(in_memory, in_memory_limit_gb)
        self.group_sampling = as_group_sampling(group_sampling)
        self.in_memory_limit_gb, self.decoded_dir = in_memory_limit_gb, decoded_dir
        self.rules = SubsetRules(
            min_images=min_images,
            balance_identities=balance_identities,
            max_images_per_group=max_images_per_group,
            seed=subset_seed,
        )
        self.requested_group_order = group_order
        self.table: FaceTable | None = None
        self.splits: dict[str, pd.DataFrame] = {}
        self._decoded: dict[str, np.ndarray] = {}

    @property
    def face_table(self) -> FaceTable:
        """:attr:`table`, read by :meth:`prepare_data` (which :meth:`setup` calls) before anything uses it."""
        assert self.table is not None, "the table is read by prepare_data() / setup()"
        return self.table

    def prepare_data(self) -> None:
        """Render or index the data set (Lightning calls this once per node before :meth:`setup`)."""
        if self.table is None:
            self.table = self.table_source()

    def setup(self, stage: str | None = None) -> None:
        """Read the table (if :meth:`prepare_data` did not), apply the subset rules and check the splits; once."""
        if self.splits:
            return
        self.prepare_data()
        self.splits = {
            name: apply_subset_rules(self.face_table.split(name), self.face_table.attribute, **self.rules)
            for name in SPLITS
        }
        self.group_order = self._resolve_group_order(self.requested_group_order)
        self._check_splits()
        self.class_names = sorted(self.splits["train"]["identity"].unique())
        self.num_classes = len(self.class_names)
        self.train_labels = pd.Categorical(self.splits["train"]["identity"], categories=self.class_names).codes.astype(
            np.int64
        )
        self.group_weights = None
        if self.group_sampling.active:
            self.group_weights = self.group_sampling.group_weights(self.train_groups(), self.group_order)
            shares = self.group_sampling.draw_shares(self.train_groups(), self.group_order)
            log.info(
                "group sampling (%s): %s",
                self.group_sampling.via,
                ", ".join(f"{group} {share:.3f}" for group, share in shares.items()),
            )

    def _resolve_group_order(self, group_order: Sequence[str] | None) -> list[str]:
        """The groups the metrics compare: ``group_order``, or every group of the table (sorted). Each must be in the
        table and there must be two or more (a disparity over one group is undefined); groups of the table that
        ``group_order`` leaves out are named in a warning, before training: no per-group metric reports them."""
        attribute = self.face_table.attribute
        present = sorted(self.face_table.frame[attribute].unique())
        order = present if group_order is None else [str(g) for g in group_order]
        unknown = [g for g in order if g not in present]
        if unknown:
            raise ValueError(f"data.group_order: groups {unknown} not in column '{attribute}'; present: {present}")
        if len(order) < 2:
            if group_order is None:
                raise ValueError(
                    f"data: column '{attribute}' holds only {present}; a disparity needs two groups or more"
                )
            raise ValueError(
                f"data.group_order={order} names fewer than two of the groups {present} in column '{attribute}'; a "
                "disparity needs two groups or more"
            )
        left_out = [g for g in present if g not in order]
        if left_out:
            log.warning(
                "data.group_order=%s leaves out groups %s of column '%s': no per-group metric or disparity has them",
                order,
                left_out,
                attribute,
            )
        return order

    def _check_splits(self) -> None:
        attribute = self.face_table.attribute
        for name, frame in self.splits.items():
            if frame.empty:
                raise ValueError(f"data: split '{name}' is empty after the subset rules (min_images etc.)")
            for group in self.group_order:
                rows = frame[frame[attribute] == group]
                if name == "train":
                    if rows.empty:
                        raise ValueError(f"data: protected group '{group}' has no training images")
                elif not (rows.groupby("identity").size() >= 2).any():
                    raise ValueError(
                        f"data: protected group '{group}' has no probes in split '{name}' "
                        "(needs an identity with >= 2 images)"
                    )

    def group_index(self, frame: pd.DataFrame) -> np.ndarray:
        """Group labels as indices into :attr:`group_order` (-1 for groups outside it)."""
        lookup = {g: i for i, g in enumerate(self.group_order)}
        return frame[self.face_table.attribute].map(lambda g: lookup.get(g, -1)).to_numpy()

    def dataset(self, split: str) -> FaceImageDataset:
        """The images of ``split`` one at a time from their files, with the evaluation transform (normalised)."""
        frame = self.splits[split]
        return FaceImageDataset(
            self.face_table.root,
            frame["path"].tolist(),
            self.labels(split),
            self.group_index(frame),
            eval_transforms(**self.transforms),
        )

    def train_groups(self) -> np.ndarray:
        """The protected group name of every training image, in the order of :attr:`train_labels`."""
        return self.splits["train"][self.face_table.attribute].to_numpy().astype(str)

    @property
    def in_memory(self) -> bool:
        """Whether the loaders read decoded arrays (resolved from ``in_memory`` once the splits are known)."""
        if not isinstance(self.in_memory_setting, str):  # True or False; the only string is "auto"
            return self.in_memory_setting
        size = sum(decoded_bytes(len(frame), self.transform_settings.resize_side) for frame in self.splits.values())
        return size <= self.in_memory_limit_gb * 2**30

    def train_dataloader(self) -> DataLoader:
        return self._loader("train", self.batch_size, shuffle=True)

    def val_dataloader(self) -> DataLoader:
        return self._loader("val", self.eval_batch_size, shuffle=False)

    def test_dataloader(self) -> DataLoader:
        return self._loader("test", self.eval_batch_size, shuffle=False)

    def on_before_batch_transfer(self, batch: dict, dataloader_idx: int) -> dict:
        """A training batch's ``epoch`` read while the batch is still on the host: read on a GPU, it would wait for
        the queued work."""
        if "epoch" in batch:
            batch["epoch"] = int(batch["epoch"][0])
        return batch

    def on_after_batch_transfer(self, batch: dict, dataloader_idx: int) -> dict:
        """Training batches (they carry their ``epoch`` and augmentation keys) cropped and flipped as drawn for each
        key, evaluation batches centre-cropped; then normalised, on the device the batch is on. With group weights in
        the loss (``group_sampling.via: loss``) a training batch also gets each image's ``loss_weight``. Nothing is
        read back from the device, and nothing copied to it but once per epoch."""
        if "epoch" in batch:
            epoch = batch.pop("epoch")
            epoch = int(epoch[0]) if isinstance(epoch, torch.Tensor) else epoch  # without on_before_batch_transfer
            batch["image"] = self._batch_transform.train(batch["image"], batch.pop("augment"), epoch)
            if self._loss_weights is not None:
                batch["loss_weight"] = self._loss_weights_on(batch["group"].device)[batch["group"]]
        else:
            batch["image"] = self._batch_transform.eval(batch["image"])
        return batch

    def _loss_weights_on(self, device: torch.device) -> torch.Tensor:
        """:attr:`_loss_weights` on ``device``, copied there once (a copy from the host each step waits for the GPU)."""
        weights = self._loss_weights
        assert weights is not None  # asked for only when the weights go into the loss
        if weights.device != device:
            self._loss_weights = weights = weights.to(device)
        return weights

    @functools.cached_property
    def _loss_weights(self) -> torch.Tensor | None:
        """w_g per group index when the group weights go into the loss, else None."""
        if self.group_weights is None or self.group_sampling.via != "loss":
            return None
        return torch.tensor([self.group_weights[group] for group in self.group_order], dtype=torch.float32)

    def _training_draw(self) -> GroupWeightedDraw | None:
        """The group-weighted draw of the training images when the weights go into the sampler, else None."""
        if self.group_weights is None or self.group_sampling.via != "sampler":
            return None
        weights = [self.group_weights[group] for group in self.group_order]
        return GroupWeightedDraw(
            self.group_index(self.splits["train"]), weights, self.seed, self.group_sampling.replacement
        )

    @functools.cached_property
    def _batch_transform(self) -> BatchTransform:
        return BatchTransform(self.transform_settings, len(self.splits["train"]), seed=self.seed)

    def labels(self, split: str) -> np.ndarray:
        """Class index of every image of ``split``: training identities as :attr:`class_names` orders them, held-out
        identities numbered within their split (only equality matters there)."""
        if split == "train":
            return self.train_labels
        return pd.factorize(self.splits[split]["identity"], sort=True)[0]

    def _loader(self, split: str, batch_size: int, shuffle: bool) -> DataLoader:
        """Batches of ``split`` (training: shuffled per epoch, the last incomplete batch dropped)."""
        frame = self.splits[split]
        labels, groups = self.labels(split), self.group_index(frame)
        batch_size = min(batch_size, len(frame))
        pin_memory = torch.cuda.is_available()
        draw = self._training_draw() if split == "train" else None
        if self.in_memory:
            batches = EpochSeededBatches(
                len(frame), batch_size, self.seed, shuffle=shuffle, drop_last=shuffle, draw=draw
            )
            return DataLoader(
                DecodedBatches(self.decoded_pixels(split), labels, groups),
                batch_size=None,
                sampler=batches,
                pin_memory=pin_memory,
            )
        images = FaceImageDataset(
            self.face_table.root,
            frame["path"].tolist(),
            labels,
            groups,
            resize_transform(self.transform_settings.resize_side),
        )
        return DataLoader(
            images,
            batch_size=batch_size,
            sampler=EpochSeededSampler(len(frame), self.seed, shuffle, draw=draw),
            drop_last=shuffle,
            num_workers=self.num_workers,
            persistent_workers=self.num_workers > 0,
            pin_memory=pin_memory,
        )

    def decoded_pixels(self, split: str) -> np.ndarray:
        """uint8 [N, 3, resize, resize] of ``split``'s images, decoded once and cached (memory-mapped)."""
        if split not in self._decoded:
            self._decoded[split] = decoded_images(
                self.face_table.root,
                self.splits[split]["path"].tolist(),
                self.transform_settings.resize_side,
                self.decoded_dir,
                self.num_workers,
            )
        return self._decoded[split]


def check_in_memory(in_memory: bool | str, limit_gb: float) -> bool | str:
    """``data.in_memory`` (true, false or auto) and its limit (GiB of decoded images, positive), checked."""
    if in_memory not in (True, False, "auto"):
        raise ValueError(f"data.in_memory={in_memory!r}; allowed: auto, true, false")
    Settings("data.").positive("in_memory_limit_gb", limit_gb, "(GiB)")
    return in_memory


def resolve_num_workers(num_workers: int | str) -> int:
    """``"auto"``: one DataLoader worker per CPU core this process may use, less one for the training process
    (at most 8), so a 2-core machine gets 1; an int is taken as is."""
    if num_workers == "auto":
        cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
        return min(8, max(0, cores - 1))
    if not is_integer(num_workers) or num_workers < 0:
        Settings("data.").fail("num_workers", num_workers, "a non-negative integer or auto")
    return int(num_workers)
