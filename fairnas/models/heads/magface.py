"""MagFace head (Meng et al., CVPR 2021): an ArcFace margin that grows with the feature magnitude.

With the raw (unnormalised) embedding norm clamped to a in [l_a, u_a]:
    m(a) = l_m + (u_m - l_m) * (a - l_a) / (u_a - l_a)          (linear, increasing, differentiable in a)
    g(a) = 1 / a + a / u_a^2                                     (per sample, shape [B])
and the loss adds ``lambda_g * mean_b g(a_b)``, returned as ``aux_losses["magface_g"]``.
"""

import math

import torch

from fairnas.models.heads.arcface import additive_angular_margin
from fairnas.models.heads.base import MarginHead


class MagFaceHead(MarginHead):
    """Magnitude-aware angular margin; defaults s=64, l_a=10, u_a=110, l_m=0.45, u_m=0.8, lambda_g=20.

    A ``margin`` passed to forward replaces m(a) for that call; the regulariser g(a) still applies.
    """

    def __init__(
        self,
        embedding_dim: int,
        num_classes: int,
        scale: float = 64.0,
        l_a: float = 10.0,
        u_a: float = 110.0,
        l_m: float = 0.45,
        u_m: float = 0.8,
        lambda_g: float = 20.0,
    ) -> None:
        if not 0 < l_a < u_a:
            raise ValueError(f"head.l_a={l_a} and head.u_a={u_a} must satisfy 0 < l_a < u_a")
        if not 0 <= l_m <= u_m < math.pi / 2:
            raise ValueError(f"head.l_m={l_m} and head.u_m={u_m} must satisfy 0 <= l_m <= u_m < pi/2")
        if lambda_g < 0:
            raise ValueError(f"head.lambda_g={lambda_g} must be non-negative")
        super().__init__(embedding_dim, num_classes, scale)
        self.l_a, self.u_a = float(l_a), float(u_a)
        self.l_m, self.u_m = float(l_m), float(u_m)
        self.lambda_g = float(lambda_g)

    def clamped_norm(self, embeddings: torch.Tensor) -> torch.Tensor:
        """Feature magnitude a = |e| clamped to [l_a, u_a], shape [B]."""
        return embeddings.norm(dim=1).clamp(self.l_a, self.u_a)

    def default_margin(self, embeddings: torch.Tensor) -> torch.Tensor:
        """m(a): linear from l_m at a = l_a to u_m at a = u_a."""
        slope = (self.u_m - self.l_m) / (self.u_a - self.l_a)
        return self.l_m + slope * (self.clamped_norm(embeddings) - self.l_a)

    def regularizer(self, embeddings: torch.Tensor) -> torch.Tensor:
        """g(a) = 1/a + a/u_a^2 per sample, shape [B]; minimised at a = u_a."""
        norm = self.clamped_norm(embeddings)
        return 1.0 / norm + norm / self.u_a**2

    def target_logit(self, target_cos: torch.Tensor, margin: torch.Tensor) -> torch.Tensor:
        return additive_angular_margin(target_cos, margin)

    def aux_losses(self, embeddings: torch.Tensor) -> dict[str, torch.Tensor]:
        return {"magface_g": self.lambda_g * self.regularizer(embeddings).mean()}
