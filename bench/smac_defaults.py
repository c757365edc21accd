"""SMAC's defaults, measured: one candidate change at a time to fairnas's SMAC search (``smac`` of
``bench/search_efficiency.py``: MultiFidelityFacade, Hyperband, ParEGO, continuing promotions) against the current
defaults, seeds paired, on the problems of that benchmark at its equal consumed budget.

Candidates (``CANDIDATES``): the initial design size (SMAC's: 10 random configurations per hyperparameter, at most a
quarter of the expected trials), the share of interleaved random configurations (the facade's random design
probability, 0.2), ParEGO's rho (Knowles 2006, "ParEGO: a hybrid algorithm with on-line landscape approximation for
expensive multiobjective optimization problems": 0.05), the objective bounds the costs are normalised with before
ParEGO (SMAC 2.x: min-max over every successful trial of every budget, recomputed at each tell; candidate: over the
trials the surrogate is fitted on, those of its budget), the Hyperband layout (eta, the search's minimum budget; the
problem's fidelity mapping is unchanged), and how often ParEGO draws its weights (SMAC: once per surrogate fit, which
serves 8 proposals; ParEGO: one weight vector per proposal). A continued trial needs no candidate: it is reported at
its higher budget with the value training from scratch would give (the targets here are deterministic in the
budget), so the surrogate is told the same either way and ``smac`` and ``smac_scratch`` propose the same
configurations in the same order; continuing changes only what the trials cost.

SearchSettings fields are changed through ``run_method``'s settings; SMAC internals fairnas does not expose are
patched on the facade for the duration of the run. A candidate is adopted only if it helps on every problem: its
mean paired difference from the default is positive by more than one standard error on each.

    PYTHONHASHSEED=0 python bench/smac_defaults.py --problem analytic momf_branin_currin momf_park table \\
        --seeds 10 --work-dir outputs/search_efficiency --output smac_defaults.csv
"""

from __future__ import annotations

import argparse
import contextlib
import math
import os
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any
from unittest import mock

import numpy as np
import pandas as pd
import torch
from smac import MultiFidelityFacade
from smac.main.config_selector import ConfigSelector
from smac.random_design.probability_design import ProbabilityRandomDesign
from smac.runhistory.encoder import RunHistoryLogScaledEncoder
from smac.runhistory.enumerations import StatusType

from bench.comparison.command_line import quiet_training_logs
from bench.comparison.method_summary import hypervolume_at
from bench.comparison.runner import consumed_curve, run_method
from fairnas.benchmarks.problems import PROBLEMS, Problem
from fairnas.io import write_csv_atomic


@dataclass(frozen=True)
class Candidate:
    """A change to the SMAC search: ``settings`` override SearchSettings; ``patch()`` changes SMAC internals."""

    description: str
    settings: Mapping[str, Any] = field(default_factory=dict)
    patch: Callable[[], contextlib.AbstractContextManager] = contextlib.nullcontext


def random_design(probability: float) -> contextlib.AbstractContextManager:
    """The facade interleaves a random configuration among the acquisition's with ``probability``."""
    return mock.patch.object(
        MultiFidelityFacade,
        "get_random_design",
        staticmethod(lambda scenario: ProbabilityRandomDesign(probability=probability, seed=scenario.seed)),
    )


def weights_per_proposal() -> contextlib.AbstractContextManager:
    """Refit the surrogate, and so draw new ParEGO weights, for every proposal (SMAC: every 8)."""
    return mock.patch.object(
        MultiFidelityFacade,
        "get_config_selector",
        staticmethod(lambda scenario: ConfigSelector(scenario, retrain_after=1)),
    )


class ModelBudgetBoundsEncoder(RunHistoryLogScaledEncoder):
    """SMAC's encoder, normalising the costs with the bounds of the trials it encodes (the surrogate's budget)
    instead of those of every trial."""

    def _build_matrix(self, trials, store_statistics: bool = False):
        costs = np.array([value.cost for value in trials.values() if value.status == StatusType.SUCCESS], dtype=float)
        every_trial = self.runhistory._objective_bounds
        if costs.ndim == 2 and len(costs):
            self.runhistory._objective_bounds = list(zip(costs.min(axis=0), costs.max(axis=0), strict=True))
        try:
            return super()._build_matrix(trials, store_statistics)
        finally:
            self.runhistory._objective_bounds = every_trial


