"""Would a model's estimate choose a better answer than the observed values, from the same trials?
(``bench.comparison.answer_estimates``.) Reads the runs that ``bench/search_efficiency.py --work-dir`` kept
(``<work dir>/[budget<N>/]<problem>/<method>/seed<s>/consumed.csv``), judges each run's answer by every estimator at
the problem's truth, and prints each estimator's true share less the observed answer's, paired by run::

    PYTHONHASHSEED=0 OMP_NUM_THREADS=1 python bench/search_efficiency.py --problem surrogate --first-seed 0 \\
        --seeds 48 --total-budget 120 240 480 --methods random nsga2 --work-dir outputs/selection/surrogate
    OMP_NUM_THREADS=1 python bench/answer_selection.py --runs outputs/selection/surrogate --problem surrogate \\
        --output results/search_selection_pilot/surrogate.csv

Runs with the final stage are left out: their answer is already the front of fresh re-training runs.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from pathlib import Path

import pandas as pd

from bench.comparison.answer_estimates import ESTIMATORS, estimated_answer
from fairnas.benchmarks.answer_quality import evaluated, quality
from fairnas.benchmarks.problems import PROBLEMS, Problem
from fairnas.io import write_csv_atomic


def judged_runs(runs: Path, problem: Problem, total_budget: float | None) -> pd.DataFrame:
    """One row per run without the final stage: method, seed, budget (from a ``budget<N>`` folder, else
    ``total_budget``), the true share of every estimator's answer and of everything the run trained."""
    assert problem.truth is not None, f"{problem.name} has no truth to judge answers at"
    rows = []
    for path in sorted(runs.rglob("consumed.csv")):
        method, seed = path.parent.parent.name, int(path.parent.name.removeprefix("seed"))
        trials = pd.read_csv(path)
        if (trials["stage"] == "final").any():
            continue
        budgets = [float(part.removeprefix("budget")) for part in path.parts if part.startswith("budget")]
        row = {"method": method, "seed": seed, "budget": budgets[-1] if budgets else total_budget}
        objectives, max_budget = problem.objectives, problem.max_budget
        trained = evaluated(trials, objectives, max_budget)
        answers = {
            name: estimated_answer(trials, objectives, max_budget, problem.space.configspace, name)
            for name in ESTIMATORS
        }
        for name, chosen in {"evaluated": trained, **answers}.items():
            judged = quality(chosen, problem.truth, problem.reference_point, problem.max_hypervolume)
            row[name] = judged["true_share"]
        rows.append(row)
    return pd.DataFrame(rows)


def summary(judged: pd.DataFrame) -> pd.DataFrame:
    """Per method and budget: each estimator's mean true share less the observed answer's, with its s.e. over runs."""
    rows = []
    for (method, budget), runs in judged.groupby(["method", "budget"]):
        row = {"method": method, "budget": budget, "runs": len(runs), "observed": runs["observed"].mean()}
        for estimator in ("evaluated", *ESTIMATORS[1:]):
            lead = runs[estimator] - runs["observed"]
            row[estimator] = f"{lead.mean():+.3f} ± {lead.sem():.3f}"
        rows.append(row)
    return pd.DataFrame(rows)


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=Path, required=True, help="a bench/search_efficiency.py --work-dir")
    parser.add_argument("--problem", choices=list(PROBLEMS), default="surrogate")
    parser.add_argument("--total-budget", type=float, help="the runs' budget when their folders do not name it")
    parser.add_argument("--output", type=Path, help="CSV: one row per run, the true share of each answer")
    args = parser.parse_args(argv)
    if not args.runs.is_dir():
        parser.error(f"--runs {args.runs} is not a folder")
    judged = judged_runs(args.runs, PROBLEMS[args.problem](), args.total_budget)
    if judged.empty:
        parser.error(f"no finished run without the final stage under {args.runs}")
    if args.output is not None:
        write_csv_atomic(judged, args.output)
    print(summary(judged).round(3).to_markdown(index=False))


if __name__ == "__main__":
    main()
