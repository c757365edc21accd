"""``search``: ``search.py``'s search (any strategy) with its final stage (Sec. 4.4-4.5.1). Its answer's
configuration of lowest error, chosen by the search's own seeds, is the candidate the later stages compare, and
they train with seeds the search never used."""

from __future__ import annotations

import json
import math
import shutil
from collections.abc import Sequence

import pandas as pd
from omegaconf import DictConfig

from fairnas.config import resolve_space_path
from fairnas.search import SearchSettings, load_space
from fairnas.study.context import StudyContext
from fairnas.study.report import StageReport
from fairnas.study.runs import searched_name
from fairnas.study.settings import STUDY, search_settings
from fairnas.study.stages.base import Stage, register


def run(context: StudyContext) -> StageReport:
    settings = search_settings(context.settings)
    result = context.search(settings)
    answer = result.final.front if result.final is not None else result.pareto_front
    space = load_space(resolve_space_path(settings["space"]))
    answer_names = []
    for row in answer.to_dict("records"):
        config = json.loads(row["config"])
        answer_names.append(searched_name(config, space))
        context.models.setdefault(answer_names[-1], ("searched", tuple(space.overrides(config))))
    if answer_names:  # the candidate is chosen here, by the search's own seeds, never by the comparison's
        context.searched = [answer_names[_lowest_error(answer)]]
    final_stage = [] if result.final is None else list(result.final.trials["seed"])
    context.search_seeds = {int(seed) for seed in (*result.trials["seed"], *final_stage)}
    shutil.copyfile(result.output_dir / "pareto_front.png", context.output_dir / "search_front.png")
    tables = {"search_answer": context.files.table("search_answer", answer)}
    trials = result.trials
    context.scatters.append(
        (
            "search_trials",
            trials[trials["status"] == "success"],
            "error",
            "rank_disparity",
            "search trials: validation error vs rank disparity",
        )
    )
    epochs = float(trials["budget"].sum())
    final_epochs = 0.0 if result.final is None else result.final.epochs
    findings = [
        f"{settings['strategy']} search of {settings['space']}: {len(trials)} trials, {epochs:g} epochs, then "
        f"{final_epochs:g} epochs of its final stage; its answer: {len(answer_names)} configuration(s): "
        + "; ".join(answer_names)
        + (
            f". The compared candidate, chosen by the search's own seeds (lowest error): {context.searched[0]}."
            if context.searched
            else "."
        )
    ]
    return StageReport(
        "search",
        "Search (Sec. 4.4) with its final stage (Sec. 4.5.1)",
        "The search's answer is the front of its best configurations re-trained with fresh seeds; its "
        "configuration of lowest error is the candidate the later stages compare.",
        findings,
        tables,
        {"search_front": context.output_dir / "search_front.png"},
        math.nan,
    )


def _lowest_error(answer: pd.DataFrame) -> int:
    """The position in a search's answer (final front: ``error_mean``; observed front: ``error``) of its
    configuration of lowest error, the first objective of every claim."""
    column = "error_mean" if "error_mean" in answer else "error"
    return int(answer[column].reset_index(drop=True).idxmin())


def check(study: DictConfig, base: Sequence[str]) -> None:
    """The search settings as ``search.py`` checks them, on faces, and a budget that affords a full trial."""
    settings = search_settings(study)
    try:
        values = SearchSettings.from_section(settings)
        resolve_space_path(settings["space"])
    except (ValueError, FileNotFoundError) as error:
        raise ValueError(f"study.search: {str(error).splitlines()[0]}") from None
    if settings.get("benchmark") is not None:
        STUDY.fail("search.benchmark", settings["benchmark"], "null (the study's search trains its models)")
    if values.total_budget is not None and values.total_budget < values.max_budget:
        raise ValueError(
            f"study.search.total_budget={values.total_budget:g} is below one full trial "
            f"(study.search.max_budget={values.max_budget:g} epochs)"
        )


register(Stage("search", 30, run, check=check, tables=("search_answer",)))
