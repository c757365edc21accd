"""Reporting shared by every command: its loggers, and its tables and figures.

Loggers come from the command's ``logger`` config group (``conf/logger/``): W&B runs offline by default and
``logger=none`` switches every logger of every command off (files are written regardless). Tables (CSV) and
figures (PNG) are written atomically into the command's output folder and sent to the loggers: W&B receives them
as ``wandb.Table`` and images, other loggers the scalar metrics.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pandas as pd
import pytorch_lightning as pl
from hydra.utils import instantiate
from matplotlib.figure import Figure
from omegaconf import DictConfig, OmegaConf

from fairnas.io import atomic_path, write_csv_atomic

LOGGER_PACKAGES = {
    "WandbLogger": ("wandb",),
    "TensorBoardLogger": ("tensorboard", "tensorboardX"),
    "MLFlowLogger": ("mlflow",),
    "CometLogger": ("comet_ml",),
    "NeptuneLogger": ("neptune",),
}
"""The package each of Lightning's loggers needs: Lightning imports without it and fails only when the logger is
built, which in a search is inside every trial."""
NOT_INSTALLED = "is not installed"


def check_loggers(cfg: DictConfig) -> None:
    """Every logger of ``cfg.logger`` has its package, and it imports: a missing or broken one is named in one line,
    before any work."""
    for name, node in (cfg.get("logger") or {}).items():
        target = str(node.get("_target_", ""))
        packages = LOGGER_PACKAGES.get(target.rpartition(".")[2], ())
        if packages and all(map(_import_failure, packages)):  # stops at the first package that imports
            failure = _import_failure(packages[0])
            fix = f"pip install {packages[0]}" if failure == NOT_INSTALLED else f"reinstall {packages[0]}"
            raise ValueError(
                f"logger.{name} ({target}) needs the {' or '.join(packages)} package, which {failure}: {fix}, "
                "or logger=csv or logger=none"
            )


def _import_failure(package: str) -> str | None:
    """Why ``package`` cannot be imported (None: it imports): it is not installed, or importing it fails (a broken
    install, a missing library of its own)."""
    if importlib.util.find_spec(package) is None:
        return NOT_INSTALLED
    try:
        importlib.import_module(package)
    except Exception as error:
        lines = str(error).splitlines()
        return f"fails to import ({type(error).__name__}{f': {lines[0]}' if lines else ''})"
    return None


def build_loggers(cfg: DictConfig, **wandb_run: Any) -> list[pl.loggers.Logger]:
    """The Lightning loggers of ``cfg.logger``; ``wandb_run`` (name, id, group, job_type) goes to W&B only."""
    check_loggers(cfg)
    loggers = []
    for node in (cfg.get("logger") or {}).values():
        is_wandb = node.get("_target_", "").endswith("WandbLogger")
        loggers.append(instantiate(node, **(wandb_run if is_wandb else {})))
    return loggers


class Report:
    """One command's outputs: ``table``/``figure``/``metrics`` go to ``output_dir`` and to the loggers.

    ``config`` is logged as the run's hyperparameters (default: the resolved ``cfg``). Use as a context manager,
    or call :meth:`close`, so W&B runs are finished before the next one starts in the same process.
    """

    def __init__(
        self, cfg: DictConfig, *, output_dir: str | Path | None = None, config: Mapping | None = None, **wandb_run: Any
    ):
        self.output_dir = Path(output_dir or cfg.output_dir)
        self.loggers = build_loggers(cfg, **wandb_run)
        hyperparameters = dict(config) if config is not None else OmegaConf.to_container(cfg, resolve=True)
        for logger in self.loggers:
            logger.log_hyperparams(hyperparameters)

    def table(self, name: str, frame: pd.DataFrame, *, index: bool = False) -> Path:
        """``<output_dir>/<name>.csv`` (with the index as columns when ``index``), and a W&B table ``name``."""
        path = self.output_dir / f"{name}.csv"
        frame = frame.reset_index() if index else frame
        write_csv_atomic(frame, path)
        self.log_table(name, frame)
        return path

    def figure(self, name: str, figure: Figure, dpi: int = 120) -> Path:
        """``<output_dir>/<name>.png``, and a W&B image ``name``."""
        path = self.output_dir / f"{name}.png"
        with atomic_path(path) as tmp:
            figure.savefig(tmp, dpi=dpi, format="png")
        self.log_image(name, path)
        return path

    def log_table(self, name: str, frame: pd.DataFrame) -> None:
        """A table that is already on disk (or needs no file), to W&B only."""
        for logger in self._wandb():
            logger.log_table(name, dataframe=_loggable(frame))

    def log_image(self, name: str, path: str | Path) -> None:
        """An image file that is already on disk, to W&B only."""
        for logger in self._wandb():
            logger.log_image(name, images=[str(path)])

    def log_html(self, name: str, path: str | Path) -> None:
        """An HTML page that is already on disk, to W&B only (shown in the run's media panel)."""
        if self._wandb():
            import wandb

            for logger in self._wandb():
                logger.experiment.log({name: wandb.Html(Path(path).read_text())})

    def scatter(self, name: str, frame: pd.DataFrame, x: str, y: str, title: str = "") -> None:
        """``frame``'s points as a native, interactive W&B scatter plot of ``y`` against ``x`` (W&B only; every
        column of ``frame`` is in the plot's table)."""
        if self._wandb():
            import wandb

            table = wandb.Table(dataframe=_loggable(frame))
            for logger in self._wandb():
                logger.experiment.log({name: wandb.plot.scatter(table, x, y, title=title or name)})

    def metrics(self, values: Mapping[str, float], step: int | None = None) -> None:
        """Scalar metrics to every logger."""
        for logger in self.loggers:
            logger.log_metrics({name: float(value) for name, value in values.items()}, step=step)

    def close(self) -> None:
        """Finish W&B runs and flush the other loggers."""
        for logger in self.loggers:
            if isinstance(logger, pl.loggers.WandbLogger):
                logger.experiment.finish()
            else:
                logger.save()

    def __enter__(self) -> Report:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def _wandb(self) -> list[pl.loggers.WandbLogger]:
        return [logger for logger in self.loggers if isinstance(logger, pl.loggers.WandbLogger)]


def _loggable(frame: pd.DataFrame) -> pd.DataFrame:
    """Text columns with missing entries as "" and booleans as integers, so W&B sees one type per column."""
    frame = frame.copy()
    for column in frame.columns:
        if pd.api.types.is_bool_dtype(frame[column]):
            frame[column] = frame[column].astype(int)
        elif not pd.api.types.is_numeric_dtype(frame[column]):
            frame[column] = frame[column].map(lambda value: "" if pd.isna(value) else str(value))
    return frame
