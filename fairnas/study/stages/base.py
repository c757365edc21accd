"""A study stage's one contract (thesis Chapter 4, one question each): what it is called, what it runs, the stage
whose results it uses, how it checks its settings section ``study.<name>``, the tables it writes and the claims it
adds, and the registry of stages in the order they run (``study.stages`` is checked against it).

A stage's module ends with ``register(Stage(...))``; importing :mod:`fairnas.study.stages` imports every module of
the package, so the registry holds every stage.
"""

from __future__ import annotations

import dataclasses
import logging
import time
from collections.abc import Callable, Sequence

from omegaconf import DictConfig

from fairnas.study.context import StudyContext
from fairnas.study.report import StageReport

log = logging.getLogger(__name__)

Check = Callable[[DictConfig, Sequence[str]], None]
"""``check(study, base)``: a stage's settings (``study``: ``cfg.study``; its own section ``study.<name>``, and its
prerequisite's where it depends on them) and the configurations it will train (composed from ``base``, the training
overrides every run applies); a bad one raises a one-line ValueError naming the ``study.<name>.<key>``."""


@dataclasses.dataclass(frozen=True)
class Stage:
    """A registered stage: its ``name`` (in ``study.stages`` and its section ``study.<name>``), its ``order`` among the
    stages (they run by it), its ``run`` and the stage whose results it uses (``needs``). ``check`` checks its
    settings before anything is written, when the study runs it. ``tables`` are the CSV tables it writes into the
    study's folder (``<table>.csv``, kept by ``python -m bench.evidence.results collect-study``) and ``claims`` the
    prefixes of the ids of the claims it adds (``final/``): a claim outside them stops the study."""

    name: str
    order: int
    run: Callable[[StudyContext], StageReport]
    needs: str | None = None
    check: Check | None = None
    tables: tuple[str, ...] = ()
    claims: tuple[str, ...] = ()


STAGES: dict[str, Stage] = {}
"""The stages by name, in their order."""


def register(stage: Stage) -> Stage:
    """Add a stage to the registry, in its order (a stage's module does so when it is imported)."""
    if stage.name in STAGES:
        raise ValueError(f"study stage {stage.name!r} is registered twice")
    ordered = sorted([*STAGES.values(), stage], key=lambda each: each.order)
    STAGES.clear()
    STAGES.update((each.name, each) for each in ordered)
    return stage


def check_stages(names: Sequence[str]) -> None:
    """``study.stages``: known stages, each once, each with the stage it needs; raises a one-line ValueError."""
    names = list(names)
    unknown = [name for name in names if name not in STAGES]
    if unknown or len(set(names)) != len(names) or not names:
        raise ValueError(f"study.stages={names}: each once, from {list(STAGES)}")
    for stage in STAGES.values():
        if stage.name in names and stage.needs is not None and stage.needs not in names:
            raise ValueError(
                f"study.stages: {stage.name} needs {stage.needs} (it uses its results); add it or drop {stage.name}"
            )


def run_stage(name: str, context: StudyContext) -> None:
    """Run stage ``name`` and add its report, timed, to the context's; its claims must carry its declared prefixes."""
    log.info("study: stage %s", name)
    stage = STAGES[name]
    before = len(context.claims)
    started = time.perf_counter()
    report = stage.run(context)
    report.seconds = time.perf_counter() - started
    strays = [claim.id for claim in context.claims[before:] if not claim.id.startswith(stage.claims)]
    if strays:
        raise ValueError(f"study stage {name} added claims {strays} outside its declared prefixes {list(stage.claims)}")
    context.reports.append(report)
