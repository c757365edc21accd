"""``transfer``: the compared models trained and evaluated on a second data set (``study.transfer.overrides``;
Tables 4.5 / 4.8); does the candidate still dominate?"""

from __future__ import annotations

import math

from fairnas.study.context import StudyContext
from fairnas.study.report import StageReport
from fairnas.study.stages.shared import chosen, crashes, dominance, models_table


def run(context: StudyContext) -> StageReport:
    settings = context.settings.transfer
    seeds = context.final_seeds[: settings.seeds]
    runs = context.train(context.specs(chosen(context), seeds, data="transfer"), "transfer")
    table, figure = models_table(context, runs, "transfer", "transfer", "test", "transfer data set")
    dominance(context, runs, "transfer", data="transfer")
    return StageReport(
        "transfer",
        "Transfer to a second data set (Tables 4.5 / 4.8)",
        f"The compared models trained and evaluated with {list(settings.overrides)}, seeds {seeds}.",
        crashes(runs),
        {"transfer": table},
        {"transfer": figure},
        math.nan,
    )
