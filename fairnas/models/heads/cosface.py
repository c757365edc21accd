"""CosFace / large margin cosine loss head (Wang et al., CVPR 2018): target logit s * (cos(theta) - m)."""

import torch

from fairnas.models.heads.base import ConstantMarginHead


class CosFaceHead(ConstantMarginHead):
    """Additive cosine margin: the target logit is ``s * (cos - m)``; defaults s=64, m=0.35."""

    def __init__(self, embedding_dim: int, num_classes: int, scale: float = 64.0, margin: float = 0.35) -> None:
        super().__init__(embedding_dim, num_classes, scale, margin)

    def target_logit(self, target_cos: torch.Tensor, margin: torch.Tensor) -> torch.Tensor:
        return target_cos - margin
