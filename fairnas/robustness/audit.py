"""``audit(cfg)``: the robustness-bias audit of a trained checkpoint (thesis Ch. 2), run by ``audit.py``.

The run's model and data module are rebuilt from ``<run>/config.yaml`` and the checkpoint. For the probes of one
split (:mod:`fairnas.robustness.probes`) every chosen estimator gives distances to the decision boundary, and
every partition (protected group, identity) gets its I_P(tau) curves and sigma(P) scores. Written to
``cfg.output_dir``:

- ``distances.csv``: one row per probe (path, identity, group, label) with one distance column per method;
- ``scores.csv``: per method, partition and member: n, share at distance 0 (misclassified), share unbounded,
  median distance, AUC, AUC of the rest, sigma (eq. 2.3);
- ``curves.csv``: per method, partition, member and tau: I_P(tau), I_notP(tau) and RB(P, tau) (eq. 2.2);
- ``curves_<partition>.png``: the I_P(tau) curves, one panel per method;
- ``summary.json``: robustness bias (max |sigma|) and sigma per member, per method and partition.

Scores and curves also go to the configured loggers (W&B: tables and figures).
"""

from __future__ import annotations

import logging
from pathlib import Path

import pandas as pd
import pytorch_lightning as pl
import torch
from hydra.utils import instantiate
from omegaconf import DictConfig, OmegaConf

from fairnas.data import FaceDataModule
from fairnas.data.table import SPLITS
from fairnas.evaluation.checkpoint import run_config
from fairnas.io import atomic_path, write_csv_atomic, write_json_atomic
from fairnas.robustness.bias import RobustnessBiasReport, robustness_bias_report
from fairnas.robustness.estimators import build_estimator
from fairnas.robustness.evaluation import measure_distances
from fairnas.robustness.plots import plot_curves
from fairnas.robustness.probes import build_probe_set, check_probe_settings
from fairnas.training.module import FaceRecognitionModule
from fairnas.training.train import build_model

log = logging.getLogger(__name__)
PARTITIONS = ("group", "identity")


def audit(cfg: DictConfig) -> dict:
    """Audit ``cfg.ckpt`` on ``cfg.split`` with ``cfg.methods`` over ``cfg.partitions``; returns the summary.

    Settings, estimator options and files are checked before the model is rebuilt or any probe attacked.
    """
    output_dir = Path(cfg.output_dir)
    if cfg.split not in SPLITS:
        raise ValueError(f"split={cfg.split!r} is not a split; allowed: {list(SPLITS)}")
    unknown = [p for p in cfg.partitions if p not in PARTITIONS]
    if unknown or not cfg.partitions:
        raise ValueError(f"partitions={list(cfg.partitions)} must be a non-empty subset of {list(PARTITIONS)}")
    missing = [m for m in cfg.methods if m not in cfg.estimators]
    if missing or not cfg.methods:
        raise ValueError(f"methods={list(cfg.methods)} must name entries of estimators: {list(cfg.estimators)}")
    check_probe_settings(cfg.gallery_images, cfg.max_probes)
    estimators = {m: build_estimator(m, **OmegaConf.to_container(cfg.estimators[m])) for m in cfg.methods}
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu") if cfg.device == "auto" else cfg.device

    run_config, module, datamodule = load_run(cfg.ckpt, device)
    dataset = datamodule.dataset(cfg.split, train_transforms=False)
    probes = build_probe_set(module, dataset, split=cfg.split, gallery_images=cfg.gallery_images,
                             max_probes=cfg.max_probes, seed=cfg.seed, batch_size=cfg.batch_size)
    log.info("auditing %d %s probes with %s", len(probes.indices), cfg.split, ", ".join(estimators))
    distances = measure_distances(probes, estimators, batch_size=cfg.batch_size)

    rows = datamodule.splits[cfg.split].iloc[probes.indices]
    table = pd.DataFrame({"path": rows["path"].to_numpy(), "identity": rows["identity"].astype(str).to_numpy(),
                          "group": [datamodule.group_order[g] for g in probes.groups], "label": probes.labels,
                          **distances})
    orders = {"group": datamodule.group_order, "identity": None}
    reports = {(method, partition): robustness_bias_report(table[method], table[partition], orders[partition],
                                                           n_points=cfg.n_points)
               for method in estimators for partition in cfg.partitions}

    scores = _long_frame({key: report.scores for key, report in reports.items()}, estimators)
    curves = _long_frame({key: report.curves for key, report in reports.items()}, estimators)
    write_csv_atomic(table, output_dir / "distances.csv")
    write_csv_atomic(scores, output_dir / "scores.csv")
    write_csv_atomic(curves, output_dir / "curves.csv")
    figures = {}
    for partition in cfg.partitions:
        figures[partition] = output_dir / f"curves_{partition}.png"
        figure = plot_curves({m: reports[m, partition] for m in estimators}, partition)
        with atomic_path(figures[partition]) as tmp:
            figure.savefig(tmp, dpi=120, format="png")
    summary = {"ckpt": str(cfg.ckpt), "split": cfg.split, "n_probes": len(table),
               "methods": {method: {"bound": estimators[method].bound,
                                    **{partition: _summary(reports[method, partition]) for partition in cfg.partitions}}
                           for method in estimators}}
    write_json_atomic(output_dir / "summary.json", summary)
    log.info("robustness-bias scores (%s):\n%s", output_dir / "scores.csv",
             scores[scores["partition"] == "group"].to_string(index=False, float_format="%.4g"))
    _log_to_loggers(cfg, summary, {"scores": scores, "curves": curves}, figures)
    return summary


