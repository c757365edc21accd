"""Distance estimators by name: ``build_estimator("deepfool", steps=20)``.

An estimator is called as ``estimator(classifier, inputs, labels) -> distances [B]`` (L2, in the classifier's
input units) and has ``bound``: "upper" (attacks), "lower" (randomized smoothing) or "approximate" (eq. 2.8).
Misclassified inputs get 0 and inputs with no bound found +inf (thesis eqs. 2.4-2.6).
"""

from __future__ import annotations

import inspect
from typing import Protocol

import torch
from torch import nn

from fairnas.robustness.attacks import CarliniWagnerL2, DeepFool
from fairnas.robustness.linearized import LinearizedDistance
from fairnas.robustness.smoothing import RandomizedSmoothing


class DistanceEstimator(Protocol):
    bound: str

    def __call__(self, classifier: nn.Module, inputs: torch.Tensor, labels: torch.Tensor) -> torch.Tensor: ...


ESTIMATORS: dict[str, type] = {
    "deepfool": DeepFool,
    "cw": CarliniWagnerL2,
    "smoothing": RandomizedSmoothing,
    "linear": LinearizedDistance,
}


def build_estimator(method: str, **options: object) -> DistanceEstimator:
    """The estimator ``method`` (deepfool | cw | smoothing | linear) with its keyword options."""
    if method not in ESTIMATORS:
        raise ValueError(f"robustness method {method!r} is unknown; allowed: {', '.join(ESTIMATORS)}")
    estimator_cls = ESTIMATORS[method]
    allowed = list(inspect.signature(estimator_cls).parameters)
    unknown = sorted(set(options) - set(allowed))
    if unknown:
        raise ValueError(f"{method}.{unknown[0]} is not an option of {method}; allowed: {allowed or 'none'}")
    return estimator_cls(**options)
