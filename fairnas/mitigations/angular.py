"""Angular (Wang and Deng, 2020; thesis Sec. 4.5.3): a larger angular margin for the disadvantaged group.

A margin head pulls each sample towards its class centre by its margin m; a larger margin asks for more compact,
better separated features. Angular trains the samples of the disadvantaged group with ``m + extra_margin`` and
every other sample with the head's own margin ``m`` (CosFace and ArcFace: the constant ``head.margin``; MagFace:
its magnitude-dependent m(a)), so it works with every margin head.

The disadvantaged group is named, read from an earlier run, or measured from the model's own validation accuracies
(:class:`~fairnas.mitigations.target_group.GroupMeasurement`): by default after every epoch, so the extra margin follows
whichever group is served worse, as Wang & Deng adapt margins to the groups' accuracies during training (they learn
margin sizes with reinforcement learning; here the size is fixed and only the group adapts). The measured groups
travel in the checkpoint, so a resumed or continued run repeats exactly.
"""

from __future__ import annotations

from pathlib import Path

import torch

from fairnas.mitigations.target_group import GroupMeasurement


class GroupMargins(GroupMeasurement):
    """Margin policy ``policy(batch=..., embeddings=..., module=...) -> margins [B]`` for the training step, and the
    callback that measures its group (training registers it).

    Args:
        extra_margin: added to the head's margin for the samples of the disadvantaged group (>= 0).
        group: the disadvantaged group; None: from ``reference_metrics``, else measured.
        reference_metrics: ``metrics.json`` of an earlier run on the same data.
        warmup_epochs: epochs trained with the head's margins only, before the first measurement.
        every_epoch: measure the group again after every later epoch.
    """

    def __init__(
        self,
        extra_margin: float,
        group: str | None = None,
        reference_metrics: str | Path | None = None,
        warmup_epochs: int = 1,
        every_epoch: bool = True,
    ):
        if extra_margin < 0:
            raise ValueError(f"mitigation.extra_margin={extra_margin} must be non-negative")
        super().__init__(group, reference_metrics, best=False, warmup_epochs=warmup_epochs, every_epoch=every_epoch)
        self.extra_margin = float(extra_margin)

    def __call__(self, *, batch: dict, embeddings: torch.Tensor, module: torch.nn.Module) -> torch.Tensor:
        margins = module.head.default_margin(embeddings)
        if self.group is None:  # not measured yet
            return margins
        if self.group not in module.group_order:
            raise ValueError(
                f"mitigation.group={self.group!r} is not a protected group of the data; groups: "
                f"{list(module.group_order)}"
            )
        disadvantaged = batch["group"] == module.group_order.index(self.group)
        return margins + self.extra_margin * disadvantaged.to(embeddings.dtype)
