"""Classification losses applied to a margin head's logits: cross-entropy and focal loss."""

import torch
import torch.nn.functional as F
from torch import nn


class FocalLoss(nn.Module):
    """Multi-class focal loss (Lin et al., ICCV 2017, Eq. 4): mean of -(1 - p_t)^gamma * log p_t.

    ``p_t`` is the softmax probability of the true class; ``gamma = 0`` gives plain cross-entropy.
    """

    def __init__(self, gamma: float = 2.0) -> None:
        super().__init__()
        if gamma < 0:
            raise ValueError(f"loss.gamma={gamma} must be non-negative")
        self.gamma = float(gamma)

    def forward(self, logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        log_p_t = F.log_softmax(logits.float(), dim=1).gather(1, labels.long().unsqueeze(1)).squeeze(1)
        return (-((1.0 - log_p_t.exp()) ** self.gamma) * log_p_t).mean()


CLASSIFICATION_LOSSES = ("cross_entropy", "focal")


def build_classification_loss(name: str = "cross_entropy", gamma: float = 2.0) -> nn.Module:
    """``loss(logits [B, C], labels [B]) -> scalar``; ``gamma`` is used by the focal loss only."""
    if name == "cross_entropy":
        return nn.CrossEntropyLoss()
    if name == "focal":
        return FocalLoss(gamma)
    raise ValueError(f"loss.name={name!r} is not a classification loss; allowed: {', '.join(CLASSIFICATION_LOSSES)}")
