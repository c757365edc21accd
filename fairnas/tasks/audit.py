"""``python audit.py`` / ``fairnas-audit``: run the chosen audits on a trained run and report them in one place.

The run's model and data module are rebuilt by :func:`~fairnas.training.build.load_run` (``data=<option>`` audits
another data set through the run's own transforms). Every audit named in ``audits`` (:data:`fairnas.audits.AUDITS`)
runs on ``cfg[<audit>]`` and writes into ``cfg.output_dir``:

- ``<audit>/<table>.csv`` and ``<audit>/<figure>.png``, ``<audit>/summary.json`` (its numbers and finding);
- ``summary.json``: the checkpoint, split, every audit's summary, finding and time;
- ``report.html``: one self-contained page with every finding, figure and table, and the config.

Tables, figures, scalar summaries and the page also go to the configured loggers (:mod:`fairnas.reporting`).
The split and the settings of every registered audit, chosen or not, are checked before the model is rebuilt.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping
from pathlib import Path

from hydra.utils import instantiate
from omegaconf import DictConfig, OmegaConf, open_dict

from fairnas.audits import check_audits, chosen_audits
from fairnas.audits.base import AuditData
from fairnas.data import FaceDataModule
from fairnas.html_report import PageSection, write_report
from fairnas.io import write_json_atomic
from fairnas.reporting import Report
from fairnas.tasks.cli import hydra_command
from fairnas.training.build import Run, load_run, resolve_device
from fairnas.validation import is_number

log = logging.getLogger(__name__)
REPORT_FILE = "report.html"


def audit(cfg: DictConfig) -> dict:
    """Run ``cfg.audits`` on ``cfg.split`` of ``cfg.ckpt``; returns the summary (also ``summary.json``)."""
    audits = chosen_audits(cfg.audits)
    check_audits(cfg, audits)

    run = load_run(cfg.ckpt, device=resolve_device(cfg.device), data_root=cfg.data_root)
    data = AuditData(_datamodule(cfg, run), cfg.split, seed=cfg.seed, batch_size=cfg.batch_size)
    output_dir = Path(cfg.output_dir)
    summary = {"ckpt": str(cfg.ckpt), "model": run.label, "data": str(data.root), "split": cfg.split, "audits": {}}
    sections = []
    with Report(cfg) as report:
        for each in audits:
            name = each.name
            log.info("audit %s: %s", name, each.question)
            start = time.perf_counter()
            result = each.run(run.module, data, cfg[name])
            seconds = time.perf_counter() - start
            tables = {table: report.table(f"{name}/{table}", frame) for table, frame in result.tables.items()}
            figures = {figure: report.figure(f"{name}/{figure}", plot) for figure, plot in result.figures.items()}
            record = {"finding": result.finding, "seconds": round(seconds, 1), **result.summary}
            write_json_atomic(output_dir / name / "summary.json", record)
            report.metrics(_scalars(result.summary, f"audit/{name}"))
            summary["audits"][name] = record
            sections.append(PageSection(name, each.question, (result.finding,), tables, figures, seconds))
            log.info("%s (%.0f s): %s", name, seconds, result.finding)
        write_json_atomic(output_dir / "summary.json", summary)
        page = write_report(
            output_dir / REPORT_FILE,
            title=f"fairnas audit of {run.label}",
            header={
                "checkpoint": str(cfg.ckpt),
                "split": cfg.split,
                "data set": summary["data"],
                "audits": ", ".join(each.name for each in audits),
            },
            sections=sections,
            config_yaml=OmegaConf.to_yaml(cfg, resolve=True),
        )
        report.log_html("audit/report", page)
    log.info("audit report: %s", page)
    return summary


def _datamodule(cfg: DictConfig, run: Run) -> FaceDataModule:
    """The run's own data module, or the ``data=`` option's, which reads images through the run's transforms."""
    if cfg.get("data") is None:
        return run.data()
    data = cfg.data.copy()
    with open_dict(data):
        data.transforms = run.config.data.transforms
    datamodule = instantiate(data, seed=run.config.seed)
    datamodule.setup()
    return datamodule


def _scalars(values: Mapping, prefix: str) -> dict[str, float]:
    """Every number in a nested summary, keyed by its path (``prefix/key/subkey``); lists and text are skipped."""
    scalars = {}
    for key, value in values.items():
        name = f"{prefix}/{key}"
        if isinstance(value, Mapping):
            scalars.update(_scalars(value, name))
        elif is_number(value):
            scalars[name] = float(value)
    return scalars


main = hydra_command(audit, "audit")
