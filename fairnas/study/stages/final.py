"""``final``: the searched candidate, the default model and the best hand-designed models re-trained with the same
fresh seeds (the hand-designed ones with the first ``study.final.hand_designed_seeds`` of them); does the candidate
dominate them, paired by seed?"""

from __future__ import annotations

from collections.abc import Sequence

from omegaconf import DictConfig

from fairnas.study.context import StudyContext
from fairnas.study.report import StageReport
from fairnas.study.settings import STUDY, seed_count
from fairnas.study.stages.base import Stage, register
from fairnas.study.stages.shared import best_hand_designed, comparison_seeds, dominance_stage


def run(context: StudyContext) -> StageReport:
    settings = context.settings.final
    hand_designed = best_hand_designed(context, settings.hand_designed)
    final_seeds = comparison_seeds(context, settings.seeds)
    seeds = final_seeds[: settings.hand_designed_seeds or settings.seeds]
    # the hand-designed (timm) models first: the slowest runs start first, so the pool's workers finish together
    compared = [context.default, *context.searched]
    specs = context.specs(hand_designed, seeds) + context.specs(compared, final_seeds)
    runs = context.train(specs, "final")
    return dominance_stage(
        context,
        runs,
        "final",
        data="main",
        split="val",
        title="re-trained models",
        heading="The search's answer against the default and the best hand-designed models",
        about=f"Every model re-trained with seeds {final_seeds} (hand-designed: {seeds}); differences paired by seed.",
    )


def check(study: DictConfig, base: Sequence[str]) -> None:
    settings = study.final
    seeds = seed_count(settings.seeds, "final.seeds", 2)
    STUDY.integer("final.hand_designed", settings.hand_designed, minimum=0)
    if settings.hand_designed_seeds is not None:
        hand_designed_seeds = seed_count(settings.hand_designed_seeds, "final.hand_designed_seeds", 2)
        if hand_designed_seeds > seeds:
            raise ValueError(
                f"study.final.hand_designed_seeds={hand_designed_seeds} must be at most study.final.seeds={seeds}"
            )


register(Stage("final", 40, run, needs="search", check=check, tables=("final",), claims=("final/",)))
