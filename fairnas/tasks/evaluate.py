"""``python evaluate.py`` / ``fairnas-evaluate``: transfer evaluation of trained runs (thesis Sec. 4.5.5-4.5.7).

Every checkpoint is evaluated on every selected benchmark of ``cfg.catalog``; written to ``cfg.output_dir``:

- ``accuracy.csv``: model x benchmark 10-fold verification accuracy in % (Tables 4.5 and 4.7);
- ``fairness.csv``: per model and benchmark with a protected attribute (RFW): identification error and the five
  fairness metrics (Table 4.8), per-group error, rank, verification accuracy and FRVT FMR/FNMR;
- ``metrics.csv``: every metric in long format (model, benchmark, protocol, group, metric, value);
- ``det/<model>/<benchmark>.png``: DET curves per group with the operating points at the global threshold;
- ``linear_probe.csv`` with ``linear_probe.enabled``: held-out probe accuracy per layer (Table 4.9).

The tables are also printed and sent to the configured loggers (:mod:`fairnas.reporting`).
"""

from __future__ import annotations

import logging

import pandas as pd
from hydra.utils import instantiate
from omegaconf import DictConfig, ListConfig, OmegaConf

from fairnas.audits.linear_probe import probe_accuracy
from fairnas.data.table import SPLITS
from fairnas.evaluation.all_metrics import BenchmarkResult, evaluate_benchmark
from fairnas.evaluation.embeddings import embed_images
from fairnas.evaluation.report import accuracy_table, fairness_table, long_table, probe_table
from fairnas.reporting import Report
from fairnas.tasks.cli import hydra_command
from fairnas.training.build import Run, load_run, resolve_device

log = logging.getLogger(__name__)
INDEXED_TABLES = ("accuracy", "linear_probe")  # tables whose index (the model) is a column of their CSV


def evaluate(cfg: DictConfig) -> dict[str, pd.DataFrame]:
    """Evaluate ``cfg.ckpt`` (one run or a list) on ``cfg.benchmarks``; returns the tables by file stem.

    Names, folders and checkpoints are checked before any benchmark is loaded or image embedded.
    """
    checkpoints, labels = _checkpoints_and_labels(cfg)
    specs = _benchmark_specs(cfg)
    if not specs and not cfg.linear_probe.enabled:
        raise ValueError(
            "evaluate: nothing to do; name benchmarks (e.g. benchmarks=[lfw,rfw]) or set linear_probe.enabled=true"
        )
    if cfg.linear_probe.split not in SPLITS:
        raise ValueError(f"linear_probe.split={cfg.linear_probe.split!r} is not a split; allowed: {list(SPLITS)}")
    device = resolve_device(cfg.device)
    runs = [
        load_run(path, device=device, data_root=cfg.linear_probe.root, key=key) for key, path in checkpoints.items()
    ]
    names = [label or run.label for run, label in zip(runs, labels, strict=True)]
    benchmarks = {name: instantiate(spec) for name, spec in specs.items()}

    with Report(cfg) as report:
        results: dict[tuple[str, str], BenchmarkResult] = {}
        for run, model in zip(runs, names, strict=True):
            for name, benchmark in benchmarks.items():
                log.info("%s: embedding %d images of %s", model, len(benchmark.images), name)
                embeddings = embed_images(
                    run.embedder,
                    benchmark.root,
                    benchmark.images["path"].tolist(),
                    run.config.data.transforms,
                    tta_flip=run.config.eval.tta_flip,
                    batch_size=cfg.batch_size,
                    num_workers=cfg.num_workers,
                    device=device,
                )
                results[model, name] = evaluate_benchmark(
                    benchmark,
                    embeddings,
                    far_targets=list(cfg.verification.far_targets),
                    target_fmr=cfg.verification.target_fmr,
                    rank_by=run.config.eval.rank_by,
                    title=f"{model} on {name}",
                )
                report.figure(f"det/{model}/{name}", results[model, name].det)

        tables = {}
        if results:
            long = long_table(results)
            tables.update(accuracy=accuracy_table(long), fairness=fairness_table(long), metrics=long)
        if cfg.linear_probe.enabled:
            tables["linear_probe"] = probe_table(
                {model: _probe(run, model, cfg) for run, model in zip(runs, names, strict=True)}
            )
        for stem, table in tables.items():
            path = report.table(stem, table, index=stem in INDEXED_TABLES)
            if stem != "metrics":
                shown = table.set_index(["model", "benchmark"]).T if stem == "fairness" else table  # a metric a line
                log.info("%s (%s):\n%s", stem, path, shown.to_string(float_format="%.4g"))
        report.metrics(_scalar_metrics(tables))
    return tables


