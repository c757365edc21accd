"""Embedding neck and the backbone + neck embedder (insightface arcface_torch style).

The face embedding is the neck's output: pooled backbone features -> BN1d -> Dropout -> Linear -> BN1d. The
margin head's class centres sit on top of it during training only; evaluation uses the embedding itself.
"""

import torch
from torch import nn


class EmbeddingNeck(nn.Module):
    """BN1d -> Dropout -> Linear -> BN1d, mapping pooled features [B, in_features] to embeddings [B, D]."""

    def __init__(self, in_features: int, embedding_dim: int = 512, dropout: float = 0.0) -> None:
        super().__init__()
        if in_features < 1 or embedding_dim < 1:
            raise ValueError(
                f"neck in_features={in_features} and embedding_dim={embedding_dim} must be positive integers"
            )
        if not 0.0 <= dropout < 1.0:
            raise ValueError(f"model.dropout={dropout} must lie in [0, 1)")
        self.embedding_dim = embedding_dim
        self.layers = nn.Sequential(
            nn.BatchNorm1d(in_features),
            nn.Dropout(dropout),
            nn.Linear(in_features, embedding_dim, bias=False),  # the BN1d after it supplies the shift
            nn.BatchNorm1d(embedding_dim),
        )

    def forward(self, features: torch.Tensor) -> torch.Tensor:
        return self.layers(features)


class FaceEmbedder(nn.Module):
    """Backbone + :class:`EmbeddingNeck`; forward(images [B, 3, H, W]) -> embeddings [B, embedding_dim].

    ``backbone`` is any module exposing ``num_features: int`` whose forward returns pooled features
    [B, num_features] (:class:`~fairnas.models.timm_backbone.TimmBackbone`,
    :class:`~fairnas.models.dpn.SearchableDPN`). With ``channels_last`` the convolution weights and every input
    batch are kept in the NHWC memory format, which oneDNN's and cuDNN's convolutions run faster (the same
    values up to float rounding; ``bench/training_speed.py --parts showcase``).
    """

    def __init__(
        self, backbone: nn.Module, embedding_dim: int = 512, dropout: float = 0.0, channels_last: bool = False
    ) -> None:
        super().__init__()
        num_features = getattr(backbone, "num_features", None)
        if not isinstance(num_features, int):
            raise ValueError(f"backbone {type(backbone).__name__} must expose an int attribute num_features")
        self.backbone = backbone
        self.neck = EmbeddingNeck(num_features, embedding_dim, dropout)
        self.embedding_dim = embedding_dim
        self.channels_last = channels_last
        if channels_last:
            self.to(memory_format=torch.channels_last)

    def forward(self, images: torch.Tensor) -> torch.Tensor:
        if self.channels_last:
            images = images.contiguous(memory_format=torch.channels_last)
        return self.neck(self.backbone(images))


def normalized_embedding(embedder: nn.Module, images: torch.Tensor, tta_flip: bool) -> torch.Tensor:
    """L2-normalised embeddings; with ``tta_flip`` of the sum of the image's and its mirror image's embeddings.

    Differentiable (robustness attacks differentiate through it); evaluation calls it without gradients.
    """
    embeddings = embedder(images)
    if tta_flip:
        embeddings = embeddings + embedder(torch.flip(images, dims=[3]))
    return nn.functional.normalize(embeddings, dim=1)
