"""Audits of trained models: why, and under which conditions, a group is served worse.

Every audit is a module with ``audit(model, data, config) -> AuditResult`` (:mod:`fairnas.audits.base`) and,
optionally, ``check_config(config) -> None`` that rejects bad settings (one line naming the key) before any model is
loaded. :data:`AUDITS` names them for ``python audit.py audits=[...]``; :func:`audit_module` imports one on first use.
"""

from __future__ import annotations

import importlib
from types import ModuleType

AUDITS = {
    "robustness_bias": "distances to the decision boundary per group (thesis Ch. 2)",
    "corruptions": "ImageNet-C corruption robustness disparity (thesis Ch. 3)",
    "ood": "in- vs out-of-distribution metamorphic tests (DistroFair)",
    "linear_probe": "how linearly the representation exposes the group (thesis Sec. 4.5.7)",
    "icon2": "which attribute explains the disparity: confounder ranking and controlled disparity (ICON²)",
    "attention_iou": "where the model looks, per group: Grad-CAM heatmap and region mask scores (Attention-IoU)",
    "fairness_indicators": "how strongly the embedding encodes the group: retrieval indicators (Fairness Indicators)",
}
"""The audits ``python audit.py audits=[...]`` runs: name -> what it asks (one module of this package each)."""


def audit_module(name: str) -> ModuleType:
    """The module of audit ``name`` (a key of :data:`AUDITS`)."""
    if name not in AUDITS:
        raise ValueError(f"audits: unknown audit {name!r}; allowed: {list(AUDITS)}")
    return importlib.import_module(f"fairnas.audits.{name}")
