"""``search``: ``search.py``'s search (any strategy) with its final stage (Sec. 4.4-4.5.1). Its answer's
configuration of lowest error, chosen by the search's own seeds, is the candidate the later stages compare, and
they train with seeds the search never used."""

from __future__ import annotations

import json
import math
import shutil

import pandas as pd

from fairnas.config import resolve_space_path
from fairnas.search import load_space
from fairnas.search.final import fresh_seeds
from fairnas.study.context import StudyContext
from fairnas.study.report import StageReport
from fairnas.study.runs import searched_name
from fairnas.study.settings import search_settings


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
    used = {*result.trials["seed"], *final_stage, *context.reserved}
    context.final_seeds = fresh_seeds(used, context.settings.final.seeds)
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
