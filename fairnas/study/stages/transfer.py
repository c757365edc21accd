"""``transfer``: the compared models of the kinds in ``study.transfer.models`` trained and evaluated on a second data
set (``study.transfer.overrides``; Tables 4.5 / 4.8); does the candidate still dominate?"""

from __future__ import annotations

from fairnas.study.context import StudyContext
from fairnas.study.report import StageReport
from fairnas.study.stages.shared import chosen, dominance_stage


def run(context: StudyContext) -> StageReport:
    settings = context.settings.transfer
    models = chosen(context, set(settings.models))
    seeds = context.final_seeds[: settings.seeds]
    runs = context.train(context.specs(models, seeds, data="transfer"), "transfer")
    return dominance_stage(
        context,
        runs,
        "transfer",
        data="transfer",
        split="test",
        title="transfer data set",
        heading="Transfer to a second data set (Tables 4.5 / 4.8)",
        about=f"The compared models ({', '.join(models)}) trained and evaluated with {list(settings.overrides)}, "
        f"seeds {seeds}.",
    )
