"""``sweep``: hand-designed models (Sec. 4.3), from a space file's architectures or a list, with the study's
recipe."""

from __future__ import annotations

import math

from fairnas.study import claims as verdicts
from fairnas.study.context import StudyContext
from fairnas.study.report import StageReport, scatter_figure
from fairnas.study.settings import hand_designed_models
from fairnas.study.stages.shared import crashes


def run(context: StudyContext) -> StageReport:
    settings = context.settings
    models = hand_designed_models(settings)
    for name, overrides in models.items():
        context.models[name] = ("hand-designed", tuple(overrides))
    runs = context.train(context.specs(list(models), range(settings.sweep.seeds)), "sweep")
    summary = verdicts.model_summary(runs).sort_values("val/error_mean")
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