def model_budget_bounds() -> contextlib.AbstractContextManager:
    return mock.patch.object(MultiFidelityFacade, "get_runhistory_encoder", staticmethod(ModelBudgetBoundsEncoder))


DEFAULT = "default"
CANDIDATES = {
    DEFAULT: Candidate("current defaults"),
    "initial_design_5": Candidate("initial design of 5 configurations", {"initial_design_size": 5}),
    "random_share_0": Candidate("no interleaved random configurations (0.2)", patch=partial(random_design, 0.0)),
    "random_share_0.5": Candidate("half the configurations random (0.2)", patch=partial(random_design, 0.5)),
    "rho_0.5": Candidate("ParEGO rho 0.5 (0.05)", {"options": {"rho": 0.5}}),
    "bounds_model_budget": Candidate(
        "normalise with the surrogate budget's trials (all trials)", patch=model_budget_bounds
    ),
    "weights_per_proposal": Candidate("new ParEGO weights every proposal (every 8)", patch=weights_per_proposal),
    "eta_3": Candidate("Hyperband eta 3 (2)", {"eta": 3}),
    "min_budget_2": Candidate("search from 2 epochs (1)", {"min_budget": 2}),
}


def run_candidate(
    problem: Problem, name: str, *, seeds: Sequence[int], total_budget: float, work_dir: Path
) -> pd.DataFrame:
    """Hypervolume at ``total_budget`` and trials of each seed's SMAC search under candidate ``name``; the default
    runs are ``search_efficiency``'s ``smac`` runs (same folders, reused)."""
    candidate = CANDIDATES[name]
    method_dir = "smac" if name == DEFAULT else f"smac@{name}"
    rows = []
    for seed in seeds:
        start = time.perf_counter()
        run_dir = work_dir / problem.name / method_dir / f"seed{seed}"
        with candidate.patch():
            trials = run_method(
                problem, "smac", seed=seed, total_budget=total_budget, run_dir=run_dir, settings=candidate.settings
            )
        volume = hypervolume_at(consumed_curve(trials, problem), total_budget)
        at_max = int((trials["budget"] == problem.max_budget).sum())
        print(
            f"{problem.name} {name} seed {seed}: {len(trials)} trials ({at_max} at the maximum budget), "
            f"hypervolume {volume:.4f}, {time.perf_counter() - start:.0f} s",
            file=sys.stderr,
            flush=True,
        )
        rows.append(
            {
                "problem": problem.name,
                "candidate": name,
                "seed": seed,
                "hypervolume": volume,
                "trials": len(trials),
                "max_budget_trials": at_max,
            }
        )
    return pd.DataFrame(rows)


def compare(results: pd.DataFrame, max_hypervolume: float | None = None) -> pd.DataFrame:
    """Per candidate of one problem: hypervolume (mean, s.e.; share of the maximum when known), and its difference
    from the default paired by seed (mean, s.e., margin in s.e., seeds ahead)."""
    volumes = results.pivot(index="seed", columns="candidate", values="hypervolume")
    volumes = volumes[[name for name in CANDIDATES if name in volumes.columns]]
    scale = max_hypervolume or math.nan
    rows = []
    for name in volumes.columns:
        difference = (volumes[name] - volumes[DEFAULT]).dropna()
        sem = difference.sem() if len(difference) > 1 else math.nan
        rows.append(
            {
                "candidate": name,
                "seeds": int(volumes[name].notna().sum()),
                "hv_mean": volumes[name].mean(),
                "hv_sem": volumes[name].sem(),
                "share_mean": volumes[name].mean() / scale,
                "share_sem": volumes[name].sem() / scale,
                "diff_mean": difference.mean(),
                "diff_sem": sem,
                "margin": difference.mean() / sem if sem and sem > 0 else math.nan,
                "ahead": int((difference > 0).sum()),
                "max_budget_trials": results.loc[results["candidate"] == name, "max_budget_trials"].mean(),
            }
        )
    return pd.DataFrame(rows)


