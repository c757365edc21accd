"""``python audit.py`` / ``fairnas-audit``: the robustness-bias audit of a trained run (thesis Ch. 2).

The run's model and data module are rebuilt by :func:`~fairnas.tasks.runs.load_run`. For the probes of one
split (:mod:`fairnas.robustness.probes`) every chosen estimator gives distances to the decision boundary, and
every partition (protected group, identity) gets its I_P(tau) curves and sigma(P) scores. Written to
``cfg.output_dir``:

- ``distances.csv``: one row per probe (path, identity, group, label) with one distance column per method;
- ``scores.csv``: per method, partition and member: n, share at distance 0 (misclassified), share unbounded,
  median distance, AUC, AUC of the rest, sigma (eq. 2.3);
- ``curves.csv``: per method, partition, member and tau: I_P(tau), I_notP(tau) and RB(P, tau) (eq. 2.2);
- ``curves_<partition>.png``: the I_P(tau) curves, one panel per method;
- ``summary.json``: robustness bias (max |sigma|) and sigma per member, per method and partition.

Tables and figures also go to the configured loggers (:mod:`fairnas.tasks.reporting`).
"""

from __future__ import annotations

import logging

import pandas as pd
from hydra.utils import instantiate
from omegaconf import DictConfig

from fairnas.data.table import SPLITS
from fairnas.io import write_json_atomic
from fairnas.metrics import group_names
from fairnas.robustness.bias import RobustnessBiasReport, robustness_bias_report
from fairnas.robustness.evaluation import measure_distances
from fairnas.robustness.plots import plot_curves
from fairnas.robustness.probes import build_probe_set, check_probe_settings
from fairnas.tasks.cli import hydra_command
from fairnas.tasks.reporting import Report, resolve_device
from fairnas.tasks.runs import load_run

log = logging.getLogger(__name__)
PARTITIONS = ("group", "identity")


def audit(cfg: DictConfig) -> dict:
    """Audit ``cfg.ckpt`` on ``cfg.split`` with ``cfg.methods`` over ``cfg.partitions``; returns the summary.

    Settings, estimator options and files are checked before the model is rebuilt or any probe attacked.
    """
    if cfg.split not in SPLITS:
        raise ValueError(f"split={cfg.split!r} is not a split; allowed: {list(SPLITS)}")
    unknown = [p for p in cfg.partitions if p not in PARTITIONS]
    if unknown or not cfg.partitions:
        raise ValueError(f"partitions={list(cfg.partitions)} must be a non-empty subset of {list(PARTITIONS)}")
    missing = [m for m in cfg.methods if m not in cfg.estimators]
    if missing or not cfg.methods:
        raise ValueError(f"methods={list(cfg.methods)} must name entries of estimators: {list(cfg.estimators)}")
    check_probe_settings(cfg.gallery_images, cfg.max_probes)
    estimators = {method: instantiate(cfg.estimators[method]) for method in cfg.methods}

    run = load_run(cfg.ckpt, device=resolve_device(cfg.device))
    datamodule = run.data()
    dataset = datamodule.dataset(cfg.split, train_transforms=False)
    probes = build_probe_set(run.module, dataset, split=cfg.split, gallery_images=cfg.gallery_images,
                             max_probes=cfg.max_probes, seed=cfg.seed, batch_size=cfg.batch_size)
    log.info("auditing %d %s probes with %s", len(probes.indices), cfg.split, ", ".join(estimators))
    distances = measure_distances(probes, estimators, batch_size=cfg.batch_size)

    rows = datamodule.splits[cfg.split].iloc[probes.indices]
    table = pd.DataFrame({"path": rows["path"].to_numpy(), "identity": rows["identity"].astype(str).to_numpy(),
                          "group": group_names(probes.groups, datamodule.group_order), "label": probes.labels,
                          **distances})
    orders = {"group": datamodule.group_order, "identity": None}
    reports = {(method, partition): robustness_bias_report(table[method], table[partition], orders[partition],
                                                           n_points=cfg.n_points)
               for method in estimators for partition in cfg.partitions}
    scores = _long_frame({key: report.scores for key, report in reports.items()}, estimators)
    curves = _long_frame({key: report.curves for key, report in reports.items()}, estimators)
    summary = {"ckpt": str(cfg.ckpt), "split": cfg.split, "n_probes": len(table),
               "methods": {method: {"bound": estimators[method].bound,
                                    **{partition: _summary(reports[method, partition]) for partition in cfg.partitions}}
                           for method in estimators}}

    with Report(cfg) as report:
        report.table("distances", table)
        path = report.table("scores", scores)
        report.table("curves", curves)
        for partition in cfg.partitions:
            report.figure(f"curves_{partition}", plot_curves({m: reports[m, partition] for m in estimators}, partition))
        write_json_atomic(report.output_dir / "summary.json", summary)
        report.metrics(_group_metrics(summary))
    log.info("robustness-bias scores (%s):\n%s", path,
             scores[scores["partition"] == "group"].to_string(index=False, float_format="%.4g"))
    return summary


def _long_frame(frames: dict[tuple[str, str], pd.DataFrame], estimators: dict) -> pd.DataFrame:
    """Stack per-(method, partition) frames with method, bound and partition columns in front."""
    return pd.concat([frame.assign(method=method, bound=estimators[method].bound, partition=partition)
                      [["method", "bound", "partition", *frame.columns]]
                      for (method, partition), frame in frames.items()], ignore_index=True)


def _summary(report: RobustnessBiasReport) -> dict:
    return {"robustness_bias": report.robustness_bias, "tau_max": report.tau_max,
            "sigma": dict(zip(report.scores["member"], map(float, report.scores["sigma"]), strict=True))}


def _group_metrics(summary: dict) -> dict[str, float]:
    """Robustness bias and the sigma of every protected group, per method."""
    metrics = {}
    for method, result in summary["methods"].items():
        if "group" in result:
            metrics[f"audit/{method}/robustness_bias"] = result["group"]["robustness_bias"]
            metrics.update({f"audit/{method}/sigma/{g}": v for g, v in result["group"]["sigma"].items()})
    return metrics


main = hydra_command(audit, "audit")
