"""``final``: the searched candidate, the default model and the best hand-designed models re-trained with the same
fresh seeds; does the candidate dominate them, paired by seed?"""

from __future__ import annotations

from fairnas.study.context import StudyContext
from fairnas.study.report import StageReport
from fairnas.study.stages.shared import best_hand_designed, dominance_stage


def run(context: StudyContext) -> StageReport:
    hand_designed = best_hand_designed(context, context.settings.final.hand_designed)
    compared = [context.default, *context.searched, *hand_designed]
    runs = context.train(context.specs(compared, context.final_seeds), "final")
    return dominance_stage(
        context,
        runs,
        "final",
        data="main",
        split="val",
        title="re-trained models",
        heading="The search's answer against the default and the best hand-designed models",
        about=f"Every model re-trained with seeds {context.final_seeds}; differences paired by seed.",
    )
