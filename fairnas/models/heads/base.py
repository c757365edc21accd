"""Margin heads: normalised class centres that turn embeddings into scaled cosine logits.

Structure follows insightface's arcface_torch: ``cos[b, c] = <e_b / |e_b|, w_c / |w_c|>``; during training the
target-class cosine of each sample is replaced by a margin-penalised value, and all logits are multiplied by the
scale ``s``. Subclasses implement only that target transform (and, for MagFace, a per-sample default margin and an
auxiliary loss).
"""

from abc import ABC, abstractmethod
from dataclasses import dataclass, field

import torch
import torch.nn.functional as F
from torch import nn

MarginArg = float | torch.Tensor | None
"""A per-call margin override: one float for the batch or a tensor [B] with one margin per sample."""


@dataclass
class HeadOutput:
    """``logits`` [B, C] for the classification loss; ``aux_losses`` maps names to scalar, already weighted terms."""

    logits: torch.Tensor
    aux_losses: dict[str, torch.Tensor] = field(default_factory=dict)


class MarginHead(nn.Module, ABC):
    """Cosine classifier with an additive margin on the target class; subclasses define the margin.

    forward(embeddings [B, D], labels [B] | None, margin | None) -> :class:`HeadOutput`. Without labels it returns
    ``s * cos`` for every class (inference, no margin). With labels, ``margin`` overrides the head's default margin,
    either for the whole batch (float) or per sample (tensor [B]), e.g. group-dependent margins.
    """

    def __init__(self, embedding_dim: int, num_classes: int, scale: float) -> None:
        super().__init__()
        if embedding_dim < 1 or num_classes < 1:
            raise ValueError(
                f"head embedding_dim={embedding_dim} and num_classes={num_classes} must be positive integers"
            )
        if scale <= 0:
            raise ValueError(f"head.scale={scale} must be positive")
        self.embedding_dim = embedding_dim
        self.num_classes = num_classes
        self.scale = float(scale)
        self.weight = nn.Parameter(torch.empty(num_classes, embedding_dim))
        nn.init.normal_(self.weight, std=0.01)

    def cosine(self, embeddings: torch.Tensor) -> torch.Tensor:
        """Cosine similarity [B, C] between the embeddings and the normalised class centres."""
        return F.linear(F.normalize(embeddings), F.normalize(self.weight))

    @abstractmethod
    def default_margin(self, embeddings: torch.Tensor) -> torch.Tensor:
        """Per-sample margin [B] used when the caller gives none."""

    @abstractmethod
    def target_logit(self, target_cos: torch.Tensor, margin: torch.Tensor) -> torch.Tensor:
        """Margin-penalised target cosine [B] from the target cosines [B] and margins [B] (before scaling)."""

    def aux_losses(self, embeddings: torch.Tensor) -> dict[str, torch.Tensor]:
        """Weighted auxiliary training losses; none by default."""
        return {}

    def forward(
        self, embeddings: torch.Tensor, labels: torch.Tensor | None = None, margin: MarginArg = None
    ) -> HeadOutput:
        if embeddings.ndim != 2 or embeddings.shape[1] != self.embedding_dim:
            raise ValueError(f"embeddings of shape {tuple(embeddings.shape)} do not match [B, {self.embedding_dim}]")
        # Margins act on cosines near 1: keep this in float32 even under mixed precision.
        with torch.autocast(device_type=embeddings.device.type, enabled=False):
            embeddings = embeddings.float()
            cos = self.cosine(embeddings)
            if labels is None:
                return HeadOutput(logits=self.scale * cos)
            margins = self._resolve_margin(margin, embeddings)
            index = labels.long().unsqueeze(1)
            target = self.target_logit(cos.gather(1, index).squeeze(1), margins)
            logits = cos.scatter(1, index, target.unsqueeze(1).to(cos.dtype))
            return HeadOutput(logits=self.scale * logits, aux_losses=self.aux_losses(embeddings))

    def _resolve_margin(self, margin: MarginArg, embeddings: torch.Tensor) -> torch.Tensor:
        batch = embeddings.shape[0]
        if margin is None:
            return self.default_margin(embeddings)
        if isinstance(margin, torch.Tensor):
            if margin.ndim == 0:
                return margin.to(embeddings).expand(batch)
            if margin.shape != (batch,):
                raise ValueError(f"margin tensor of shape {tuple(margin.shape)} must be a scalar or [B]=[{batch}]")
            return margin.to(embeddings)
        return embeddings.new_full((batch,), float(margin))


class ConstantMarginHead(MarginHead, ABC):
    """A margin head whose default margin is one non-negative constant ``margin`` (CosFace, ArcFace)."""

    def __init__(self, embedding_dim: int, num_classes: int, scale: float, margin: float) -> None:
        if margin < 0:
            raise ValueError(f"head.margin={margin} must be non-negative")
        super().__init__(embedding_dim, num_classes, scale)
        self.margin = float(margin)

    def default_margin(self, embeddings: torch.Tensor) -> torch.Tensor:
        return embeddings.new_full((embeddings.shape[0],), self.margin)
