"""``final``: the searched candidate, the default model and the best hand-designed models re-trained with the same
fresh seeds (the hand-designed ones with the first ``study.final.hand_designed_seeds`` of them); does the candidate
dominate them, paired by seed?"""

from __future__ import annotations

from fairnas.study.context import StudyContext
from fairnas.study.report import StageReport
from fairnas.study.stages.shared import best_hand_designed, dominance_stage


def run(context: StudyContext) -> StageReport:
    settings = context.settings.final
    hand_designed = best_hand_designed(context, settings.hand_designed)
    seeds = context.final_seeds[: settings.hand_designed_seeds or settings.seeds]
    # the hand-designed (timm) models first: the slowest runs start first, so the pool's workers finish together
    compared = [context.default, *context.searched]
    specs = context.specs(hand_designed, seeds) + context.specs(compared, context.final_seeds)
    runs = context.train(specs, "final")
    return dominance_stage(
        context,
        runs,
        "final",
        data="main",
        split="val",
        title="re-trained models",
        heading="The search's answer against the default and the best hand-designed models",
        about=f"Every model re-trained with seeds {context.final_seeds} (hand-designed: {seeds}); differences paired "
        "by seed.",
    )
