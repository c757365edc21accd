"""Robustness bias (thesis Ch. 2): distances to the decision boundary, per-partition scores, the training hook.

Upper bounds from minimal adversarial examples (DeepFool, Carlini-Wagner L2), the certified radius of randomized
smoothing (Cohen et al.'s CERTIFY, the thesis's lower bound), the first-order distance of eq. 2.8; I_P(tau),
RB(P, tau) and sigma(P) per partition (eqs. 2.2-2.6). ``audit.py`` runs them on a trained checkpoint
(:mod:`fairnas.tasks.audit`).
"""

from fairnas.robustness.attacks import CarliniWagnerL2, DeepFool
from fairnas.robustness.bias import RobustnessBiasReport, clipped_auc, robustness_bias_report, share_beyond
from fairnas.robustness.classifier import IdentityClassifier
from fairnas.robustness.estimators import DistanceEstimator
from fairnas.robustness.evaluation import RobustnessBiasEvaluation, measure_distances
from fairnas.robustness.linearized import LinearizedDistance, linearized_boundary_distance
from fairnas.robustness.probes import EmbeddingModel, ProbeSet, build_probe_set, split_enrolment
from fairnas.robustness.smoothing import RandomizedSmoothing, clopper_pearson_lower_bound

__all__ = [
    "CarliniWagnerL2",
    "DeepFool",
    "DistanceEstimator",
    "EmbeddingModel",
    "IdentityClassifier",
    "LinearizedDistance",
    "ProbeSet",
    "RandomizedSmoothing",
    "RobustnessBiasEvaluation",
    "RobustnessBiasReport",
    "build_probe_set",
    "clipped_auc",
    "clopper_pearson_lower_bound",
    "linearized_boundary_distance",
    "measure_distances",
    "robustness_bias_report",
    "share_beyond",
    "split_enrolment",
]