def load_run(
    ckpt: str | Path, device: torch.device | str = "cpu"
) -> tuple[DictConfig, FaceRecognitionModule, FaceDataModule]:
    """The config, evaluation-mode module (weights of ``ckpt``) and data module of the run that wrote ``ckpt``.

    A split the run generated and saved (``data.table.split.save_to``) is read back from its file.
    """
    ckpt, config = run_config(ckpt)
    split_spec = config.data.table.get("split")
    if split_spec is not None and split_spec.get("save_to") and Path(split_spec.save_to).is_file():
        split_spec.file, split_spec.save_to = split_spec.save_to, None
    module, datamodule = build_model(config)
    module.load_state_dict(torch.load(ckpt, map_location="cpu", weights_only=False)["state_dict"])
    return config, module.eval().to(device), datamodule


def _long_frame(frames: dict[tuple[str, str], pd.DataFrame], estimators: dict) -> pd.DataFrame:
    """Stack per-(method, partition) frames with method, bound and partition columns in front."""
    return pd.concat([frame.assign(method=method, bound=estimators[method].bound, partition=partition)
                      [["method", "bound", "partition", *frame.columns]]
                      for (method, partition), frame in frames.items()], ignore_index=True)


def _summary(report: RobustnessBiasReport) -> dict:
    return {"robustness_bias": report.robustness_bias, "tau_max": report.tau_max,
            "sigma": dict(zip(report.scores["member"], map(float, report.scores["sigma"]), strict=True))}


def _log_to_loggers(cfg: DictConfig, summary: dict, tables: dict[str, pd.DataFrame], figures: dict) -> None:
    """Robustness bias and group sigmas to every logger; with W&B also the tables and the curve figures."""
    metrics = {}
    for method, result in summary["methods"].items():
        if "group" in result:
            metrics[f"audit/{method}/robustness_bias"] = result["group"]["robustness_bias"]
            metrics.update({f"audit/{method}/sigma/{g}": v for g, v in result["group"]["sigma"].items()})
    for logger in (instantiate(node) for node in (cfg.get("logger") or {}).values()):
        logger.log_hyperparams(OmegaConf.to_container(cfg, resolve=True))
        logger.log_metrics(metrics)
        if isinstance(logger, pl.loggers.WandbLogger):
            for name, table in tables.items():
                logger.log_table(f"audit/{name}", dataframe=table)
            for partition, path in figures.items():
                logger.log_image(f"audit/curves_{partition}", images=[str(path)])
            logger.experiment.finish()
        else:
            logger.save()
