"""Angular (Wang and Deng, 2020; thesis Sec. 4.5.3): a larger angular margin for the disadvantaged group.

A margin head pulls each sample towards its class centre by its margin m; a larger margin asks for more compact,
better separated features. Angular trains the samples of the disadvantaged group with ``m + extra_margin`` and
every other sample with the head's own margin ``m`` (CosFace and ArcFace: the constant ``head.margin``; MagFace:
its magnitude-dependent m(a)), so it works with every margin head.

The margins are fixed by config rather than adapted to the per-group validation error during training (Wang and
Deng learn them with reinforcement learning): a fixed margin keeps a run a pure function of its config and seed,
so it repeats exactly, resumes from a checkpoint, and continues across search fidelities; and the validation split
stays an unbiased measurement instead of a training signal. Which group is disadvantaged is named in config or
read from an earlier run's validation accuracies (:mod:`fairnas.mitigations.groups`).
"""

from __future__ import annotations

from pathlib import Path

import torch

from fairnas.mitigations.groups import resolve_group


class GroupMargins:
    """Margin policy ``policy(batch=..., embeddings=..., module=...) -> margins [B]`` for the training step.

    Args:
        extra_margin: added to the head's margin for the samples of the disadvantaged group (>= 0).
        group: the disadvantaged group; None reads the group with the lowest validation accuracy from
            ``reference_metrics``.
        reference_metrics: ``metrics.json`` of an earlier run on the same data.
    """

    def __init__(self, extra_margin: float, group: str | None = None, reference_metrics: str | Path | None = None):
        if extra_margin < 0:
            raise ValueError(f"mitigation.extra_margin={extra_margin} must be non-negative")
        self.extra_margin = float(extra_margin)
        self.group = resolve_group(group, reference_metrics, best=False)

    def __call__(self, *, batch: dict, embeddings: torch.Tensor, module: torch.nn.Module) -> torch.Tensor:
        if self.group not in module.group_order:
            raise ValueError(f"mitigation.group={self.group!r} is not a protected group of the data; groups: "
                             f"{list(module.group_order)}")
        disadvantaged = batch["group"] == module.group_order.index(self.group)
        return module.head.default_margin(embeddings) + self.extra_margin * disadvantaged.to(embeddings.dtype)
