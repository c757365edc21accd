"""A comparison of search strategies planned before it runs, and its verdicts.

The question is whether a strategy's answer is better in truth than a baseline's at the same compute: random
search's (the default), or another strategy's, e.g. today's default when a new one is to replace it. The plan fixes,
before any confirmatory run: the problem and its reference point, the score (the answer's hypervolume at the truth
as a share of the best front's: on a real table ``heldout_true_share``, the truth the mean of the seeds the search
never read, :func:`score_of`; on a surrogate or an analytic problem ``true_share``), the baseline, the strategies
and budgets, the smallest lead worth finding (``min_lead``), the level and the power, and the seeds. The seeds come
from a pilot on seeds apart from the confirmatory ones: the standard deviation of each strategy's per-seed
difference from the baseline, and the seconds a run takes. Per budget, the strategies' comparisons with the baseline
form one Holm family of m; the plan sizes every comparison at Holm's first step alpha/m (so each has at least the
planned power under Holm) with a two-sided paired t-test (statsmodels' ``TTestPower``). A strategy whose runs cost
more than its share of the compute budget gets the seeds it affords, and the plan states the lead those seeds can
detect.

:func:`verdicts` reads the confirmatory runs back: per budget and strategy, the mean paired lead with its standard
error, the t-test's p, Holm's adjusted p (statsmodels' ``multipletests``), and a verdict: leads or trails by the
lead where the adjusted p is below alpha, else no lead beyond the noise, with D, the lead the planned seeds detect
with the planned power (fixed by the plan from the pilot, never from the confirmatory data).

:func:`held_out_plan` re-sizes a plan committed with the flattering ``true_share`` on a real table for the held-out
score, from the same pilot and with the same seeds, so that its committed runs are decided again on held-out seeds
without a new run (``bench/search_plan.py redecide``).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd
from scipy import stats
from statsmodels.stats.multitest import multipletests
from statsmodels.stats.power import TTestPower

from bench.comparison.methods import METHODS

BASELINE = "random"
"""The baseline unless a plan names another."""
SCORE = "true_share"
"""The score on a surrogate or an analytic problem, whose truth is noise-free."""
HELD_OUT_SCORE = "heldout_true_share"
"""The score on a real table: the answer at the mean of the seeds the search never read. The seeds it read also chose
the answer, so their mean flatters it, the more the more a search selects on noise
(:mod:`fairnas.benchmarks.answer_quality`)."""


def score_of(problem: str) -> str:
    """The score a comparison on ``problem`` (a :class:`~fairnas.benchmarks.problems.Problem`'s name) is decided on:
    :data:`HELD_OUT_SCORE` on a real table (``table:<name>``), else :data:`SCORE`."""
    return HELD_OUT_SCORE if problem.startswith("table:") else SCORE


def required_seeds(sd: float, lead: float, level: float, power: float) -> int:
    """Seeds a two-sided paired t-test at ``level`` needs to find a lead of ``lead`` with ``power``, when per-seed
    differences have standard deviation ``sd`` (at least 2)."""
    if sd <= 0:
        return 2
    n = TTestPower().solve_power(effect_size=lead / sd, nobs=None, alpha=level, power=power, alternative="two-sided")
    return max(2, math.ceil(float(n)))


def detectable_lead(sd: float, seeds: int, level: float, power: float) -> float:
    """The smallest lead ``seeds`` paired seeds find with ``power`` at ``level`` (two-sided), in the score's units."""
    if seeds < 2 or not np.isfinite(sd):
        return float("nan")
    d = TTestPower().solve_power(effect_size=None, nobs=seeds, alpha=level, power=power, alternative="two-sided")
    return abs(float(np.ravel(d)[0])) * sd  # statsmodels may return a 1-element array, or the negative root


def paired_scores(runs: pd.DataFrame, method: str, baseline: str = BASELINE, score: str = SCORE) -> pd.DataFrame:
    """``method``'s and ``baseline``'s scores (columns), per seed both ran (one budget's runs: ``method``,
    ``seed``); empty where either was not run (yet)."""
    wide = runs.pivot_table(index="seed", columns="method", values=score)
    if method not in wide or baseline not in wide:
        return pd.DataFrame(columns=[method, baseline], dtype=float)
    return wide[[method, baseline]].dropna()


def paired_differences(runs: pd.DataFrame, method: str, baseline: str = BASELINE, score: str = SCORE) -> pd.Series:
    """``method``'s score minus ``baseline``'s, per seed both ran."""
    pairs = paired_scores(runs, method, baseline, score)
    return pairs[method] - pairs[baseline]


def make_plan(
    pilot: pd.DataFrame,
    *,
    problem: str,
    reference_point: Sequence[float],
    max_hypervolume: float,
    methods: Sequence[str],
    budgets: Sequence[int],
    max_budget: int,
    min_lead: float,
    alpha: float = 0.05,
    power: float = 0.8,
    core_hours: float,
    first_seed: int,
    baseline: str = BASELINE,
    score: str | None = None,
) -> dict[str, Any]:
    """The plan (JSON-ready) from ``pilot``, on ``score`` (default :func:`score_of` the problem): answer-quality rows of
    every method at every budget in consumed epochs (``budget`` = full trials x ``max_budget``), with
    ``run_wall_time_s``. Per budget: each method's pilot s.d. of its difference from ``baseline`` (one of
    ``methods``), its seconds per run, the seeds it needs at alpha/m, and the seeds it gets. ``core_hours`` are
    shared out over the cells (method, budget), cheapest need first: a cell whose runs fit an equal share of what is
    left gets all it needs, the rest share the remainder equally and get the seeds it buys, with the lead those can
    detect. A method the pilot could not run at a budget (too costly) gets no seeds there."""
    compared = [method for method in methods if method != baseline]
    level = alpha / len(compared)
    score = score or score_of(problem)
    cells: list[dict[str, Any]] = []
    for trials in budgets:
        at_budget = pilot[np.isclose(pilot["budget"], trials * max_budget)]
        if not (at_budget["method"] == baseline).any():
            raise ValueError(f"the pilot has no runs of {baseline} at {trials} full trials")
        for method in [baseline, *compared]:
            runs = at_budget[at_budget["method"] == method]
            cell = {"budget": trials, "method": method, "seconds_per_run": float(runs["run_wall_time_s"].mean())}
            if method != baseline and len(runs) > 1:
                sd, seeds = pilot_sd(at_budget, method, baseline, score)
                cell |= {"pilot_seeds": seeds, "pilot_sd": sd}
                cell["seeds_needed"] = required_seeds(sd, min_lead, level, power)
            elif method != baseline:
                cell |= {"pilot_seeds": len(runs), "pilot_sd": np.nan, "seeds_needed": 0}
            cells.append(cell)
    frame = pd.DataFrame(cells)
    needed = frame.groupby("budget")["seeds_needed"].max()
    frame["seeds_needed"] = frame["seeds_needed"].fillna(frame["budget"].map(needed)).astype(int)
    frame["seeds"] = _share_out(frame, core_hours * 3600)
    baseline_seeds = frame[frame["method"] == baseline].set_index("budget")["seeds"]
    frame["seeds"] = np.minimum(frame["seeds"], frame["budget"].map(baseline_seeds))  # pairs need the baseline's
    frame["detectable_lead"] = [
        detectable_lead(row.pilot_sd, row.seeds, level, power) if row.method != baseline else np.nan
        for row in frame.itertuples()
    ]
    frame["core_hours"] = frame["seeds"] * frame["seconds_per_run"].fillna(0.0) / 3600
    return {
        "problem": problem,
        "score": score,
        "reference_point": [float(value) for value in reference_point],
        "max_hypervolume": float(max_hypervolume),
        "baseline": baseline,
        "methods": compared,
        "budgets_full_trials": [int(trials) for trials in budgets],
        "max_budget": int(max_budget),
        "min_lead": min_lead,
        "alpha": alpha,
        "power": power,
        "family": f"per budget: every method against {baseline}, Holm over the m comparisons",
        "planning_level": level,
        "core_hours": core_hours,
        "first_seed": first_seed,
        "pilot_seeds": sorted(int(seed) for seed in pilot["seed"].unique()),
        "cells": [{k: _plain(v) for k, v in cell.items()} for cell in frame.to_dict("records")],
    }


def pilot_sd(runs: pd.DataFrame, method: str, baseline: str, score: str) -> tuple[float, int]:
    """The s.d. of ``method``'s per-seed difference from ``baseline`` in ``score`` over a pilot's ``runs`` (one
    budget's), and the seeds it is taken over."""
    differences = paired_differences(runs, method, baseline, score)
    return float(differences.std(ddof=1)), len(differences)


def held_out_plan(plan: dict[str, Any], pilot: pd.DataFrame) -> dict[str, Any]:
    """``plan``, committed with the flattering ``true_share`` on a real table, as it reads on the held-out score:
    the same problem, methods, budgets, level, power and seeds; each cell's pilot s.d. and detectable lead taken again
    from the same ``pilot`` on :data:`HELD_OUT_SCORE`. Its committed runs can then be decided on held-out seeds
    (:func:`verdicts`) with no new run and no look at them before."""
    if not plan["problem"].startswith("table:"):
        raise ValueError(f"the plan is on {plan['problem']}, not a real table: it has no held-out seeds")
    resized = {**plan, "score": HELD_OUT_SCORE, "sized_on": plan["score"]}
    cells = []
    for cell in plan["cells"]:
        at_budget = pilot[np.isclose(pilot["budget"], cell["budget"] * plan["max_budget"])]
        if cell["method"] != plan["baseline"] and cell.get("pilot_sd") is not None:
            sd, seeds = pilot_sd(at_budget, cell["method"], plan["baseline"], HELD_OUT_SCORE)
            lead = detectable_lead(sd, cell["seeds"], plan["planning_level"], plan["power"])
            cell = {**cell, "pilot_sd": sd, "pilot_seeds": seeds, "detectable_lead": lead}
        cells.append({key: _plain(value) for key, value in cell.items()})
    return resized | {"cells": cells}


def _share_out(frame: pd.DataFrame, seconds: float) -> pd.Series:
    """Seeds per cell (method, budget) within ``seconds`` of compute (:func:`make_plan`): cells in order of the cost
    of their needed seeds; each gets what it needs if that fits an equal share of what is left, else the seeds that
    share buys (at least 2)."""
    costs = frame["seeds_needed"] * frame["seconds_per_run"].fillna(0.0)
    seeds = frame["seeds_needed"].astype(float).copy()
    left = seconds
    for position, (index, cost) in enumerate(costs.sort_values().items()):
        share = left / (len(costs) - position)
        if cost > share:
            seeds[index] = max(2.0, math.floor(share / frame.loc[index, "seconds_per_run"]))
        left -= seeds[index] * (frame.loc[index, "seconds_per_run"] if cost > 0 else 0.0)
    return seeds.astype(int)


def planned_seeds(plan: dict[str, Any], budget: int, method: str) -> list[int]:
    """The confirmatory seeds of ``method`` at ``budget`` full trials: ``first_seed`` onwards, as many as planned."""
    return list(range(plan["first_seed"], plan["first_seed"] + _cell(plan, budget, method)["seeds"]))


def _cell(plan: dict[str, Any], budget: int, method: str) -> dict[str, Any]:
    return next(cell for cell in plan["cells"] if cell["budget"] == budget and cell["method"] == method)


def verdicts(plan: dict[str, Any], runs: pd.DataFrame) -> pd.DataFrame:
    """Per budget and method: the confirmatory runs' mean scores (the plan's ``score``: the method's and the
    baseline's, on the seeds both ran) and paired lead over the plan's baseline (mean, s.e., seeds; on a held-out
    score also the lead on every seed's mean beside it, ``all_seeds_lead``), the
    t-test's p and Holm's adjusted p within the budget's family (all the plan's comparisons; one not run, or not
    finished on all its planned seeds, is not tested and counts as p = 1), the planned detectable lead, and the
    verdict (module docstring). Runs on seeds outside the plan's are ignored."""
    rows = []
    for trials in plan["budgets_full_trials"]:
        at_budget = runs[np.isclose(runs["budget"], trials * plan["max_budget"])]
        family = []
        for method in plan["methods"]:
            seeds = set(planned_seeds(plan, trials, method))
            planned_runs = at_budget[at_budget["seed"].isin(seeds)]
            pairs = paired_scores(planned_runs, method, plan["baseline"], plan["score"])
            differences = pairs[method] - pairs[plan["baseline"]]
            finished = len(seeds) > 1 and len(differences) == len(seeds)  # an unfinished cell is not tested
            test = stats.ttest_1samp(differences, 0.0) if finished else None
            family.append(
                {
                    "budget": trials,
                    "method": method,
                    "label": METHODS[method].label if method in METHODS else method,
                    "score": plan["score"],
                    "seeds": len(differences),
                    "share": pairs[method].mean(),
                    "baseline_share": pairs[plan["baseline"]].mean(),
                    "lead": differences.mean(),
                    "lead_se": differences.sem(),
                    "p": float(test.pvalue) if test is not None else np.nan,
                    "planned_detectable_lead": _cell(plan, trials, method)["detectable_lead"],
                    **_flattering(planned_runs, method, plan),
                }
            )
        p = np.array([row["p"] for row in family])
        tested = np.isfinite(p)
        # the family is every planned comparison: one not run (yet) counts as p = 1, so running fewer never helps
        adjusted = np.where(
            tested, multipletests(np.where(tested, p, 1.0), alpha=plan["alpha"], method="holm")[1], np.nan
        )
        for row, p_holm in zip(family, adjusted, strict=True):
            rows.append(row | {"p_holm": p_holm, "verdict": _verdict(row, p_holm, plan)})
    return pd.DataFrame(rows)


def _flattering(runs: pd.DataFrame, method: str, plan: dict[str, Any]) -> dict[str, float]:
    """Beside a held-out lead, the same lead on the mean of every seed (those the search read too), labelled:
    ``all_seeds_lead`` and its s.e. (none for another score)."""
    if plan["score"] != HELD_OUT_SCORE:
        return {}
    differences = paired_differences(runs, method, plan["baseline"], SCORE)
    return {"all_seeds_lead": differences.mean(), "all_seeds_lead_se": differences.sem()}


def _verdict(row: dict[str, Any], p_holm: float, plan: dict[str, Any]) -> str:
    """Leads or trails by the lead (Holm p < alpha), or no lead beyond the noise, with the lead the planned seeds
    detect (fixed by the plan, not by the data)."""
    if not np.isfinite(p_holm):
        planned = _cell(plan, row["budget"], row["method"])["seeds"]
        if planned == 0:
            return "not run: the plan's compute could not afford it"
        return f"not finished: {row['seeds']} of {planned} seeds" if row["seeds"] else "not run yet"
    if p_holm < plan["alpha"]:
        return f"{'leads' if row['lead'] > 0 else 'trails'} by {abs(row['lead']):.3f} ± {row['lead_se']:.3f}"
    return f"no lead beyond the noise (power {plan['power']:g} to detect {row['planned_detectable_lead']:.3f})"


def _plain(value: Any) -> Any:
    """JSON-ready: numpy scalars as Python numbers, NaN as None."""
    if isinstance(value, (np.integer, np.floating)):
        value = value.item()
    return None if isinstance(value, float) and math.isnan(value) else value
