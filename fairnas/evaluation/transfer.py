"""``evaluate(cfg)``: transfer evaluation of trained checkpoints (thesis Sec. 4.5.5-4.5.7).

Every checkpoint is evaluated on every selected benchmark of ``cfg.catalog``; written to ``cfg.output_dir``:

- ``accuracy.csv``: model x benchmark 10-fold verification accuracy in % (Tables 4.5 and 4.7);
- ``fairness.csv``: per model and benchmark with a protected attribute (RFW): identification error and the five
  fairness metrics (Table 4.8), per-group error, rank, verification accuracy and FRVT FMR/FNMR;
- ``metrics.csv``: every metric in long format (model, benchmark, protocol, group, metric, value);
- ``det/<model>/<benchmark>.png``: DET curves per group with the operating points at the global threshold;
- ``linear_probe.csv`` with ``linear_probe.enabled``: held-out probe accuracy per layer (Table 4.9).

The tables are also printed and sent to the configured loggers (W&B: tables, metrics and DET images).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from pathlib import Path

import pandas as pd
import pytorch_lightning as pl
import torch
from hydra.utils import instantiate
from omegaconf import DictConfig, ListConfig, OmegaConf

from fairnas.evaluation.benchmarks import BenchmarkResult, evaluate_benchmark
from fairnas.evaluation.checkpoint import TrainedModel, load_trained_model
from fairnas.evaluation.embeddings import embed_images
from fairnas.evaluation.probing import probe_trained_model
from fairnas.evaluation.report import accuracy_table, fairness_table, long_table, probe_table
from fairnas.io import atomic_path, write_text_atomic

log = logging.getLogger(__name__)
INDEXED_TABLES = ("accuracy", "linear_probe")  # tables whose index (the model) is a column of their CSV


def evaluate(cfg: DictConfig) -> dict[str, pd.DataFrame]:
    """Evaluate ``cfg.ckpt`` (one checkpoint or a list) on ``cfg.benchmarks``; returns the tables by file stem.

    Names, folders and checkpoints are checked before any benchmark is loaded or image embedded.
    """
    output_dir = Path(cfg.output_dir)
    checkpoints, labels = _checkpoints_and_labels(cfg)
    specs = _benchmark_specs(cfg)
    if not specs and not cfg.linear_probe.enabled:
        raise ValueError("evaluate: nothing to do; name benchmarks (e.g. benchmarks=[lfw,rfw]) or set "
                         "linear_probe.enabled=true")
    models = [load_trained_model(path, label) for path, label in zip(checkpoints, labels, strict=True)]
    benchmarks = {name: instantiate(spec) for name, spec in specs.items()}
    device = _device(cfg.device)

    results: dict[tuple[str, str], BenchmarkResult] = {}
    det_paths: dict[tuple[str, str], Path] = {}
    for model in models:
        for name, benchmark in benchmarks.items():
            log.info("%s: embedding %d images of %s", model.label, len(benchmark.images), name)
            embeddings = embed_images(
                model.embedder, benchmark.root, benchmark.images["path"].tolist(), model.config.data.transforms,
                tta_flip=model.config.eval.tta_flip, batch_size=cfg.batch_size, num_workers=cfg.num_workers,
                device=device,
            )
            result = evaluate_benchmark(
                benchmark, embeddings, far_targets=list(cfg.verification.far_targets),
                target_fmr=cfg.verification.target_fmr, rank_by=model.config.eval.rank_by,
                title=f"{model.label} on {name}",
            )
            results[model.label, name] = result
            det_paths[model.label, name] = output_dir / "det" / model.label / f"{name}.png"
            with atomic_path(det_paths[model.label, name]) as tmp:
                result.det.savefig(tmp, dpi=120, format="png")

    tables = {}
    if results:
        long = long_table(results)
        tables.update(accuracy=accuracy_table(long), fairness=fairness_table(long), metrics=long)
    if cfg.linear_probe.enabled:
        tables["linear_probe"] = probe_table({model.label: _probe(model, cfg, device) for model in models})
    for stem, table in tables.items():
        write_text_atomic(output_dir / f"{stem}.csv", table.to_csv(index=stem in INDEXED_TABLES))
        if stem != "metrics":
            shown = table.set_index(["model", "benchmark"]).T if stem == "fairness" else table  # one metric a line
            log.info("%s (%s):\n%s", stem, output_dir / f"{stem}.csv", shown.to_string(float_format="%.4g"))
    _log_to_loggers(cfg, tables, det_paths)
    return tables


def _checkpoints_and_labels(cfg: DictConfig) -> tuple[list[str], list[str | None]]:
    checkpoints = list(cfg.ckpt) if isinstance(cfg.ckpt, ListConfig) else [cfg.ckpt]
    labels = list(cfg.names) if cfg.get("names") is not None else [None] * len(checkpoints)
    if len(labels) != len(checkpoints):
        raise ValueError(f"names: {len(labels)} labels for {len(checkpoints)} checkpoints; give one per ckpt")
    return [str(path) for path in checkpoints], labels


def _benchmark_specs(cfg: DictConfig) -> dict[str, DictConfig]:
    """The catalog entries of ``cfg.benchmarks``; every name must exist and every entry's folder be set."""
    names = list(cfg.benchmarks or [])
    unknown = [name for name in names if name not in cfg.catalog]
    if unknown:
        raise ValueError(f"benchmarks: {unknown} not in the catalog; allowed: {list(cfg.catalog)}")
    for name in names:
        if cfg.catalog[name].get("root") is None:
            source = OmegaConf.to_container(cfg.catalog[name], resolve=False).get("root")
            raise ValueError(f"benchmarks: '{name}' needs its folder, catalog.{name}.root = {source}; set it, "
                             "e.g. python evaluate.py bin_dir=/data/faces_emore rfw_root=/data/RFW/test")
    return {name: cfg.catalog[name] for name in names}


def _device(name: str) -> torch.device:
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    return torch.device(name)


def _probe(model: TrainedModel, cfg: DictConfig, device: torch.device) -> dict[str, float]:
    probe = cfg.linear_probe
    log.info("%s: linear probe on the %s split of its training data", model.label, probe.split)
    return probe_trained_model(model, split=probe.split, root=probe.root, batch_size=cfg.batch_size,
                               num_workers=cfg.num_workers, device=device, seed=cfg.seed)


def _log_to_loggers(cfg: DictConfig, tables: Mapping[str, pd.DataFrame], det_paths: Mapping) -> None:
    """Metrics to every logger; with W&B also the tables and DET plots. W&B runs are finished afterwards."""
    loggers = [instantiate(node) for node in (cfg.get("logger") or {}).values()]
    metrics = {}
    if "metrics" in tables:
        for row in tables["metrics"].itertuples(index=False):
            metrics[f"{row.model}/{row.benchmark}/{row.protocol}/{row.metric}/{row.group}"] = float(row.value)
    if "linear_probe" in tables:
        for model, row in tables["linear_probe"].iterrows():
            metrics.update({f"{model}/linear_probe/{layer}": float(value) for layer, value in row.items()})
    for logger in loggers:
        logger.log_hyperparams(OmegaConf.to_container(cfg, resolve=True))
        logger.log_metrics(metrics)
        if isinstance(logger, pl.loggers.WandbLogger):
            for stem, table in tables.items():
                logger.log_table(f"evaluate/{stem}", dataframe=table.reset_index() if stem in INDEXED_TABLES else table)
            for (model, benchmark), path in det_paths.items():
                logger.log_image(f"det/{model}/{benchmark}", images=[str(path)])
            logger.experiment.finish()
        else:
            logger.save()
