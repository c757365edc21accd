"""Fairness and robustness-bias training terms, one per file, each ``reg(batch=..., embeddings=..., logits=...,
module=...) -> scalar``; the training module adds ``weight * term`` to the loss
(see :class:`~fairnas.training.module.FaceRecognitionModule`)."""

from fairnas.regularizers.adverm import RobustnessBiasRegularizer

__all__ = ["RobustnessBiasRegularizer"]
