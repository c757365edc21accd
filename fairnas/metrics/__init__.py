"""Evaluation metrics: face identification error/rank, per-group fairness disparities, and face verification."""

from fairnas.metrics.fairness import OUTSIDE_GROUP_ORDER, group_disparities, group_names
from fairnas.metrics.identification import (
    IDENTIFICATION_METRICS,
    NonFiniteEmbeddingsError,
    face_identification_metrics,
    probe_ranks,
)
from fairnas.metrics.verification import (
    det_figure,
    frvt_error_rates,
    kfold_accuracy,
    pair_scores,
    tar_at_far,
    verification_metrics,
)

__all__ = [
    "IDENTIFICATION_METRICS",
    "OUTSIDE_GROUP_ORDER",
    "NonFiniteEmbeddingsError",
    "det_figure",
    "face_identification_metrics",
    "frvt_error_rates",
    "group_disparities",
    "group_names",
    "kfold_accuracy",
    "pair_scores",
    "probe_ranks",
    "tar_at_far",
    "verification_metrics",
]
