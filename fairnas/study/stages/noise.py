"""``noise``: the default model with the final comparison's seeds, the seed noise every comparison is read against."""

from __future__ import annotations

import math
from collections.abc import Sequence

from omegaconf import DictConfig

from fairnas.study import claims
from fairnas.study.context import StudyContext
from fairnas.study.report import StageReport
from fairnas.study.settings import seed_count
from fairnas.study.stages.base import Stage, register
from fairnas.study.stages.shared import comparison_seeds, crashes


def run(context: StudyContext) -> StageReport:
    seeds = comparison_seeds(context, context.settings.noise.seeds)
    runs = context.train(context.specs([context.default], seeds), "noise")
    noise = claims.seed_noise(runs, context.default)
    table = context.files.table("noise", noise)
    findings = [
        f"{row['metric']} of {context.default}: {claims.fmt(row['mean'], row['seed s.e.'])} (seed s.d. "
        f"{row['seed s.d.']:.3f}) over {row['seeds']} seeds"
        for row in noise.to_dict("records")
    ]
    return StageReport(
        "noise",
        "Seed noise of the default model",
        "How much one model moves with its training seed: every difference below is read against it.",
        findings + crashes(runs),
        {"noise": table},
        {},
        math.nan,
    )


def check(study: DictConfig, base: Sequence[str]) -> None:
    seed_count(study.noise.seeds, "noise.seeds", 2)


register(Stage("noise", 10, run, check=check, tables=("noise",)))
