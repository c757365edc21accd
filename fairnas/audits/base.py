"""The one interface every audit implements: ``audit(model, data, config) -> AuditResult``.

``model`` is the audited network, anything with ``embed(images) -> L2-normalised embeddings [B, D]`` (images
normalised as the data pipeline does) and a ``device`` (a trained run's
:class:`~fairnas.training.module.FaceRecognitionModule`, or a hand-made model in a test). ``data`` is the audited
split (:class:`AuditData`), ``config`` the audit's own section of ``conf/audit.yaml``. The audit returns its tables,
figures, a JSON-ready summary and a one-paragraph finding in plain language; the audit command writes them to
files, the HTML report and the loggers (:mod:`fairnas.tasks.audit`).
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any, Protocol, TypeVar

import pandas as pd
import torch
from matplotlib.figure import Figure
from omegaconf import DictConfig, OmegaConf
from tqdm.auto import tqdm

from fairnas.data import FaceDataModule
from fairnas.data.dataset import FaceImageDataset
from fairnas.data.table import SPLITS
from fairnas.registry import Registry

T = TypeVar("T")


class AuditedModel(Protocol):
    device: torch.device

    def embed(self, images: torch.Tensor) -> torch.Tensor: ...


@dataclasses.dataclass(frozen=True)
class AuditData:
    """One split of a set-up data module: what an audit reads.

    ``frame`` is the split's table (one row per image: ``path`` relative to ``root``, ``identity``, ``group`` and
    any metadata columns, e.g. the synthetic nuisances); row ``i`` of ``frame`` is item ``i`` of :attr:`dataset`.
    ``seed`` seeds every random choice of the audits; ``batch_size`` bounds their forward passes.
    """

    datamodule: FaceDataModule
    split: str
    seed: int = 0
    batch_size: int = 64

    @property
    def dataset(self) -> FaceImageDataset:
        """The split with evaluation transforms (resize, centre crop, normalise)."""
        return self.datamodule.dataset(self.split)

    @property
    def frame(self) -> pd.DataFrame:
        return self.datamodule.splits[self.split]

    @property
    def root(self) -> Path:
        """The data set's folder (``path`` entries are relative to it)."""
        return Path(self.datamodule.table.root)

    @property
    def group_order(self) -> list[str]:
        return list(self.datamodule.group_order)

    @property
    def transforms(self) -> dict:
        """The data module's transform settings (``image_size``, ``resize``, ``mean``, ``std``, ...)."""
        return self.datamodule.transforms


@dataclasses.dataclass
class AuditResult:
    """What an audit found: ``tables`` (CSV), ``figures`` (PNG), ``summary`` (JSON numbers) and ``finding`` (a
    short plain-language paragraph for the report). Names are file stems: ``[a-z0-9_]+``."""

    tables: dict[str, pd.DataFrame]
    figures: dict[str, Figure]
    summary: dict[str, Any]
    finding: str


HELD_OUT = ("val", "test")
"""The splits an audit that identifies held-out probes against gallery templates takes."""


@dataclasses.dataclass(frozen=True)
class Audit:
    """A registered audit: its ``name`` (in ``audits=[...]``, its section of ``conf/audit.yaml`` and its output folder),
    the ``question`` it answers (the log's and the report's line) and its ``title`` (how the README's feature list
    calls it; default: its name). ``run(model, data, config)`` audits, ``config`` being its section; ``check(config)``
    rejects a bad section in one line naming the key, before any model is loaded, whether or not ``audits`` names it.
    ``splits``: the splits it audits (``train``: the training identities, through the trained head)."""

    name: str
    question: str
    run: Callable[[AuditedModel, AuditData, DictConfig], AuditResult]
    check: Callable[[DictConfig], None] | None = None
    splits: tuple[str, ...] = HELD_OUT
    title: str = ""

    def __post_init__(self) -> None:
        if not self.title:
            object.__setattr__(self, "title", self.name)


AUDITS: Registry[Audit] = Registry("audit")
"""The audits by name, in the order their modules registered them."""


def register(audit: Audit) -> Audit:
    """Add an audit to the registry (an audit's module does so when it is imported)."""
    return AUDITS.add(audit)


def chosen_audits(names: Sequence[str] | None) -> list[Audit]:
    """``audits``: registered audits, at least one, each once; raises a one-line ValueError."""
    names = list(names or [])
    unknown = [name for name in names if name not in AUDITS]
    if unknown:
        raise ValueError(f"audits: unknown audit {unknown[0]!r}; allowed: {list(AUDITS)}")
    if not names:
        raise ValueError(f"audits: name at least one audit; allowed: {list(AUDITS)}")
    if len(set(names)) != len(names):
        raise ValueError(f"audits={names} names an audit twice")
    return [AUDITS[name] for name in names]


def check_audits(cfg: DictConfig, chosen: Sequence[Audit]) -> None:
    """The audit command's settings before any model is loaded: ``split`` against what each chosen audit takes, and
    every registered audit's section (chosen or not: a bad setting never waits for the run that names it)."""
    if cfg.split not in SPLITS:
        raise ValueError(f"split={cfg.split!r} is not a split; allowed: {list(SPLITS)}")
    for audit in chosen:
        if cfg.split not in audit.splits:
            takes = [each.name for each in AUDITS.values() if cfg.split in each.splits]
            raise ValueError(
                f"split={cfg.split}: {audit.name} takes split={' or split='.join(audit.splits)}; the audits that "
                f"take split={cfg.split}: {', '.join(takes)}"
            )
    for audit in AUDITS.values():
        if audit.name not in cfg:
            raise ValueError(f"{audit.name}: the audit has no section in conf/audit.yaml")
        if audit.check is not None:
            audit.check(cfg[audit.name])


def settings_with_defaults(audit: str, config: DictConfig | dict | None, defaults: dict) -> dict:
    """An audit's section of ``conf/audit.yaml`` over its ``defaults``; an unknown key is an error naming it."""
    given = OmegaConf.to_container(config, resolve=True) if isinstance(config, DictConfig) else dict(config or {})
    unknown = sorted(set(given) - set(defaults))
    if unknown:
        raise ValueError(f"{audit}.{unknown[0]} is not a setting; allowed: {sorted(defaults)}")
    return {**defaults, **given}


def progress(items: Iterable[T], *, total: int | None = None, desc: str = "") -> Iterator[T]:
    """The audits' shared progress bar (tqdm on stderr; off when ``FAIRNAS_PROGRESS=0``)."""
    return iter(
        tqdm(
            items,
            total=total,
            desc=desc,
            leave=False,
            dynamic_ncols=True,
            disable=os.environ.get("FAIRNAS_PROGRESS", "1") == "0",
        )
    )
