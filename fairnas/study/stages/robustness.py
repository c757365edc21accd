"""``robustness``: AdvERM against plain training of the default model (Sec. 2.9); robustness bias from DeepFool."""

from __future__ import annotations

import math
from collections.abc import Sequence

from omegaconf import DictConfig

from fairnas.search.final import fresh_seeds
from fairnas.study import claims
from fairnas.study.context import StudyContext
from fairnas.study.report import StageReport
from fairnas.study.runs import RunSpec
from fairnas.study.settings import check_composes, override_list, seed_count
from fairnas.study.stages.base import Stage, register
from fairnas.study.stages.shared import crashes

ARMS = {"plain": ["eval.robustness_bias=true"], "AdvERM": ["regularizer=robustness_bias"]}
"""The two trainings compared (their ``mitigation`` column) and their overrides."""


def run(context: StudyContext) -> StageReport:
    settings = context.settings.robustness
    seeds = fresh_seeds(context.reserved, settings.seeds)  # not those whose effects planned the study
    default = context.default
    specs = [
        RunSpec(
            default,
            "default",
            context.models[default][1],
            seed,
            mitigation=arm,
            extra=(*overrides, *settings.overrides),
        )
        for arm, overrides in ARMS.items()
        for seed in seeds
    ]
    runs = context.train(specs, "robustness")
    context.claims.extend(
        claims.lowers(
            runs,
            default,
            "AdvERM",
            f"{split}/robustness_bias",
            claim_id=f"robustness/adverm/default/{split}",
            label="AdvERM",
            baseline="plain",
        )
        for split in ("val", "test")
    )
    table = context.files.table("robustness", runs)
    return StageReport(
        "robustness",
        "AdvERM against plain training (Sec. 2.9)",
        "Robustness bias (the largest group gap of the distance to the decision boundary, DeepFool) of the "
        f"default model with and without the AdvERM regulariser, seeds {seeds}, paired.",
        crashes(runs),
        {"robustness": table},
        {},
        math.nan,
    )


def check(study: DictConfig, base: Sequence[str]) -> None:
    settings = study.robustness
    seed_count(settings.seeds, "robustness.seeds", 2)
    overrides = override_list(settings.overrides, "robustness.overrides")
    check_composes([*base, "regularizer=robustness_bias", *overrides], "study.robustness.overrides")


register(Stage("robustness", 60, run, check=check, tables=("robustness",), claims=("robustness/",)))