def format_comparison(comparison: pd.DataFrame, problem: Problem, total_budget: float) -> str:
    """A markdown table of ``compare``'s rows."""
    lines = [
        f"{problem.name}: SMAC hypervolume at {total_budget:g} consumed epochs, mean ± standard error over "
        f"{comparison['seeds'].max()} seeds",
        "",
        "| candidate | hypervolume | share of max | minus default (paired) | seeds ahead | max-budget trials |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    for row in comparison.itertuples():
        paired = (
            "" if row.candidate == DEFAULT else (f"{row.diff_mean:+.4f} ± {row.diff_sem:.4f} ({row.margin:+.1f} s.e.)")
        )
        share = "" if math.isnan(row.share_mean) else f"{row.share_mean:.3f} ± {row.share_sem:.3f}"
        lines.append(
            f"| {row.candidate} | {row.hv_mean:.4f} ± {row.hv_sem:.4f} | {share} | {paired} | "
            f"{'' if row.candidate == DEFAULT else f'{row.ahead}/{row.seeds}'} | {row.max_budget_trials:.1f} |"
        )
    return "\n".join(lines)


def verdicts(comparisons: Mapping[str, pd.DataFrame]) -> str:
    """Per candidate: its margin over the default on each problem and whether it helps on every one (adopt)."""
    names = [name for name in CANDIDATES if name != DEFAULT]
    margins = {problem: table.set_index("candidate")["margin"] for problem, table in comparisons.items()}
    lines = ["| candidate | " + " | ".join(margins) + " | adopt |", "|" + " --- |" * (len(margins) + 2)]
    for name in names:
        values = [margins[problem].get(name, math.nan) for problem in margins]
        adopt = all(value > 1 for value in values)  # NaN (not run) compares False
        lines.append(
            f"| {name}: {CANDIDATES[name].description} | "
            + " | ".join(f"{value:+.1f} s.e." for value in values)
            + f" | {'yes' if adopt else 'no'} |"
        )
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--problem", nargs="+", choices=list(PROBLEMS), default=["analytic"])
    parser.add_argument("--candidates", nargs="+", choices=list(CANDIDATES), default=list(CANDIDATES))
    parser.add_argument("--seeds", type=int, default=10, help="seeds 0 .. N-1 per candidate")
    parser.add_argument("--total-budget", type=float, help="consumed epochs per run (default: the problem's)")
    parser.add_argument("--work-dir", type=Path, required=True, help="the searches (shared with search_efficiency)")
    parser.add_argument("--output", type=Path, help="CSV of every run's hypervolume")
    args = parser.parse_args(argv)
    if os.environ.get("PYTHONHASHSEED") != "0":
        print("note: set PYTHONHASHSEED=0 for repeatable SMAC runs", file=sys.stderr)
    quiet_training_logs()
    torch.set_num_threads(1)
    names = [DEFAULT, *(name for name in args.candidates if name != DEFAULT)]
    results, comparisons = [], {}
    for problem_name in args.problem:
        problem = PROBLEMS[problem_name]()
        total_budget = args.total_budget or problem.default_total_budget
        runs = pd.concat(
            [
                run_candidate(problem, name, seeds=range(args.seeds), total_budget=total_budget, work_dir=args.work_dir)
                for name in names
            ],
            ignore_index=True,
        )
        results.append(runs)
        comparisons[problem.name] = compare(runs, problem.max_hypervolume)
        print(format_comparison(comparisons[problem.name], problem, total_budget), "", sep="\n", flush=True)
    print(verdicts(comparisons))
    if args.output is not None:
        write_csv_atomic(pd.concat(results, ignore_index=True), args.output)


if __name__ == "__main__":
    main()
