"""Flipped (Chang et al., 2020; thesis Sec. 4.5.3): flip training identity labels of the better-served group.

A fixed share ``fraction`` of the training images of one protected group, the group with the better accuracy,
gets its identity label replaced by that of another training identity of the same group, drawn uniformly. The
noisy labels slow down how well the model fits that group, which narrows the gap to the other groups at some cost
in accuracy. The same identities stay within their group, as in the thesis' reference implementation, so no
cross-group confusion is injected.

``redraw`` says when the flips are drawn:

- ``batch`` (default; the reference code, which redraws the flipped labels for every batch): every time an image
  is loaded into a training batch its flip is drawn anew, i.e. a fresh draw per epoch from ``(seed, epoch)``
  flips exactly ``round(fraction * n)`` of the group's n images in each epoch (soft label noise);
- ``run``: one draw from ``seed``, the same images and new labels in every epoch.

The group is named, read from an earlier run, or measured from the model's own validation accuracies after
``warmup_epochs`` (:class:`~fairnas.mitigations.target_group.GroupMeasurement`; until then no label is flipped). As a
Lightning callback, :class:`FlipGroupLabels` rewrites the labels of each training batch in the training process from
the batch's image indices, so the labels are a pure function of (seed, epoch, group) whatever the DataLoader workers
do, and a resumed run (the group travels in the checkpoint) sees the labels of an uninterrupted one. Validation and
test labels are never changed.
"""

from __future__ import annotations

import logging
from pathlib import Path

import numpy as np
import pytorch_lightning as pl
import torch

from fairnas.mitigations.target_group import GroupMeasurement

log = logging.getLogger(__name__)

REDRAW = ("batch", "run")


class FlipGroupLabels(GroupMeasurement):
    """``FlipGroupLabels(...)(labels, groups, epoch) -> labels`` with ``round(fraction * n)`` of the group's n labels
    changed (none while the group is not measured yet), and the callback that applies it to training batches.

    Args:
        fraction: share of the group's training images whose label is flipped, in [0, 1].
        group: the group to flip (the one with the better accuracy); None: from ``reference_metrics``, else measured.
        reference_metrics: ``metrics.json`` of an earlier run (see :mod:`fairnas.mitigations.target_group`).
        seed: seed of the random flips.
        redraw: ``batch`` draws the flips anew every epoch, ``run`` once per run.
        warmup_epochs: epochs trained on the true labels before the group is measured (when it is).
    """

    def __init__(
        self,
        fraction: float,
        group: str | None = None,
        reference_metrics: str | Path | None = None,
        seed: int = 0,
        redraw: str = "batch",
        warmup_epochs: int = 1,
    ):
        if not 0.0 <= fraction <= 1.0:
            raise ValueError(f"mitigation.fraction={fraction} must lie in [0, 1]")
        if redraw not in REDRAW:
            raise ValueError(f"mitigation.redraw={redraw!r} must be one of {', '.join(REDRAW)}")
        super().__init__(group, reference_metrics, best=True, warmup_epochs=warmup_epochs)
        self.fraction, self.seed, self.per_epoch = float(fraction), int(seed), redraw == "batch"
        self._epoch_labels: tuple[tuple[int, str | None], torch.Tensor] | None = None

    def __call__(self, labels: np.ndarray, groups: np.ndarray, epoch: int = 0) -> np.ndarray:
        """The labels of training epoch ``epoch`` (ignored unless redrawn per epoch); ``labels`` is not modified."""
        if self.group is None:
            return labels.copy()
        groups = np.asarray(groups).astype(str)
        in_group = np.flatnonzero(groups == self.group)
        if in_group.size == 0:
            raise ValueError(
                f"mitigation.group={self.group!r} has no training images; groups present: "
                f"{sorted(set(groups.tolist()))}"
            )
        identities = np.unique(labels[in_group])
        if identities.size < 2:
            raise ValueError(f"mitigation: group {self.group!r} has a single training identity; flipping needs two")
        rng = np.random.default_rng([self.seed, int(epoch)] if self.per_epoch else self.seed)
        flipped = rng.choice(in_group, size=round(self.fraction * in_group.size), replace=False)
        # A uniform draw among the group's identities other than the image's own: shift past the own label.
        own = np.searchsorted(identities, labels[flipped])
        draw = rng.integers(0, identities.size - 1, size=flipped.size)
        result = labels.copy()
        result[flipped] = identities[draw + (draw >= own)]
        return result

    def setup(self, trainer: pl.Trainer, pl_module: pl.LightningModule, stage: str) -> None:
        if self.group is not None:  # named or from an earlier run: fail before training if it is not in the data
            self(trainer.datamodule.train_labels, trainer.datamodule.train_groups())

    def on_train_batch_start(
        self, trainer: pl.Trainer, pl_module: pl.LightningModule, batch: dict, batch_idx: int
    ) -> None:
        batch["label"] = self.epoch_labels(trainer)[batch["index"].cpu()].to(batch["label"].device)

    def epoch_labels(self, trainer: pl.Trainer) -> torch.Tensor:
        """The training labels of the current epoch and group, computed once per (epoch, group)."""
        key = (trainer.current_epoch if self.per_epoch else 0, self.group)
        if self._epoch_labels is None or self._epoch_labels[0] != key:
            data = trainer.datamodule
            labels = self(data.train_labels, data.train_groups(), epoch=key[0])
            if self.group is not None and (self._epoch_labels is None or self._epoch_labels[0][1] != self.group):
                log.info(
                    "Flipped: %d of %d training labels of group %s changed, drawn once per %s",
                    int((labels != data.train_labels).sum()),
                    int((data.train_groups() == self.group).sum()),
                    self.group,
                    "epoch" if self.per_epoch else "run",
                )
            self._epoch_labels = key, torch.as_tensor(labels)
        return self._epoch_labels[1]
