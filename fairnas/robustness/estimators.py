"""The distance-estimator interface; estimators are built from config by ``_target_`` (``conf/estimator/``).

An estimator is called as ``estimator(classifier, inputs, labels) -> distances [B]`` (L2, in the classifier's
input units) and has ``bound``: "upper" (attacks), "lower" (randomized smoothing) or "approximate" (eq. 2.8).
Misclassified inputs get 0 and inputs with no bound found +inf (thesis eqs. 2.4-2.6).
"""

from __future__ import annotations

from typing import Protocol

import torch
from torch import nn


class DistanceEstimator(Protocol):
    bound: str

    def __call__(self, classifier: nn.Module, inputs: torch.Tensor, labels: torch.Tensor) -> torch.Tensor: ...
