"""``mitigations``: Balanced, Flipped, Angular, SensitiveNets (Sec. 4.5.3, Table 4.6) on the compared models of the
kinds in ``study.mitigations.models``, against the final comparison's runs of the same model and seed. A mitigation
that changes nothing in a model's training is not trained: its claim reads *not applicable*."""

from __future__ import annotations

import dataclasses
import itertools
import math
from collections.abc import Sequence

import pandas as pd
from omegaconf import DictConfig

from fairnas.config import compose_config
from fairnas.mitigations.grid import BASELINE, Cell, Mitigation, choice, grid
from fairnas.mitigations.table import markdown_tables, summarize
from fairnas.study import claims
from fairnas.study.context import StudyContext
from fairnas.study.report import StageReport
from fairnas.study.runs import RunSpec, changes_training, not_applicable
from fairnas.study.settings import STUDY, check_composes, model_kinds, seed_count
from fairnas.study.stages.base import Stage, register
from fairnas.study.stages.shared import chosen, comparison_seeds, crashes


def run(context: StudyContext) -> StageReport:
    settings = context.settings.mitigations
    models = chosen(context, set(settings.models))
    seeds = comparison_seeds(context, settings.seeds)
    mitigations = [declared(context, name) for name in settings.names]
    specs, skipped = [], []
    for (mitigation, model), cells in itertools.groupby(
        grid(models, mitigations, seeds), key=lambda cell: (cell.mitigation, cell.model)
    ):
        treated = [_treated(context, cell) for cell in cells]
        baseline = context.specs([model], [treated[0].seed])[0]
        if changes_training(context.overrides(baseline), context.overrides(treated[0])):
            specs += treated
        else:
            reason = f"{mitigation.title} changes nothing in the training of {model}, whose own overrides set it"
            skipped.append(not_applicable(treated, "mitigations", reason))
    mitigated = pd.concat([context.train(specs, "mitigations"), *skipped], ignore_index=True)
    context.runs = pd.concat([context.runs, *skipped], ignore_index=True)
    runs = pd.concat([context.rows("final", models, seeds), mitigated])
    cells = runs.rename(columns={"test/error": "error", "test/rank_disparity": "rank_disparity"})
    summary = summarize(claims.successful(cells), ["rank_disparity"])
    table = context.files.table("mitigations", summary)
    context.claims.extend(
        claims.lowers(
            runs,
            model,
            mitigation.name,
            "test/rank_disparity",
            claim_id=f"mitigations/{mitigation.name}/{context.models[model][0]}/test",
            label=mitigation.title,
        )
        for model in models
        for mitigation in mitigations
    )
    titles = {BASELINE: "Baseline"} | {mitigation.name: mitigation.title for mitigation in mitigations}
    return StageReport(
        "mitigations",
        "Bias mitigations (Sec. 4.5.3, Table 4.6)",
        f"Each mitigation on the compared models, seeds {seeds}, against the same model's baseline run "
        "(paired by seed; test split).",
        crashes(mitigated),
        {"mitigations": table},
        {},
        math.nan,
        notes=[markdown_tables(summary, ["rank_disparity"], titles, split="test", error_scale=100.0)],
    )


def declared(context: StudyContext, name: str) -> Mitigation:
    """Mitigation ``name`` with its ``study.mitigations.overrides``, as its config declares it on the study's runs."""
    own = list((context.settings.mitigations.overrides or {}).get(name, []))
    composed = compose_config("train", [*context.base, *choice(name, own)], output_dir=".")
    return Mitigation.declared(name, own, composed.mitigation)


def _treated(context: StudyContext, cell: Cell) -> RunSpec:
    """The run of a grid cell: the model's final-comparison run with the mitigation, reading that run's files."""
    baseline = context.specs([cell.model], [cell.seed])[0]
    inputs = cell.mitigation.baseline_overrides(context.output_dir / baseline.folder)
    extra = (*cell.mitigation.overrides, *inputs)
    return dataclasses.replace(baseline, mitigation=cell.mitigation.name, extra=extra)


def check(study: DictConfig, base: Sequence[str]) -> None:
    """Its kinds and seeds (at most the final comparison's, whose runs are the baselines), and every mitigation's
    training config."""
    settings, final = study.mitigations, study.final
    kinds = model_kinds(settings.models, "mitigations.models")
    seeds = seed_count(settings.seeds, "mitigations.seeds", 2)
    hand_designed_seeds = final.seeds if final.hand_designed_seeds is None else final.hand_designed_seeds
    if "hand-designed" in kinds and seeds > hand_designed_seeds:
        raise ValueError(
            f"study.mitigations.seeds={seeds} must be at most study.final.hand_designed_seeds={hand_designed_seeds} "
            "(the hand-designed model's baselines)"
        )
    if seeds > final.seeds:
        raise ValueError(f"study.mitigations.seeds={seeds} must be at most study.final.seeds={final.seeds}")
    for name in STUDY.sequence("mitigations.names", settings.names, "a list of conf/mitigation/ names"):
        check_composes(
            [*base, f"mitigation={name}", *(settings.overrides or {}).get(name, [])],
            f"study.mitigations.names ({name})",
        )


register(Stage("mitigations", 50, run, needs="final", check=check, tables=("mitigations",), claims=("mitigations/",)))
