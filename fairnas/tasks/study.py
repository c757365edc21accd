"""``python study.py`` / ``fairnas-study``: thesis Chapter 4 as one command, on any data set, on one machine or a
cluster, ending in one report a person reads.

The stages (``study.stages``, each sized in ``conf/study/``) are the modules of :mod:`fairnas.study.stages`. This
module wires them to training and search: every run is an ordinary ``train`` run (:mod:`fairnas.training.run_pool`)
sent through the search's pool (``study.n_workers``, or a Dask scheduler as in ``search.py``) and read back when an
earlier invocation finished it, so an interrupted study resumes; the search stage runs ``search.py``'s search on the
same workers. Writes ``outputs/study/<name>/``: ``runs.csv``, ``claims.csv``, a table per stage, figures (the
claims' forest plot first), ``report.md``, a self-contained ``report.html`` (:mod:`fairnas.study.summary`), and one
W&B run (the ``logger`` group, as in ``train.py``) with the tables, the page and the fronts as native scatter plots.
"""

from __future__ import annotations

import contextlib
import functools
import logging
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import pandas as pd
from hydra.core.hydra_config import HydraConfig
from omegaconf import DictConfig, OmegaConf

from fairnas.config import compose_config
from fairnas.reporting import Report, check_loggers
from fairnas.run_lock import locks_output_dir, run_folder_lock
from fairnas.search import SearchResult
from fairnas.search.parallel import POOL_KEYS, DaskPool, TrialPool, open_pool_for
from fairnas.study.checks import check_study
from fairnas.study.context import StudyContext
from fairnas.study.runs import RunSpec, run_row
from fairnas.study.stages import run_stage
from fairnas.study.summary import Summary, write_summary
from fairnas.tasks.cli import hydra_command
from fairnas.tasks.search import FaceSearch, report_search, search_faces
from fairnas.training.build import build_datamodule
from fairnas.training.run_pool import Job, train_all
from fairnas.training.settings import check_training_settings

log = logging.getLogger(__name__)
STUDY_KEYS = ("study", "name", "hydra", "logger", "output_dir")
"""Override keys that set up the study itself, not the training every run does."""
RUN_SETTINGS = ("logger=none", "trainer.enable_progress_bar=false", "trainer.enable_model_summary=false")


@locks_output_dir
def run_study(cfg: DictConfig, overrides: Sequence[str] | None = None) -> pd.DataFrame:
    """Run ``cfg.study``'s stages; every run applies ``overrides`` (default: the command line's training overrides).
    Returns the runs table (also ``runs.csv``)."""
    base = [*training_overrides(cfg, overrides), *RUN_SETTINGS]
    check_loggers(cfg)  # the study's own W&B run is opened at its end
    check_study(cfg, base)
    run_config = compose_config("train", base, output_dir=".")
    check_training_settings(run_config)
    build_datamodule(run_config)  # the data the runs read: its groups and splits, before the first stage trains
    settings = cfg.study
    with contextlib.ExitStack() as stack:
        pool = functools.cache(lambda: stack.enter_context(open_pool_for(settings)))  # when a run first needs it
        # Tables and figures are written as the stages go (files only); the W&B run gets them at the end, so that it
        # is not open while the search reports its own runs.
        files = Report(OmegaConf.create({"logger": {}}), output_dir=cfg.output_dir)
        train = functools.partial(run_all, Path(cfg.output_dir), pool)
        context = StudyContext(cfg, base, files, train, functools.partial(search, cfg, base, pool))
        for stage in settings.stages:
            run_stage(stage, context)
    report_to_loggers(context, write_summary(context))
    return context.runs


def run_all(
    output_dir: Path,
    pool: Callable[[], TrialPool],
    specs: Sequence[RunSpec],
    overrides: Callable[[RunSpec], list[str]],
    stage: str,
) -> pd.DataFrame:
    """A stage's runs (each folder once) through the study's pool: one row per spec
    (:func:`~fairnas.study.runs.run_row`); a crashed run's row says so and the claims it feeds leave it out."""
    specs = list(dict.fromkeys(specs))
    jobs: dict[Path, Job] = {}
    for spec in specs:
        jobs.setdefault(spec.folder, Job(output_dir / spec.folder, overrides(spec)))
    results = train_all(jobs, pool, f"study {stage}")
    return pd.DataFrame([run_row(spec, results[spec.folder], stage) for spec in specs])


def search(cfg: DictConfig, base: list[str], pool: Callable[[], TrialPool], values: dict[str, Any]) -> SearchResult:
    """The search stage's search with the study's resolved search settings ``values``, in ``<study>/search``: its
    trials train with the study's overrides, on the study's workers when it has any."""
    settings = cfg.study
    values = {**values, "name": f"{cfg.name}-search", "train_overrides": list(base)}
    if settings.n_workers > 1 or settings.trials_per_gpu or settings.dask_address or settings.dask_scheduler_file:
        workers = pool()
        address = workers.address if isinstance(workers, DaskPool) else None
        values |= {key: settings[key] for key in POOL_KEYS}  # on the study's workers (already pinned to GPUs):
        values |= {"n_workers": workers.capacity, "dask_address": address, "dask_scheduler_file": None}
        values |= {"trials_per_gpu": None}
    folder, face_search = Path(cfg.output_dir) / "search", FaceSearch.from_mapping(values)
    with run_folder_lock(folder):
        result = search_faces(face_search, folder)
    logged = {"logger": report_config(cfg).logger, "output_dir": str(folder), "search": values}
    report_search(OmegaConf.create(logged), result, face_search.settings)
    return result


def training_overrides(cfg: DictConfig, overrides: Sequence[str] | None) -> list[str]:
    """The overrides every run applies: ``overrides``, or the command line's, without those of the study itself."""
    if overrides is None:
        overrides = list(HydraConfig.get().overrides.task) if HydraConfig.initialized() else []
    return [item for item in overrides if item.lstrip("+~").split("=", 1)[0].split(".", 1)[0] not in STUDY_KEYS]


def report_config(cfg: DictConfig) -> DictConfig:
    """The study's own report logger: the ``logger`` group with the command line's overrides, as ``train.py`` and
    ``search.py`` take it (``logger=none``, ``logger.wandb.offline=false``), writing into the study's folder."""
    logger = cfg.get("logger")
    node = OmegaConf.to_container(logger, resolve=True) if logger else {}
    return OmegaConf.create({"logger": node, "output_dir": str(cfg.output_dir)})


def report_to_loggers(context: StudyContext, summary: Summary) -> None:
    """The study's W&B run: every stage's tables and figures, the scatter plots, the page and the minutes."""
    name = context.cfg.name
    with Report(
        report_config(context.cfg), output_dir=context.output_dir, name=f"study-{name}", job_type="study"
    ) as report:
        for stage in summary.stages:
            for table, path in stage.tables.items():
                report.log_table(table, pd.read_csv(path))
            for figure, path in stage.figures.items():
                report.log_image(figure, path)
        for scatter in context.scatters:
            report.scatter(*scatter)
        report.log_html("report", summary.page)
        report.metrics({f"minutes/{stage}": minutes for stage, minutes in summary.minutes.items()})
        report.metrics({"claims": len(summary.claims), "claims_holding": summary.holding})
    total = sum(summary.minutes.values())
    log.info(
        "study report: %s (%d of %d claims hold, %.1f min)", summary.page, summary.holding, len(summary.claims), total
    )


main = hydra_command(run_study, "study")
