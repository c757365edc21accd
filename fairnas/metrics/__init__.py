"""Evaluation metrics: face identification error/rank and per-group fairness disparities."""

from fairnas.metrics.fairness import group_disparities
from fairnas.metrics.identification import face_identification_metrics, probe_ranks

__all__ = ["face_identification_metrics", "group_disparities", "probe_ranks"]
