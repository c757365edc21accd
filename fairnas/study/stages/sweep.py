"""``sweep``: hand-designed models (Sec. 4.3), from a space file's architectures or a list, with the study's
recipe."""

from __future__ import annotations

import math
from collections.abc import Sequence

from omegaconf import DictConfig

from fairnas.study import claims
from fairnas.study.context import StudyContext
from fairnas.study.report import StageReport, scatter_figure
from fairnas.study.settings import check_composes, hand_designed_models, seed_count
from fairnas.study.stages.base import Stage, register
from fairnas.study.stages.shared import crashes


def run(context: StudyContext) -> StageReport:
    settings = context.settings
    models = hand_designed_models(settings)
    for name, overrides in models.items():
        context.models[name] = ("hand-designed", tuple(overrides))
    runs = context.train(context.specs(list(models), range(settings.sweep.seeds)), "sweep")
    summary = claims.model_summary(runs).sort_values("val/error_mean")
    table = context.files.table("sweep", summary)
    figure = context.files.figure("sweep", scatter_figure(summary, "hand-designed sweep"))
    best = summary.iloc[0] if len(summary) else None
    findings = [
        f"Lowest validation error: {best['model']} ({best['val/error_mean']:.3f}, rank disparity "
        f"{best['val/rank_disparity_mean']:.2f}); {len(summary)} models, {settings.sweep.seeds} seed(s) each."
        if best is not None
        else "No hand-designed model finished."
    ]
    return StageReport(
        "sweep",
        "Hand-designed models (Sec. 4.3)",
        "Error and rank disparity of standard architectures trained with the study's recipe.",
        findings + crashes(runs),
        {"sweep": table},
        {"sweep": figure},
        math.nan,
    )


def check(study: DictConfig, base: Sequence[str]) -> None:
    seed_count(study.sweep.seeds, "sweep.seeds", 1)
    for name, overrides in hand_designed_models(study).items():
        check_composes([*base, *overrides], f"study.sweep model {name!r}")


register(Stage("sweep", 20, run, check=check, tables=("sweep",)))
