"""``transfer``: the compared models of the kinds in ``study.transfer.models`` trained and evaluated on a second data
set (``study.transfer.overrides``; Tables 4.5 / 4.8); does the candidate still dominate?"""

from __future__ import annotations

from collections.abc import Sequence

from omegaconf import DictConfig

from fairnas.study.context import StudyContext
from fairnas.study.report import StageReport
from fairnas.study.settings import check_composes, model_kinds, override_list, seed_count
from fairnas.study.stages.base import Stage, register
from fairnas.study.stages.shared import chosen, comparison_seeds, dominance_stage


def run(context: StudyContext) -> StageReport:
    settings = context.settings.transfer
    models = chosen(context, set(settings.models))
    seeds = comparison_seeds(context, settings.seeds)
    data = tuple(settings.overrides)
    runs = context.train(context.specs(models, seeds, data="transfer", data_overrides=data), "transfer")
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


def check(study: DictConfig, base: Sequence[str]) -> None:
    """Its kinds (the searched model and a baseline), its seeds (at most the final comparison's) and the second data
    set's training config."""
    settings = study.transfer
    kinds = model_kinds(settings.models, "transfer.models")
    if "searched" not in kinds or len(kinds) < 2:
        raise ValueError(f"study.transfer.models={kinds}: the searched model and at least one baseline kind")
    seeds = seed_count(settings.seeds, "transfer.seeds", 2)
    if seeds > study.final.seeds:
        raise ValueError(f"study.transfer.seeds={seeds} must be at most study.final.seeds={study.final.seeds}")
    check_composes([*base, *override_list(settings.overrides, "transfer.overrides")], "study.transfer.overrides")


register(Stage("transfer", 70, run, needs="final", check=check, tables=("transfer",), claims=("transfer/",)))
