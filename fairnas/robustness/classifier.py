"""The identity classifier whose decision boundaries robustness bias is measured on (thesis Sec. 2.3).

Its input is an image in pixel space [0, 1]; it normalises the image like the data pipeline, embeds it with the
evaluation embedding (L2-normalised, mirrored-image sum when ``eval.tta_flip``) and returns scaled cosine logits
``s * cos(e, c_k)`` against class centres ``c_k``:

- training identities: the trained margin head's class centres (its logits without margin);
- held-out identities (open-set evaluation, thesis Sec. 4.3.4): gallery templates, the mean normalised embedding
  of each identity's enrolment images (:mod:`fairnas.robustness.probes`).

Every distance estimate, and the AdvERM regulariser through ``pixel_std``, is therefore in the same pixel units.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import torch
import torch.nn.functional as F
from torch import nn
from torchvision.transforms import v2


class IdentityClassifier(nn.Module):
    """``forward(pixels [B, 3, H, W] in [0, 1]) -> scale * cos(embed(normalise(pixels)), centres)``, [B, C].

    ``embed`` maps normalised images to L2-normalised embeddings and must be differentiable (attacks take input
    gradients through it); the caller puts the networks behind it in evaluation mode.
    """

    def __init__(
        self,
        embed: Callable[[torch.Tensor], torch.Tensor],
        centres: torch.Tensor,
        scale: float,
        mean: Sequence[float],
        std: Sequence[float],
    ) -> None:
        super().__init__()
        self.embed = embed
        self.scale = float(scale)
        self.register_buffer("centres", F.normalize(centres.detach().float(), dim=1))
        self.register_buffer("mean", torch.tensor(list(mean), dtype=torch.float32).view(1, -1, 1, 1))
        self.register_buffer("std", torch.tensor(list(std), dtype=torch.float32).view(1, -1, 1, 1))

    @property
    def num_classes(self) -> int:
        return self.centres.shape[0]

    def forward(self, pixels: torch.Tensor) -> torch.Tensor:
        return self.scale * F.linear(self.embed((pixels - self.mean) / self.std), self.centres)

    def to_pixels(self, images: torch.Tensor) -> torch.Tensor:
        """Undo the data pipeline's normalisation: pixels in [0, 1] (clamped against rounding)."""
        return (images * self.std + self.mean).clamp(0.0, 1.0)


def pixel_normalization(transform: v2.Compose) -> tuple[list[float], list[float]]:
    """(mean, std) of the ``Normalize`` step of a pipeline from :func:`fairnas.data.transforms.eval_transforms`."""
    for step in transform.transforms:
        if isinstance(step, v2.Normalize):
            return list(step.mean), list(step.std)
    raise ValueError("the data transform has no Normalize step, so pixel space [0, 1] is undefined")
