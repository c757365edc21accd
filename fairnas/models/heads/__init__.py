"""Margin heads chosen by name from config: ``build_head("arcface", embedding_dim, num_classes, **kwargs)``."""

import inspect

from fairnas.models.heads.arcface import ArcFaceHead
from fairnas.models.heads.base import ConstantMarginHead, HeadOutput, MarginArg, MarginHead
from fairnas.models.heads.cosface import CosFaceHead
from fairnas.models.heads.magface import MagFaceHead

HEADS: dict[str, type[MarginHead]] = {"cosface": CosFaceHead, "arcface": ArcFaceHead, "magface": MagFaceHead}


def build_head(name: str, embedding_dim: int, num_classes: int, **kwargs: object) -> MarginHead:
    """Build the head ``name`` (case-insensitive: cosface, arcface, magface) with its keyword arguments."""
    key = name.lower()
    if key not in HEADS:
        raise ValueError(f"head.name={name!r} is not a margin head; allowed: {', '.join(HEADS)}")
    head_cls = HEADS[key]
    allowed = [p for p in inspect.signature(head_cls).parameters if p not in ("embedding_dim", "num_classes")]
    unknown = sorted(set(kwargs) - set(allowed))
    if unknown:
        raise ValueError(f"head.{unknown[0]} is not an argument of {key}; allowed: {', '.join(allowed)}")
    return head_cls(embedding_dim, num_classes, **kwargs)  # type: ignore[arg-type]


__all__ = [
    "HEADS",
    "ArcFaceHead",
    "ConstantMarginHead",
    "CosFaceHead",
    "HeadOutput",
    "MagFaceHead",
    "MarginArg",
    "MarginHead",
    "build_head",
]
