"""ArcFace / additive angular margin head (Deng et al., CVPR 2019): target logit s * cos(theta + m)."""

import math

import torch

from fairnas.models.heads.base import ConstantMarginHead

COS_EPS = 1e-6
"""Cosines are clamped to [-1 + eps, 1 - eps] before acos, whose derivative is infinite at +-1."""


def additive_angular_margin(target_cos: torch.Tensor, margin: torch.Tensor) -> torch.Tensor:
    """cos(theta + m) for theta = acos(cos), with insightface's fallback once theta + m passes pi.

    Past theta = pi - m, cos(theta + m) would rise again and reward moving away from the class centre; as in
    insightface (no ``easy_margin``) the target falls back to the CosFace-like ``cos - m * sin(m)``, which keeps
    decreasing in theta. Clamping keeps the gradient finite at cos = +-1 (it is zero outside the clamp range).
    """
    theta = torch.acos(target_cos.clamp(-1.0 + COS_EPS, 1.0 - COS_EPS))
    return torch.where(theta + margin <= math.pi, torch.cos(theta + margin), target_cos - margin * torch.sin(margin))


class ArcFaceHead(ConstantMarginHead):
    """Additive angular margin: the target logit is ``s * cos(theta + m)``; defaults s=64, m=0.5."""

    def __init__(self, embedding_dim: int, num_classes: int, scale: float = 64.0, margin: float = 0.5) -> None:
        if margin >= math.pi / 2:
            raise ValueError(f"head.margin={margin} must lie in [0, pi/2)")
        super().__init__(embedding_dim, num_classes, scale, margin)

    def target_logit(self, target_cos: torch.Tensor, margin: torch.Tensor) -> torch.Tensor:
        return additive_angular_margin(target_cos, margin)
