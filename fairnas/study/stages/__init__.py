"""The study's stages, in their order: each a function from the study's context to its part of the report
(:class:`~fairnas.study.report.StageReport`), one module each, with the stage whose results it needs."""

from __future__ import annotations

import dataclasses
import logging
import time
from collections.abc import Callable, Sequence

from fairnas.study.context import StudyContext
from fairnas.study.report import StageReport
from fairnas.study.stages import final, mitigations, noise, robustness, search, sweep, transfer

log = logging.getLogger(__name__)


@dataclasses.dataclass(frozen=True)
class Stage:
    """A stage: its ``name`` (in ``study.stages``), its ``run`` and the stage whose results it uses (``needs``)."""

    name: str
    run: Callable[[StudyContext], StageReport]
    needs: str | None = None


STAGES = {
    stage.name: stage
    for stage in (
        Stage("noise", noise.run),
        Stage("sweep", sweep.run),
        Stage("search", search.run),
        Stage("final", final.run, needs="search"),  # it compares the search's answer
        Stage("mitigations", mitigations.run, needs="final"),  # on the models the final comparison chose
        Stage("robustness", robustness.run),
        Stage("transfer", transfer.run, needs="final"),  # the models the final comparison chose
    )
}


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
    """Run stage ``name`` and add its report, timed, to the context's."""
    log.info("study: stage %s", name)
    started = time.perf_counter()
    report = STAGES[name].run(context)
    report.seconds = time.perf_counter() - started
    context.reports.append(report)
