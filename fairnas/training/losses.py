"""Classification losses applied to a margin head's logits (``conf/loss/``: torch's cross-entropy, focal loss)."""

import torch
import torch.nn.functional as F
from torch import nn


class FocalLoss(nn.Module):
    """Multi-class focal loss (Lin et al., ICCV 2017, Eq. 4): mean of -(1 - p_t)^gamma * log p_t.

    ``p_t`` is the softmax probability of the true class; ``gamma = 0`` gives plain cross-entropy.
    ``reduction="none"`` gives the loss of every sample (as torch's losses do).
    """

    def __init__(self, gamma: float = 2.0, reduction: str = "mean") -> None:
        super().__init__()
        if gamma < 0:
            raise ValueError(f"loss.gamma={gamma} must be non-negative")
        if reduction not in ("mean", "none"):
            raise ValueError(f"loss.reduction={reduction!r}; allowed: mean, none")
        self.gamma, self.reduction = float(gamma), reduction

    def forward(self, logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        log_p_t = F.log_softmax(logits.float(), dim=1).gather(1, labels.long().unsqueeze(1)).squeeze(1)
        losses = -((1.0 - log_p_t.exp()) ** self.gamma) * log_p_t
        return losses.mean() if self.reduction == "mean" else losses
