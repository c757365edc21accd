"""What several stages share: the seeds they compare with, the models they compare, the dominance claims, the models'
table and the crashed runs' finding."""

from __future__ import annotations

import math
from collections.abc import Collection
from pathlib import Path

import pandas as pd

from fairnas.search.final import fresh_seeds
from fairnas.study import claims
from fairnas.study.context import StudyContext
from fairnas.study.report import StageReport, scatter_figure
from fairnas.study.settings import planned_search_seeds, search_settings


def comparison_seeds(context: StudyContext, count: int) -> list[int]:
    """The first ``count`` of the seeds every comparison trains with (noise, final, mitigations, transfer): the
    smallest the search never trained with, neither in its trials nor in its final stage, which chose the answer by
    them (re-using those seeds would favour the answer), and none of ``study.reserved_seeds``. Before the search ran,
    those it plans to train with: so the default model's noise runs are its final-comparison runs, read back (also
    when a later invocation adds stages)."""
    searched = context.search_seeds
    if searched is None:
        searched = planned_search_seeds(search_settings(context.settings))
    return fresh_seeds(searched | context.reserved, count)


def best_hand_designed(context: StudyContext, count: int) -> list[str]:
    """The ``count`` hand-designed models of lowest mean validation error in the sweep."""
    names = [name for name, (kind, _) in context.models.items() if kind == "hand-designed"]
    sweep = context.rows("sweep", names)
    if sweep.empty or not count:
        return []
    means = claims.successful(sweep).groupby("model")["val/error"].mean().sort_values()
    return list(means.index[:count])


def chosen(context: StudyContext, kinds: Collection[str] = ("default", "searched", "hand-designed")) -> list[str]:
    """The models mitigations and transfer compare, of ``kinds``: the default, the searched model of lowest mean
    validation error in the final comparison and the best hand-designed one."""
    final = claims.successful(context.rows("final", list(context.models)))
    means = final.groupby(["model", "kind"])["val/error"].mean().reset_index().sort_values("val/error")
    models = [context.default]
    for kind in ("searched", "hand-designed"):
        rows = means[means["kind"] == kind]
        models += list(rows["model"][:1])
    return [model for model in models if context.models[model][0] in kinds]


def dominance(context: StudyContext, runs: pd.DataFrame, stage: str, data: str) -> None:
    """Claims: the searched candidate dominates the default model and each compared hand-designed model, on the
    validation and the test split. Claim ids name the baseline by kind (``hand-designed-2``: the second best)."""
    hand_designed = chosen(context, {"hand-designed"})
    if stage == "final":
        hand_designed = best_hand_designed(context, context.settings.final.hand_designed)
    baselines = {context.default: "default"} | {
        model: "hand-designed" + ("" if rank == 1 else f"-{rank}") for rank, model in enumerate(hand_designed, 1)
    }
    present = set(runs["model"])
    context.claims.extend(
        claims.dominance(
            runs, candidate, baseline, claim_id=f"{stage}/dominates/{kind}/{split}", split=split, data=data
        )
        for candidate in context.searched
        if candidate in present
        for baseline, kind in baselines.items()
        if baseline in present
        for split in ("val", "test")
    )


def dominance_stage(
    context: StudyContext, runs: pd.DataFrame, stage: str, data: str, split: str, title: str, heading: str, about: str
) -> StageReport:
    """The report of a stage that compares the searched candidate with its baselines (``final``, ``transfer``):
    the models' table and figure of ``split`` (``title``), the dominance claims and the crashed runs' finding."""
    table, figure = models_table(context, runs, stage, data, split, title)
    dominance(context, runs, stage, data=data)
    return StageReport(stage, heading, about, crashes(runs), {stage: table}, {stage: figure}, math.nan)


def models_table(
    context: StudyContext, runs: pd.DataFrame, name: str, data: str, split: str, title: str
) -> tuple[Path, Path]:
    """The models' means ± s.e. over seeds as a table, a figure and (for W&B) a native scatter plot of ``split``."""
    summary = claims.model_summary(runs, data=data)
    context.scatters.append(
        (
            f"{name}_front",
            summary,
            f"{split}/error_mean",
            f"{split}/rank_disparity_mean",
            f"{title}: {split} error vs rank disparity (means over seeds)",
        )
    )
    return context.files.table(name, summary), context.files.figure(name, scatter_figure(summary, title))


def crashes(runs: pd.DataFrame) -> list[str]:
    """A finding naming the crashed runs of a stage (none when every run finished)."""
    failed = claims.failed(runs)
    if not len(failed):
        return []
    return [
        f"{len(failed)} of {len(runs)} runs crashed and are left out of this stage's numbers: "
        + "; ".join(f"{row.model} seed {row.seed}: {row.error_message}" for row in failed.itertuples())
    ]
