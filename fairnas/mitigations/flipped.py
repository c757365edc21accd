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

Either way the labels are a pure function of ``(seed, epoch)``, so a run resumed from a checkpoint sees the labels
of an uninterrupted one. :class:`~fairnas.data.datamodule.FaceDataModule` applies the flips to the training split
only.
"""

from __future__ import annotations

import logging
from pathlib import Path

import numpy as np

from fairnas.mitigations.groups import resolve_group

log = logging.getLogger(__name__)

REDRAW = ("batch", "run")


class FlipGroupLabels:
    """``FlipGroupLabels(...)(labels, groups, epoch) -> labels`` with ``round(fraction * n)`` of the group's n
    labels changed.

    Args:
        fraction: share of the group's training images whose label is flipped, in [0, 1].
        group: the group to flip (the one with the better accuracy); None reads it from ``reference_metrics``.
        reference_metrics: ``metrics.json`` of an earlier run (see :mod:`fairnas.mitigations.groups`).
        seed: seed of the random flips.
        redraw: ``batch`` draws the flips anew every epoch (:attr:`per_epoch` is true), ``run`` once per run.
    """

    def __init__(self, fraction: float, group: str | None = None, reference_metrics: str | Path | None = None,
                 seed: int = 0, redraw: str = "batch"):
        if not 0.0 <= fraction <= 1.0:
            raise ValueError(f"mitigation.fraction={fraction} must lie in [0, 1]")
        if redraw not in REDRAW:
            raise ValueError(f"mitigation.redraw={redraw!r} must be one of {', '.join(REDRAW)}")
        self.fraction, self.seed = float(fraction), int(seed)
        self.per_epoch = redraw == "batch"
        self.group = resolve_group(group, reference_metrics, best=True)
        self._logged = False

    def __call__(self, labels: np.ndarray, groups: np.ndarray, epoch: int = 0) -> np.ndarray:
        """The labels of training epoch ``epoch`` (ignored unless :attr:`per_epoch`); ``labels`` is not modified."""
        groups = np.asarray(groups).astype(str)
        in_group = np.flatnonzero(groups == self.group)
        if in_group.size == 0:
            raise ValueError(f"mitigation.group={self.group!r} has no training images; groups present: "
                             f"{sorted(set(groups.tolist()))}")
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
        if not self._logged:
            log.info("Flipped: %d of %d training labels of group %s changed, drawn once per %s", flipped.size,
                     in_group.size, self.group, "epoch" if self.per_epoch else "run")
            self._logged = True
        return result
