"""Backbones (timm wrapper, searchable DPN), the embedding neck, and margin heads."""

from fairnas.models.dpn import DPN_PRESETS, SearchableDPN, build_dpn
from fairnas.models.heads import HEADS, HeadOutput, MarginHead, build_head
from fairnas.models.neck import EmbeddingNeck, FaceEmbedder
from fairnas.models.ops import OPERATIONS, ops_name, parse_ops
from fairnas.models.timm_backbone import TimmBackbone

__all__ = [
    "DPN_PRESETS",
    "HEADS",
    "OPERATIONS",
    "EmbeddingNeck",
    "FaceEmbedder",
    "HeadOutput",
    "MarginHead",
    "SearchableDPN",
    "TimmBackbone",
    "build_dpn",
    "build_head",
    "ops_name",
    "parse_ops",
]
