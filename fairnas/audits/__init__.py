"""Audits of trained models: what their representations reveal about the protected attribute."""

from fairnas.audits.linear_probe import LAYERS, linear_probe, probe_features, stage_features

__all__ = ["LAYERS", "linear_probe", "probe_features", "stage_features"]
