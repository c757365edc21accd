"""Margin heads, built from config by ``_target_`` (``conf/head/``): CosFace, ArcFace, MagFace."""

from fairnas.models.heads.arcface import ArcFaceHead
from fairnas.models.heads.base import ConstantMarginHead, HeadOutput, MarginArg, MarginHead
from fairnas.models.heads.cosface import CosFaceHead
from fairnas.models.heads.magface import MagFaceHead

__all__ = [
    "ArcFaceHead",
    "ConstantMarginHead",
    "CosFaceHead",
    "HeadOutput",
    "MagFaceHead",
    "MarginArg",
    "MarginHead",
]
