"""Group-weighted training: how often each protected group's images are drawn, or how much their loss counts.

Re-sampling and re-weighting by group are the first baselines of every fairness study. ``data.group_sampling``
gives every group g a weight w_g, either from a strength ``alpha`` (w_g = share_g ** -alpha, share_g being g's share
of the training images: 0 keeps the natural shares, 1 balances the groups, above 1 over-weights the smaller groups;
any number of groups, and one continuous dimension a search can tune) or from explicit ``weights`` per group.
With ``via: sampler`` an image is drawn with probability proportional to its group's weight, so group g makes up
n_g w_g / sum_h(n_h w_h) of the draws; with ``via: loss`` every image is seen once per epoch and its loss counts
w_g in a weighted mean. An epoch draws as many images as the split holds (the same steps per epoch as without
weights), as a pure function of (seed, epoch): a resumed run draws what an uninterrupted one does, and under DDP
each rank takes its share of the same draw. Validation and test are never re-sampled.

With ``replacement`` every draw is independent (the group shares vary from epoch to epoch by sampling error);
without, each group's number of draws is fixed (largest remainder) and its images are cycled in fresh random
orders, so an image repeats only after every image of its group was drawn.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import torch

from fairnas.data.transforms import mix_seed
from fairnas.validation import Settings, is_number

SAMPLING_STREAM = 0x5A3
"""Spawn key that keeps the group-weighted draws apart from the other (seed, epoch) streams."""
VIA = ("sampler", "loss")
GROUP_SAMPLING = Settings("data.group_sampling.")


@dataclasses.dataclass(frozen=True)
class GroupSampling:
    """``data.group_sampling``, checked when built; ``alpha`` and ``weights`` both null means off (every training
    image once per epoch in a shuffled order, as without this setting)."""

    alpha: float | None = None
    weights: Mapping[str, float] | None = None
    replacement: bool = False
    via: str = "sampler"

    def __post_init__(self) -> None:
        if self.alpha is not None and self.weights is not None:
            raise ValueError("data.group_sampling: give alpha or weights, not both")
        if self.alpha is not None:
            if not is_number(self.alpha) or not math.isfinite(self.alpha) or self.alpha < 0:
                GROUP_SAMPLING.fail("alpha", self.alpha, "a number >= 0 (or null: off)")
            object.__setattr__(self, "alpha", float(self.alpha))
        if self.weights is not None:
            object.__setattr__(self, "weights", _checked_weights(self.weights))
        GROUP_SAMPLING.boolean("replacement", self.replacement)
        GROUP_SAMPLING.choice("via", self.via, VIA)

    @property
    def active(self) -> bool:
        return self.alpha is not None or self.weights is not None

    def group_weights(self, groups: Sequence[str] | np.ndarray, group_order: Sequence[str]) -> dict[str, float]:
        """w_g for every group of ``group_order`` from the training images' ``groups``; a weight for a group that is
        not in the data, or none for a group with training images, is one line naming it."""
        names, counts = np.unique(np.asarray(groups, dtype=str), return_counts=True)
        sizes = dict(zip(names.tolist(), counts.tolist(), strict=True))
        if self.weights is not None:
            unknown = sorted(set(self.weights) - set(group_order))
            if unknown:
                raise ValueError(
                    f"data.group_sampling.weights: unknown groups {unknown}; the groups are {list(group_order)}"
                )
            missing = [group for group in group_order if group in sizes and group not in self.weights]
            if missing:
                raise ValueError(f"data.group_sampling.weights: no weight for groups {missing} (give every group one)")
            return {group: self.weights[group] for group in group_order}
        assert self.alpha is not None
        total = sum(sizes.values())
        return {group: (sizes[group] / total) ** -self.alpha if group in sizes else 0.0 for group in group_order}

    def draw_shares(self, groups: Sequence[str] | np.ndarray, group_order: Sequence[str]) -> dict[str, float]:
        """The share of the draws (``via: sampler``) or of the loss (``via: loss``) each group gets in expectation."""
        weights = self.group_weights(groups, group_order)
        mass = {group: weights[group] * int(np.sum(np.asarray(groups) == group)) for group in group_order}
        total = sum(mass.values())
        if total <= 0:
            raise ValueError("data.group_sampling: every group with training images has weight 0")
        return {group: value / total for group, value in mass.items()}


class GroupWeightedDraw:
    """The training images of one epoch, drawn with probability proportional to their group's weight: ``draw(epoch)``
    gives ``len(image_weights)`` image indices, a pure function of (seed, epoch)."""

    def __init__(self, group_index: np.ndarray, group_weights: Sequence[float], seed: int, replacement: bool):
        self.group_index = np.asarray(group_index, dtype=np.int64)
        self.group_weights = np.asarray(group_weights, dtype=np.float64)
        self.seed, self.replacement = seed, replacement
        self.n = len(self.group_index)
        self._members = [np.flatnonzero(self.group_index == g) for g in range(len(self.group_weights))]

    def __call__(self, epoch: int) -> torch.Tensor:
        generator = torch.Generator().manual_seed(mix_seed(self.seed, epoch, SAMPLING_STREAM))
        if self.replacement:
            image_weights = torch.from_numpy(self.group_weights[self.group_index])
            return torch.multinomial(image_weights, self.n, replacement=True, generator=generator)
        drawn = [
            self._cycled(members, quota, generator)
            for members, quota in zip(self._members, self.quotas(), strict=True)
            if quota
        ]
        order = torch.cat(drawn)
        return order[torch.randperm(len(order), generator=generator)]

    def quotas(self) -> list[int]:
        """Draws per group without replacement: the expected numbers, rounded by largest remainder to sum to n."""
        mass = np.array([len(m) for m in self._members]) * self.group_weights
        expected = self.n * mass / mass.sum()
        quotas = np.floor(expected).astype(int)
        remainders = np.argsort(-(expected - quotas), kind="stable")
        quotas[remainders[: self.n - quotas.sum()]] += 1
        return quotas.tolist()

    @staticmethod
    def _cycled(members: np.ndarray, quota: int, generator: torch.Generator) -> torch.Tensor:
        """``quota`` of ``members``: whole random orders of them one after another, the last one cut."""
        rounds = -(-quota // len(members))
        orders = [torch.randperm(len(members), generator=generator) for _ in range(rounds)]
        return torch.from_numpy(members)[torch.cat(orders)[:quota]]


def as_group_sampling(settings: GroupSampling | Mapping[str, Any] | None) -> GroupSampling:
    """``data.group_sampling`` as settings; unknown keys are named."""
    if isinstance(settings, GroupSampling):
        return settings
    try:
        return GroupSampling(**dict(settings or {}))
    except TypeError as error:
        raise ValueError(f"data.group_sampling: {error}".replace("GroupSampling.__init__() ", "")) from None


def _checked_weights(weights: Any) -> dict[str, float]:
    if not isinstance(weights, Mapping) or not weights:
        raise ValueError(
            f"data.group_sampling.weights={weights!r} must map group names to weights, e.g. {{g0: 1, g1: 3}}"
        )
    bad = {str(g): w for g, w in weights.items() if not is_number(w) or not math.isfinite(w) or w < 0}
    if bad:
        raise ValueError(f"data.group_sampling.weights: {bad} must be numbers >= 0")
    if not any(w > 0 for w in weights.values()):
        raise ValueError("data.group_sampling.weights: at least one weight must be > 0")
    return {str(group): float(weight) for group, weight in weights.items()}
