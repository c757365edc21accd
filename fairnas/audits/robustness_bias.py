"""Robustness bias (thesis Ch. 2): how far each group's probes lie from the identity classifier's decision boundary.

For the probes of one split (:mod:`fairnas.robustness.probes`) every chosen estimator gives distances to the
decision boundary, and every partition (protected group, identity) gets its I_P(tau) curves and sigma(P) scores
(thesis Eqs. 2.2 and 2.3). Tables: ``distances`` (one row per probe with one distance column per method),
``scores`` (per method, partition and member: n, share at distance 0 = misclassified, share unbounded, median
distance, AUC, AUC of the rest, sigma) and ``curves`` (I_P(tau), I_notP(tau) and RB(P, tau) per tau); figures
``curves_<partition>``, one panel per method.
"""

from __future__ import annotations

import logging

import pandas as pd
from hydra.utils import instantiate
from omegaconf import DictConfig

from fairnas.audits.base import Audit, AuditData, AuditResult, register
from fairnas.metrics import group_names
from fairnas.robustness.bias import RobustnessBiasReport, robustness_bias_report
from fairnas.robustness.evaluation import measure_distances
from fairnas.robustness.plots import plot_curves
from fairnas.robustness.probes import build_probe_set, check_probe_settings

log = logging.getLogger(__name__)
PARTITIONS = ("group", "identity")


def check_config(config: DictConfig) -> None:
    """Methods, partitions, probe counts and every chosen estimator's options, before any model is loaded."""
    unknown = [p for p in config.partitions if p not in PARTITIONS]
    if unknown or not config.partitions:
        raise ValueError(
            f"robustness_bias.partitions={list(config.partitions)} must be a non-empty subset of {list(PARTITIONS)}"
        )
    missing = [m for m in config.methods if m not in config.estimators]
    if missing or not config.methods:
        raise ValueError(
            f"robustness_bias.methods={list(config.methods)} must name entries of "
            f"robustness_bias.estimators: {list(config.estimators)}"
        )
    check_probe_settings(config.gallery_images, config.max_probes)
    _estimators(config)


def audit(model, data: AuditData, config: DictConfig) -> AuditResult:
    """Distances, I_P(tau) curves and sigma(P) of ``data``'s probes under ``model`` (a trained run's module)."""
    estimators = _estimators(config)
    dataset = data.dataset
    probes = build_probe_set(
        model.embedding_model(),
        dataset,
        split=data.split,
        gallery_images=config.gallery_images,
        max_probes=config.max_probes,
        seed=data.seed,
        batch_size=data.batch_size,
    )
    log.info("robustness bias: %d %s probes with %s", len(probes.indices), data.split, ", ".join(estimators))
    distances = measure_distances(probes, estimators, batch_size=data.batch_size)

    rows = data.frame.iloc[probes.indices]
    table = pd.DataFrame(
        {
            "path": rows["path"].to_numpy(),
            "identity": rows["identity"].astype(str).to_numpy(),
            "group": group_names(probes.groups, data.group_order),
            "label": probes.labels,
            **distances,
        }
    )
    orders = {"group": data.group_order, "identity": None}
    reports = {
        (method, partition): robustness_bias_report(
            table[method], table[partition], orders[partition], n_points=config.n_points
        )
        for method in estimators
        for partition in config.partitions
    }
    summary = {
        "n_probes": len(table),
        "methods": {
            method: {"bound": estimators[method].bound, **{p: _summary(reports[method, p]) for p in config.partitions}}
            for method in estimators
        },
    }
    return AuditResult(
        tables={
            "distances": table,
            "scores": _long_frame({key: report.scores for key, report in reports.items()}, estimators),
            "curves": _long_frame({key: report.curves for key, report in reports.items()}, estimators),
        },
        figures={f"curves_{p}": plot_curves({m: reports[m, p] for m in estimators}, p) for p in config.partitions},
        summary=summary,
        finding=_finding(summary, data.group_order),
    )


def _estimators(config: DictConfig) -> dict:
    return {method: instantiate(config.estimators[method]) for method in config.methods}


def _long_frame(frames: dict[tuple[str, str], pd.DataFrame], estimators: dict) -> pd.DataFrame:
    """Stack per-(method, partition) frames with method, bound and partition columns in front."""
    return pd.concat(
        [
            frame.assign(method=method, bound=estimators[method].bound, partition=partition)[
                ["method", "bound", "partition", *frame.columns]
            ]
            for (method, partition), frame in frames.items()
        ],
        ignore_index=True,
    )


def _summary(report: RobustnessBiasReport) -> dict:
    return {
        "robustness_bias": report.robustness_bias,
        "tau_max": report.tau_max,
        "sigma": dict(zip(report.scores["member"], map(float, report.scores["sigma"]), strict=True)),
    }


def _finding(summary: dict, group_order: list[str]) -> str:
    """Per method: the group whose probes lie closest to the boundary (lowest sigma) and the robustness bias."""
    sentences = []
    for method, result in summary["methods"].items():
        if "group" not in result:
            continue
        sigma = result["group"]["sigma"]
        worst = min(sigma, key=sigma.get)
        sentences.append(
            f"{method} ({result['bound']} bound): group {worst} is the least robust "
            f"(sigma {sigma[worst]:+.3g}; robustness bias {result['group']['robustness_bias']:.3g})."
        )
    if not sentences:
        return f"Robustness bias was measured for {summary['n_probes']} probes over identities only."
    return (
        " ".join(sentences) + " Sigma is the area between a group's and the other probes' share of probes "
        "farther than tau from the decision boundary (thesis Eq. 2.3); negative means closer, i.e. easier to "
        "flip with a small perturbation."
    )


register(
    Audit(
        "robustness_bias",
        "distances to the decision boundary per group (thesis Ch. 2)",
        audit,
        check=check_config,
        splits=("train", "val", "test"),
        title="robustness bias",
    )
)
