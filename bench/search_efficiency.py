"""Search efficiency: hypervolume at equal consumed compute for every search strategy, side by side.

The methods are :mod:`bench.comparison.methods`', the problems :mod:`fairnas.benchmarks.problems`' and, trained
live, ``faces``: ``TrainingTarget`` on the paper's DPN space (searchspaces/dpn_paper.yaml) with the small
synthetic-face set of ``experiment=smoke`` on the CPU, budgets 1 to 4 epochs with eta = 2, objectives validation
error and rank disparity; reference point (1, 1): error 1 is chance, a rank disparity of one identity is the worst
the front is credited for. Every run stops at one consumed-compute budget (:mod:`bench.comparison.runner`): on
``faces`` the epochs each call trained are read from its trial record (``EpochsTrained``; a trial that crashes
mid-training records none and costs 0), on the other problems nothing trains and the same rule is applied to the
calls. The table reports per method the hypervolume at the budget and the budget to reach random search
(:mod:`bench.comparison.method_summary`); on a noisy table or a surrogate also the true quality of the answers
(:mod:`fairnas.benchmarks.answer_quality`) and the gap they close against random search. ``--figure`` draws the
hypervolume (as a share of the maximum where known) against consumed epochs, mean ± standard error over seeds, one
panel per problem.

    PYTHONHASHSEED=0 python bench/search_efficiency.py --problem analytic momf_branin_currin momf_park table \\
        --seeds 10 --output search_efficiency.csv --figure docs/assets/search_efficiency.png
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pandas as pd
import torch

from bench.comparison.command_line import parse_shard, quiet_training_logs
from bench.comparison.figure import efficiency_figure
from bench.comparison.method_summary import answer_quality, format_quality, format_table, run_volumes, summarize
from bench.comparison.methods import DEFAULT_METHODS, METHODS
from bench.comparison.runner import FINAL, benchmark
from fairnas.benchmarks import problems as blackboxes
from fairnas.benchmarks.compute_meter import CostMeter
from fairnas.benchmarks.problems import Problem
from fairnas.benchmarks.tables import names as table_names
from fairnas.config import SPACES_DIR
from fairnas.io import write_text_atomic
from fairnas.search import load_space
from fairnas.search.final import ANSWERS
from fairnas.search.settings import FinalSettings
from fairnas.search.trial import Target
from fairnas.training.search_target import TRIAL_FILE, TrainingTarget, trial_dir

FACE_OVERRIDES = (
    "experiment=smoke",
    "trainer=cpu",
    "logger=none",
    "trainer.enable_progress_bar=false",
    "trainer.enable_model_summary=false",
    "data.eval_batch_size=64",
    "embedding_dim=64",
)


class EpochsTrained:
    """Epochs a call of a ``TrainingTarget`` trained, read from its run's ``trial.json`` (``epochs_run``).

    Each run is charged once: a later call that reads a finished run back costs nothing, and so does a call that
    crashed before its run finished. Reading the record rather than counting epochs on disk keeps the charges right
    when a search resumes, since the runs of the interrupted invocation are already there.
    """

    def __init__(self, trials_dir: str | Path):
        self.trials_dir = Path(trials_dir)
        self._charged: set[Path] = set()

    def __call__(self, config: dict[str, Any], seed: int, budget: float) -> float:
        record = trial_dir(self.trials_dir, config, seed, budget) / TRIAL_FILE
        if record in self._charged or not record.is_file():
            return 0.0
        self._charged.add(record)
        return float(json.loads(record.read_text())["epochs_run"])


def face_problem(
    name: str = "faces",
    overrides: Sequence[str] = FACE_OVERRIDES,
    reference_point: tuple[float, float] = (1.0, 1.0),
    default_total_budget: float = 32,
    max_budget: float = 4,
    space_file: Path = SPACES_DIR / "dpn_paper.yaml",
    max_hypervolume: float | None = None,
) -> Problem:
    """A DPN space (default: the paper's) trained live on synthetic faces with ``overrides`` (default:
    ``experiment=smoke``)."""
    space = load_space(space_file)
    objectives = ("error", "rank_disparity")

    def make_target(run_dir: Path, continuing: bool, seed: int) -> tuple[Target, CostMeter]:
        target = TrainingTarget(
            space.overrides,
            objectives=objectives,
            trials_dir=run_dir / "trials",
            max_budget=max_budget,
            base_overrides=overrides,
            continue_across_fidelities=continuing,
        )
        return target, EpochsTrained(run_dir / "trials")

    return Problem(
        name=name,
        space=space,
        objectives=objectives,
        min_budget=1,
        max_budget=max_budget,
        eta=2,
        reference_point=reference_point,
        default_total_budget=default_total_budget,
        make_target=make_target,
        max_hypervolume=max_hypervolume,
    )


# the blackboxes in their order, ``faces`` before ``table`` (the order ``--problem all`` runs them in)
PROBLEMS = {name: factory for name, factory in blackboxes.PROBLEMS.items() if name != "table"}
PROBLEMS |= {"faces": face_problem, "table": blackboxes.PROBLEMS["table"]}


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--problem", nargs="+", choices=[*PROBLEMS, "all"], default=["analytic"])
    parser.add_argument("--seeds", type=int, default=5, help="seeds F .. F+N-1 per method (F: --first-seed)")
    parser.add_argument("--first-seed", type=int, default=0, help="the first seed (a pilot's and a plan's differ)")
    parser.add_argument(
        "--shard",
        type=parse_shard,
        default=(0, 1),
        help="K/N: run only seeds s with s %% N == K (N processes on one --work-dir; a run without --shard then "
        "reads every finished run back and reports them all)",
    )
    parser.add_argument(
        "--total-budget",
        type=float,
        nargs="+",
        help="consumed epochs per run, one or more budgets (default: faces 32, table 30 max-budget trials, others 400)",
    )
    parser.add_argument("--methods", nargs="+", choices=list(METHODS), default=list(DEFAULT_METHODS))
    parser.add_argument("--final-top-k", type=int, default=FINAL.top_k, help="the final stage's candidates")
    parser.add_argument("--final-seeds", type=int, default=FINAL.seeds, help="the final stage's seeds per candidate")
    parser.add_argument("--final-answer", choices=ANSWERS, default=FINAL.answer, help="the final stage's answer")
    parser.add_argument("--output", type=Path, help="CSV of every trial of every run")
    parser.add_argument("--quality-output", type=Path, help="CSV of every run's answer quality (noisy tables)")
    parser.add_argument("--runs-output", type=Path, help="CSV of every run's hypervolume (and share) at the budget")
    parser.add_argument("--work-dir", type=Path, help="keep the searches here (default: a temporary directory)")
    parser.add_argument("--figure", type=Path, help="PNG of hypervolume against consumed epochs, a panel per problem")
    args = parser.parse_args(argv)
    if args.seeds < 1 or args.first_seed < 0:
        parser.error(f"--seeds must be >= 1 and --first-seed >= 0, got {args.seeds} and {args.first_seed}")
    seeds = range(args.first_seed, args.first_seed + args.seeds)
    try:
        final = FinalSettings(top_k=args.final_top_k, seeds=args.final_seeds, answer=args.final_answer)
        FinalSettings.from_mapping(dataclasses.asdict(final))
    except ValueError as error:
        parser.error(str(error))
    if os.environ.get("PYTHONHASHSEED") != "0":
        print("note: set PYTHONHASHSEED=0 for repeatable SMAC runs", file=sys.stderr)
    quiet_training_logs()
    # The tiny face models gain nothing from intra-op threads, and threads thrash when the cores are shared.
    torch.set_num_threads(1)

    selected = [name for name in PROBLEMS if {name, "all"} & set(args.problem)]
    if "all" in args.problem and blackboxes.SURROGATE_TABLE not in table_names():
        print(f"--problem all: surrogate skipped, its table {blackboxes.SURROGATE_TABLE} is not built", file=sys.stderr)
        selected.remove("surrogate")
    try:
        problems = [PROBLEMS[name]() for name in selected]
    except ValueError as error:  # a surrogate whose table is missing
        parser.error(str(error))
    all_runs, all_quality, all_volumes, figure_runs, figure_budgets = [], [], [], [], []
    with tempfile.TemporaryDirectory(prefix="search_efficiency_") as scratch:
        work_dir = args.work_dir or Path(scratch)
        for problem in problems:
            budgets = args.total_budget or [problem.default_total_budget]
            for total_budget in budgets:
                runs = benchmark(
                    problem,
                    methods=args.methods,
                    seeds=[seed for seed in seeds if seed % args.shard[1] == args.shard[0]],
                    total_budget=total_budget,
                    work_dir=work_dir if len(budgets) == 1 else work_dir / f"budget{total_budget:g}",
                    final=final,
                )
                searched = runs[runs["stage"] == "search"]
                summary = summarize(searched, total_budget, problem.max_hypervolume)
                volumes = run_volumes(searched, total_budget, problem.max_hypervolume)
                all_volumes.append(volumes.assign(problem=problem.name, budget=total_budget))
                print(format_table(summary, problem, total_budget), flush=True)
                if problem.truth is not None:
                    quality_runs = answer_quality(runs, problem).assign(problem=problem.name, budget=total_budget)
                    all_quality.append(quality_runs)
                    # a surrogate's answers are judged at its means: it has no held-out seeds to report
                    held_out_too = quality_runs["heldout_true_share"].notna().any()
                    for held_out in (False, True) if held_out_too else (False,):
                        print("\n" + format_quality(quality_runs, problem, total_budget, held_out), flush=True)
                    if args.quality_output is not None:  # after every budget: a long run keeps what it finished
                        write_text_atomic(
                            args.quality_output, pd.concat(all_quality, ignore_index=True).to_csv(index=False)
                        )
                all_runs.append(runs.assign(total_budget=total_budget))
            figure_runs.append(runs)  # the problem's largest budget, the last one run
            figure_budgets.append(budgets[-1])
    if args.output is not None:
        write_text_atomic(args.output, pd.concat(all_runs, ignore_index=True).to_csv(index=False))
    if args.runs_output is not None:
        write_text_atomic(args.runs_output, pd.concat(all_volumes, ignore_index=True).to_csv(index=False))
    if args.quality_output is not None and all_quality:
        write_text_atomic(args.quality_output, pd.concat(all_quality, ignore_index=True).to_csv(index=False))
    if args.figure is not None:
        labels = {name: method.label for name, method in METHODS.items()}
        efficiency_figure(problems, figure_runs, figure_budgets, labels).savefig(args.figure, dpi=100)
    print(f"load average at the end (1/5/15 min): {' '.join(f'{load:.1f}' for load in os.getloadavg())}")


if __name__ == "__main__":
    main()
