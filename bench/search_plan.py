"""A strategy comparison planned before it runs (:mod:`bench.comparison.plan`), in three steps:

1. a pilot on seeds of their own, every method at every budget (``bench/search_efficiency.py --first-seed 0
   --quality-output pilot_quality.csv``);
2. ``plan``: the seeds each comparison needs from the pilot's noise and costs; it writes ``plan.json`` with the
   commands of the confirmatory runs (seeds from ``--first-seed``), committed before they run;
3. ``verdicts``: the confirmatory runs' leads over the baseline (random search unless ``plan --baseline`` names
   another method), Holm-adjusted per budget, as a CSV, a markdown table and a figure (each method's lead with its
   95 % interval, per budget).

On a real table the score is the held-out true share (``bench.comparison.plan.score_of``). A plan
committed on such a table with the flattering ``true_share`` is decided again with ``redecide``: the plan re-sized
on the held-out score from the same pilot and seeds (``held_out_plan``), its committed runs judged by it, and the
re-decision recorded in the folder's manifest (``redecided``: the command, the commit, the date, the verdicts that
moved)::

    python bench/search_plan.py redecide --plan results/search_hedge_check/plan.json \
        --pilot results/search_hedge_pilot/table.csv --quality results/search_hedge_check/quality.csv \
        --output results/search_hedge_check/verdicts.csv

    python bench/search_plan.py plan --pilot results/search_comparison/pilot_quality.csv --problem surrogate \\
        --methods random smac botorch --budgets 30 60 120 240 --min-lead 0.02 --core-hours 4 \\
        --output results/search_comparison/plan.json
    python bench/search_plan.py verdicts --plan results/search_comparison/plan.json \\
        --quality results/search_comparison/quality.csv --output results/search_comparison/verdicts.csv \\
        --figure docs/assets/search_comparison.png
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path

import numpy as np
import pandas as pd
from matplotlib.figure import Figure
from scipy import stats

from bench.comparison.methods import METHODS
from bench.comparison.plan import (
    BASELINE,
    HELD_OUT_SCORE,
    held_out_plan,
    make_plan,
    planned_seeds,
    score_of,
    verdicts,
)
from bench.evidence.results import format_verdicts, read_manifest, source_commit
from fairnas.benchmarks.problems import PROBLEMS
from fairnas.io import write_json_atomic, write_text_atomic

RUN = "PYTHONHASHSEED=0 OMP_NUM_THREADS=1 python bench/search_efficiency.py"
WORK_DIR = "outputs/search_comparison"
"""Where the confirmatory runs keep their searches unless ``plan --work-dir`` says otherwise."""


def confirmatory_commands(plan: dict, problem: str, work_dir: str = WORK_DIR) -> list[str]:
    """The ``bench/search_efficiency.py`` command of each (method, budget) the plan runs, on its planned seeds."""
    commands = []
    for cell in plan["cells"]:
        seeds = planned_seeds(plan, cell["budget"], cell["method"])
        if not seeds:  # the plan could not afford this cell
            continue
        epochs = cell["budget"] * plan["max_budget"]
        commands.append(
            f"{RUN} --problem {problem} --methods {cell['method']} --total-budget {epochs} "
            f"--first-seed {seeds[0]} --seeds {len(seeds)} --work-dir {work_dir}/{cell['method']}_{epochs} "
            f"--quality-output {work_dir}/quality_{cell['method']}_{epochs}.csv"
        )
    return commands


def lead_figure(table: pd.DataFrame, plan: dict) -> Figure:
    """Each method's true-share lead over the plan's baseline with its 95 % t-interval, per budget (log axis)."""
    baseline = METHODS[plan["baseline"]].label
    figure = Figure(figsize=(7, 4))
    axis = figure.subplots()
    offsets = np.linspace(-0.06, 0.06, len(plan["methods"]))
    for offset, method in zip(offsets, plan["methods"], strict=True):
        rows = table[table["method"] == method].sort_values("budget")
        half = stats.t.ppf(0.975, np.maximum(rows["seeds"] - 1, 1)) * rows["lead_se"]
        x = rows["budget"] * np.exp(offset)
        axis.errorbar(x, rows["lead"], yerr=half, marker="o", capsize=3, label=METHODS[method].label)
    axis.axhline(0.0, color="black", linewidth=0.8)
    for sign in (1, -1):
        axis.axhline(sign * plan["min_lead"], color="grey", linestyle=":", linewidth=0.8)
    axis.set_xscale("log")
    axis.set_xticks(plan["budgets_full_trials"], [str(b) for b in plan["budgets_full_trials"]])
    axis.set_xlabel("full trials of compute")
    axis.set_ylabel(f"true share minus {baseline}'s")
    axis.set_title(f"{plan['problem']}: lead over {baseline} (95 % interval; dotted: ±{plan['min_lead']:g})")
    axis.legend(fontsize=8)
    figure.tight_layout()
    return figure


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    commands = parser.add_subparsers(dest="command", required=True)
    plan_parser = commands.add_parser("plan", help="size the comparison from a pilot; write plan.json")
    plan_parser.add_argument("--pilot", type=Path, required=True, help="the pilot's --quality-output CSV")
    plan_parser.add_argument("--problem", choices=list(PROBLEMS), default="surrogate")
    plan_parser.add_argument("--methods", nargs="+", required=True, choices=list(METHODS))
    plan_parser.add_argument("--baseline", default=BASELINE, choices=list(METHODS), help="one of --methods")
    plan_parser.add_argument("--budgets", nargs="+", type=int, required=True, help="full trials of compute")
    plan_parser.add_argument("--min-lead", type=float, default=0.02, help="smallest lead in true share to detect")
    plan_parser.add_argument("--alpha", type=float, default=0.05)
    plan_parser.add_argument("--power", type=float, default=0.8)
    plan_parser.add_argument("--core-hours", type=float, required=True, help="compute the confirmatory runs may use")
    plan_parser.add_argument("--first-seed", type=int, default=1000, help="the confirmatory runs' first seed")
    plan_parser.add_argument("--output", type=Path, required=True)
    plan_parser.add_argument("--work-dir", default=WORK_DIR, help="the confirmatory runs' folder")
    verdict_parser = commands.add_parser("verdicts", help="judge the confirmatory runs by the plan")
    redecide_parser = commands.add_parser(
        "redecide", help="decide a real-table plan's committed runs again on the held-out score"
    )
    for sub in (verdict_parser, redecide_parser):
        sub.add_argument("--plan", type=Path, required=True)
        sub.add_argument("--quality", type=Path, nargs="+", required=True, help="--quality-output CSVs")
        sub.add_argument("--output", type=Path, required=True, help="verdicts CSV (a .md table beside it)")
        sub.add_argument("--figure", type=Path)
    redecide_parser.add_argument("--pilot", type=Path, required=True, help="the pilot the plan was sized from")
    args = parser.parse_args(argv)

    if args.command == "plan":
        if not args.pilot.is_file():
            parser.error(f"--pilot {args.pilot} is not a file")
        if args.baseline not in args.methods:
            parser.error(f"--methods must include the baseline {args.baseline} (every comparison is against it)")
        if not (args.min_lead > 0 and 0 < args.alpha < 1 and 0 < args.power < 1):
            parser.error("--min-lead must be > 0, --alpha and --power in (0, 1)")
        problem = PROBLEMS[args.problem]()
        pilot = pd.read_csv(args.pilot)
        if args.first_seed <= pilot["seed"].max():
            parser.error(f"--first-seed {args.first_seed} overlaps the pilot's seeds (up to {pilot['seed'].max()})")
        try:
            plan = make_plan(
                pilot,
                problem=problem.name,
                reference_point=problem.reference_point,
                max_hypervolume=float(problem.max_hypervolume or np.nan),
                methods=args.methods,
                budgets=args.budgets,
                max_budget=int(problem.max_budget),
                min_lead=args.min_lead,
                alpha=args.alpha,
                power=args.power,
                core_hours=args.core_hours,
                first_seed=args.first_seed,
                baseline=args.baseline,
            )
        except ValueError as error:
            parser.error(str(error))
        plan["commands"] = confirmatory_commands(plan, args.problem, args.work_dir)
        write_json_atomic(args.output, plan)
        print(pd.DataFrame(plan["cells"]).to_string(index=False))
        return

    plan = read_plan(parser, args.plan)
    score = HELD_OUT_SCORE if args.command == "redecide" else plan["score"]
    quality = read_quality(parser, args.quality, score)
    if args.command == "redecide":
        before = pd.read_csv(args.output) if args.output.is_file() else None
        try:
            plan = held_out_plan(plan, read_quality(parser, [args.pilot], score, "--pilot"))
        except ValueError as error:
            parser.error(str(error))
    elif plan["score"] != score_of(plan["problem"]):
        parser.error(
            f"--plan {args.plan} decides {plan['problem']} on {plan['score']}, which flatters a search on a real "
            f"table; decide it on {HELD_OUT_SCORE} with: bench/search_plan.py redecide --pilot <its pilot CSV> ..."
        )
    table = verdicts(plan, quality)
    write_text_atomic(args.output, table.to_csv(index=False))
    markdown = format_verdicts(table, plan)
    write_text_atomic(args.output.with_suffix(".md"), markdown + "\n")
    print(markdown)
    if args.command == "redecide":
        record_redecision(args, plan, before, table, argv)
    if args.figure is not None:
        lead_figure(table, plan).savefig(args.figure, dpi=100)


def read_plan(parser: argparse.ArgumentParser, path: Path) -> dict:
    """The plan at ``path``, or a one-line error naming the file."""
    try:
        plan = json.loads(path.read_text())
    except (OSError, json.JSONDecodeError) as error:
        parser.error(f"--plan {path}: not a readable plan.json ({error})")
    missing = sorted({"problem", "score", "baseline", "methods", "cells", "budgets_full_trials"} - set(plan))
    if missing:
        parser.error(f"--plan {path} lacks {missing}: not a plan written by bench/search_plan.py plan")
    return plan


def read_quality(parser: argparse.ArgumentParser, paths: Sequence[Path], score: str, option: str = "--quality"):
    """The answer-quality rows of ``paths`` (``--quality-output`` CSVs), or a one-line error naming the file that
    is missing or lacks a column (``score`` among them)."""
    frames = []
    for path in paths:
        if not path.is_file():
            parser.error(f"{option} {path} is not a file")
        frame = pd.read_csv(path)
        missing = sorted({"method", "seed", "budget", score} - set(frame.columns))
        if missing:
            parser.error(f"{option} {path} lacks the columns {missing}: not a --quality-output CSV of this problem")
        frames.append(frame)
    return pd.concat(frames, ignore_index=True)


def record_redecision(args: argparse.Namespace, plan: dict, before, table: pd.DataFrame, argv) -> None:
    """Add to the manifest of the verdicts' folder what a re-decision did: the command, the commit, the date, the
    score and every verdict that moved."""
    folder = args.output.parent
    manifest = read_manifest(folder)
    keys = zip(before["budget"], before["method"], strict=True) if before is not None else ()
    old = {} if before is None else dict(zip(keys, before["verdict"], strict=True))
    moved = {
        f"{row.method} at {row.budget}": f"{old[(row.budget, row.method)]} -> {row.verdict}"
        for row in table.itertuples()
        if old.get((row.budget, row.method), row.verdict) != row.verdict
    }
    command = " ".join(["python bench/search_plan.py", *(argv if argv is not None else sys.argv[1:])])
    manifest.setdefault("redecided", []).append(
        {
            "file": args.output.name,
            "score": plan["score"],
            "sized_on": plan["sized_on"],
            "from": [str(path) for path in args.quality],
            "pilot": str(args.pilot),
            "command": command,
            "commit": source_commit(),
            "date": datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"),
            "verdicts_moved": moved,
        }
    )
    write_json_atomic(folder / "manifest.json", manifest)


if __name__ == "__main__":
    main()
