"""What every stage of a study uses (:class:`StudyContext`): its settings, the seeds no comparison trains with, the
runs so far, the models each stage chose, the claims, the report's stages, and the means to train runs and to search,
which the command (:mod:`fairnas.tasks.study`) supplies. What one stage needs of its own settings, the stage reads."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Protocol, cast

import pandas as pd
from matplotlib.figure import Figure
from omegaconf import DictConfig, OmegaConf

from fairnas.search import SearchResult
from fairnas.study.claims import Claim, ClaimSettings
from fairnas.study.report import StageReport
from fairnas.study.runs import RunSpec

Scatter = tuple[str, pd.DataFrame, str, str, str]
"""A native W&B scatter plot for the study's run: name, table, x column, y column, title."""


class Files(Protocol):
    """Where a stage writes its tables and figures (the study's folder)."""

    def table(self, name: str, frame: pd.DataFrame) -> Path: ...

    def figure(self, name: str, figure: Figure) -> Path: ...


@dataclasses.dataclass
class StudyContext:
    """A study's state. ``train_runs(specs, overrides, stage)`` trains (or reads back) runs, one row each;
    ``search(settings)`` runs the search with resolved settings (``fairnas.study.settings.search_settings``)."""

    cfg: DictConfig
    base: list[str]
    """The training overrides every run applies."""
    files: Files
    train_runs: Callable[[Sequence[RunSpec], Callable[[RunSpec], list[str]], str], pd.DataFrame]
    search: Callable[[dict[str, Any]], SearchResult]
    runs: pd.DataFrame = dataclasses.field(default_factory=pd.DataFrame)
    models: dict[str, tuple[str, tuple[str, ...]]] = dataclasses.field(default_factory=dict)
    """name -> (kind, overrides)"""
    searched: list[str] = dataclasses.field(default_factory=list)
    """The searched candidate the later stages compare (chosen by the search's own seeds)."""
    search_seeds: set[int] | None = None
    """The seeds the search trained with, its final stage's included (None until it ran)."""
    claims: list[Claim] = dataclasses.field(default_factory=list)
    reports: list[StageReport] = dataclasses.field(default_factory=list)
    scatters: list[Scatter] = dataclasses.field(default_factory=list)

    def __post_init__(self) -> None:
        settings = self.settings
        self.default: str = settings.default_model.name
        self.models[self.default] = ("default", tuple(settings.default_model.overrides))
        self.reserved = {int(seed) for seed in settings.reserved_seeds}  # no comparison trains with them
        self.claim_settings = ClaimSettings.from_mapping(cast(dict[str, Any], OmegaConf.to_container(settings.claims)))

    @property
    def settings(self) -> DictConfig:
        return self.cfg.study

    @property
    def output_dir(self) -> Path:
        return Path(self.cfg.output_dir)

    def train(self, specs: Sequence[RunSpec], stage: str) -> pd.DataFrame:
        """Train ``specs`` (or read them back) and add their rows to :attr:`runs`; stops when every one crashed."""
        rows = self.train_runs(specs, self.overrides, stage)
        self.runs = pd.concat([self.runs, rows], ignore_index=True)
        if len(rows) and (rows["status"] != "success").all():  # nothing left to measure: stop, naming why
            first = rows.iloc[0]
            raise ValueError(
                f"study {stage}: all {len(rows)} runs crashed, e.g. {first['run_dir']}: {first['error_message']}"
            )
        return rows

    def overrides(self, spec: RunSpec) -> list[str]:
        """A run's training overrides."""
        return spec.training_overrides(self.base)

    def specs(self, models: Sequence[str], seeds: Sequence[int], **fields: Any) -> list[RunSpec]:
        """A run of every model (by name) with every seed."""
        return [
            RunSpec(model, self.models[model][0], self.models[model][1], seed, **fields)
            for model in models
            for seed in seeds
        ]

    def rows(self, stage: str, models: Sequence[str], seeds: Sequence[int] | None = None) -> pd.DataFrame:
        """The rows of :attr:`runs` of ``stage`` and ``models`` (and ``seeds``)."""
        if self.runs.empty:
            return self.runs
        rows = self.runs[(self.runs["stage"] == stage) & self.runs["model"].isin(list(models))]
        return rows if seeds is None else rows[rows["seed"].isin(list(seeds))]
