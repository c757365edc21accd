"""Backbones (timm wrapper, searchable DPN), the embedding neck, and margin heads."""

from fairnas.models.dpn import DPN_PRESETS, SearchableDPN, build_dpn
from fairnas.models.heads import ArcFaceHead, CosFaceHead, HeadOutput, MagFaceHead, MarginHead
from fairnas.models.neck import EmbeddingNeck, FaceEmbedder
from fairnas.models.ops import OPERATIONS, ops_name, parse_ops
from fairnas.models.timm_backbone import TimmBackbone

__all__ = [
    "DPN_PRESETS",
    "ArcFaceHead",
    "CosFaceHead",
    "OPERATIONS",
    "EmbeddingNeck",
    "FaceEmbedder",
    "HeadOutput",
    "MagFaceHead",
    "MarginHead",
    "SearchableDPN",
    "TimmBackbone",
    "build_dpn",
    "ops_name",
    "parse_ops",
]
