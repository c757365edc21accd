"""Flipped (Chang et al., 2020; thesis Sec. 4.5.3): flip training identity labels of the better-served group.

A fixed share ``fraction`` of the training images of one protected group, the group with the better accuracy,
gets its identity label replaced by that of another training identity of the same group, drawn uniformly. The
noisy labels slow down how well the model fits that group, which narrows the gap to the other groups at some cost
in accuracy. The same identities stay within their group, as in the thesis' reference implementation, so no
cross-group confusion is injected.

The flips are drawn once per run from ``seed`` (the same images and new labels in every epoch, and again when a
run is resumed), and applied by :class:`~fairnas.data.datamodule.FaceDataModule` to the training split only.
"""

from __future__ import annotations

import logging
from pathlib import Path

import numpy as np

from fairnas.mitigations.groups import resolve_group

log = logging.getLogger(__name__)


class FlipGroupLabels:
    """``FlipGroupLabels(...)(labels, groups) -> labels`` with ``round(fraction * n)`` of the group's n labels changed.

    Args:
        fraction: share of the group's training images whose label is flipped, in [0, 1].
        group: the group to flip (the one with the better accuracy); None reads it from ``reference_metrics``.
        reference_metrics: ``metrics.json`` of an earlier run (see :mod:`fairnas.mitigations.groups`).
        seed: seed of the random flips.
    """

    def __init__(self, fraction: float, group: str | None = None, reference_metrics: str | Path | None = None,
                 seed: int = 0):
        if not 0.0 <= fraction <= 1.0:
            raise ValueError(f"mitigation.fraction={fraction} must lie in [0, 1]")
        self.fraction, self.seed = float(fraction), int(seed)
        self.group = resolve_group(group, reference_metrics, best=True)

    def __call__(self, labels: np.ndarray, groups: np.ndarray) -> np.ndarray:
        groups = np.asarray(groups).astype(str)
        in_group = np.flatnonzero(groups == self.group)
        if in_group.size == 0:
            raise ValueError(f"mitigation.group={self.group!r} has no training images; groups present: "
                             f"{sorted(set(groups.tolist()))}")
        identities = np.unique(labels[in_group])
        if identities.size < 2:
            raise ValueError(f"mitigation: group {self.group!r} has a single training identity; flipping needs two")
        rng = np.random.default_rng(self.seed)
        flipped = rng.choice(in_group, size=round(self.fraction * in_group.size), replace=False)
        # A uniform draw among the group's identities other than the image's own: shift past the own label.
        own = np.searchsorted(identities, labels[flipped])
        draw = rng.integers(0, identities.size - 1, size=flipped.size)
        result = labels.copy()
        result[flipped] = identities[draw + (draw >= own)]
        log.info("Flipped: %d of %d training labels of group %s changed", flipped.size, in_group.size, self.group)
        return result