def _checkpoints_and_labels(cfg: DictConfig) -> tuple[dict[str, str], list[str | None]]:
    """The runs of ``ckpt`` by the key that names each in errors (``ckpt``, in a list ``ckpt[<i>]``), and their
    labels."""
    if isinstance(cfg.ckpt, ListConfig):
        checkpoints = {f"ckpt[{i}]": path for i, path in enumerate(cfg.ckpt)}
    else:
        checkpoints = {"ckpt": cfg.ckpt}
    if not checkpoints:
        raise ValueError("ckpt=[]: name at least one run (its folder or a checkpoint)")
    labels = list(cfg.names) if cfg.get("names") is not None else [None] * len(checkpoints)
    if len(labels) != len(checkpoints):
        raise ValueError(f"names: {len(labels)} labels for {len(checkpoints)} checkpoints; give one per ckpt")
    return checkpoints, labels


def _benchmark_specs(cfg: DictConfig) -> dict[str, DictConfig]:
    """The catalog entries of ``cfg.benchmarks``; every name must exist and every entry's folder be set."""
    names = list(cfg.benchmarks or [])
    unknown = [name for name in names if name not in cfg.catalog]
    if unknown:
        raise ValueError(f"benchmarks: {unknown} not in the catalog; allowed: {list(cfg.catalog)}")
    for name in names:
        if cfg.catalog[name].get("root") is None:
            source = OmegaConf.to_container(cfg.catalog[name], resolve=False).get("root")
            raise ValueError(
                f"benchmarks: '{name}' needs its folder, catalog.{name}.root = {source}; set it, "
                "e.g. python evaluate.py bin_dir=/data/faces_emore rfw_root=/data/RFW/test"
            )
    return {name: cfg.catalog[name] for name in names}


def _probe(run: Run, model: str, cfg: DictConfig) -> dict[str, float]:
    """Linear-probe accuracy per layer on the ``linear_probe.split`` images of the run's own data set (Table 4.9).

    The split is the run's (its saved split file is read back); images outside the group order are left out.
    """
    split = cfg.linear_probe.split
    log.info("%s: linear probe on the %s split of its training data", model, split)
    return probe_accuracy(
        run.embedder,
        run.data().dataset(split),
        device=run.module.device,
        batch_size=cfg.batch_size,
        num_workers=cfg.num_workers,
        seed=cfg.seed,
    )


def _scalar_metrics(tables: dict[str, pd.DataFrame]) -> dict[str, float]:
    """Every metric as ``<model>/<benchmark>/<protocol>/<metric>/<group>`` and ``<model>/linear_probe/<layer>``."""
    metrics = {}
    if "metrics" in tables:
        for row in tables["metrics"].itertuples(index=False):
            metrics[f"{row.model}/{row.benchmark}/{row.protocol}/{row.metric}/{row.group}"] = float(row.value)
    if "linear_probe" in tables:
        for model, row in tables["linear_probe"].iterrows():
            metrics.update({f"{model}/linear_probe/{layer}": float(value) for layer, value in row.items()})
    return metrics


main = hydra_command(evaluate, "evaluate")
