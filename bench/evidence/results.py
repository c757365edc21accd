"""Results committed as data, and the docs' tables rendered from them.

Every folder under ``results/`` holds the small CSV tables of one measured run (no checkpoints) and a
``manifest.json`` that says how they were made: the command, the commit, the date, the machine, the wall time. The
docs' result tables are not written by hand: ``python -m bench.evidence.results render`` rewrites each block between
``<!-- results:NAME -->`` and ``<!-- /results:NAME -->`` of a page of :data:`PAGES` from its folder, and ``python -m
bench.evidence.results check`` exits 1 naming every block that differs from its data (``tests/test_results.py``
runs it on the repository, so the docs and the data cannot drift apart). A file a block cannot be rendered from is
refused in one line that names it.

``python -m bench.evidence.results collect-study <study folder> results/<name> --command "..."`` copies a finished
study's tables into a results folder and writes its manifest; ``python -m bench.evidence.results manifest
results/<name> --command "..."`` writes the manifest of a folder a benchmark wrote into (e.g.
``bench/search_efficiency.py --runs-output``). ``python -m bench.evidence.results redecide-study results/<name>``
decides a collected study's claims again under the current rule from its ``runs.csv``, without training
(:mod:`bench.evidence.redecide`), and records what it changed in the manifest.
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from bench.evidence.files import MANIFEST, REPOSITORY, Unreadable, read_csv, read_json, read_manifest, relative
from bench.evidence.gpu_check_report import gpu_check_table
from bench.evidence.overhead_report import training_overhead_table
from bench.evidence.redecide import RECORDED_COLUMNS, RULE, RUN_COLUMNS, redecide
from fairnas.groups import mean_se
from fairnas.io import write_csv_atomic, write_json_atomic, write_text_atomic
from fairnas.provenance import machine, source_commit
from fairnas.search.strategies import REGISTRY
from fairnas.study.claims import EXPLORATORY, HOLDS, PRIMARY
from fairnas.study.inference import ZERO_VARIANCE, min_seeds

STUDY_SEARCH_TABLES = ("trials", "final_trials", "final_front")
"""The search's own tables, kept as ``search_<name>.csv``."""


def study_tables() -> tuple[str, ...]:
    """The CSV tables of a study folder a results folder keeps: its claims and runs, and those its stages write (their
    registry, imported here: the stages import training, which rendering the README does not need)."""
    from fairnas.study.stages import STAGES

    return ("claims", "runs", *(table for stage in STAGES.values() for table in stage.tables))


def collect_study(
    study_dir: Path, target: Path, *, command: str, commit: str | None = None, time_logs: Sequence[Path] = ()
) -> dict:
    """Copy ``study_dir``'s tables into ``target`` and write its manifest; returns the manifest. The wall time and
    peak memory come from GNU time's ``-v`` output in ``time_logs`` (e.g. the study's log; one per invocation of a
    resumed study: their wall times summed, the largest peak) when given; the training minutes of each stage always
    come from the study's own records (:func:`training_minutes`)."""
    report = study_dir / "report.md"
    if not (study_dir / "claims.csv").is_file() or not report.is_file():
        raise FileNotFoundError(f"study: '{study_dir}' holds no finished study (claims.csv and report.md)")
    target.mkdir(parents=True, exist_ok=True)
    for name in study_tables():
        if (study_dir / f"{name}.csv").is_file():
            shutil.copy2(study_dir / f"{name}.csv", target / f"{name}.csv")  # keeps the time it was written
    for name in STUDY_SEARCH_TABLES:
        if (study_dir / "search" / f"{name}.csv").is_file():
            shutil.copy2(study_dir / "search" / f"{name}.csv", target / f"search_{name}.csv")
    return write_manifest(
        target,
        commands=[command],
        commit=commit,
        training_minutes=training_minutes(study_dir),
        **(_time_logs(time_logs) if time_logs else {}),
    )


def redecide_study(folder: Path, *, command: str, commit: str | None = None) -> dict:
    """Decide the claims of a collected study (``folder``: ``runs.csv``, ``claims.csv``, ``manifest.json``) again
    under the current rule from its runs, without training (:func:`bench.evidence.redecide.redecide`: every claim
    must first reproduce its recorded statistics), write ``claims.csv`` atomically and add to the manifest's
    ``redecided`` list what was done: the command, the commit, the date, the rule and every verdict that moved. The
    run's own fields stay as they were. Returns the manifest; a folder that holds no collected study is refused in
    one line naming what it lacks."""
    if not folder.is_dir():
        raise FileNotFoundError(f"'{folder}' is not a folder")
    lacking = [name for name in (MANIFEST, "claims.csv", "runs.csv") if not (folder / name).is_file()]
    if lacking:
        raise FileNotFoundError(
            f"'{folder}' holds no collected study: it has no {' or '.join(lacking)} (a study's results folder, written "
            "by python -m bench.evidence.results collect-study)"
        )
    manifest = read_manifest(folder)
    recorded = read_csv(folder / "claims.csv", RECORDED_COLUMNS)
    decided = redecide(read_csv(folder / "runs.csv", RUN_COLUMNS), recorded)
    before = dict(zip(recorded["id"], recorded["verdict"], strict=True))
    moved = {
        row.id: f"{before[row.id]} -> {row.verdict}" for row in decided.itertuples() if before[row.id] != row.verdict
    }
    write_csv_atomic(decided, folder / "claims.csv")
    manifest.setdefault("redecided", []).append(
        {
            "file": "claims.csv",
            "from": "runs.csv (no training)",
            "rule": RULE,
            "command": command,
            "commit": commit or source_commit(),
            "date": datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"),
            "verdicts_moved": moved,
        }
    )
    write_json_atomic(folder / MANIFEST, manifest)
    return manifest


TRAINED = re.compile(r"study (\w+): \S+ done in (\d+) s")
"""A run a study stage trained, as its log (``cli.log``) records it (:func:`fairnas.training.run_pool.train_all`)."""


def training_minutes(study_dir: Path) -> dict[str, float]:
    """Minutes of training per stage, summed over the runs the study trained: the search's trials and final stage
    from their ``wall_time_s``, every other stage's runs from the study log. A run a kill interrupted is not
    counted; a run read back was counted when it was trained."""
    seconds: dict[str, float] = {}
    log_file = study_dir / "cli.log"
    if log_file.is_file():
        for stage, run_seconds in TRAINED.findall(log_file.read_text(errors="replace")):
            seconds[stage] = seconds.get(stage, 0.0) + float(run_seconds)
    trials = [study_dir / "search" / f"{name}.csv" for name in ("trials", "final_trials")]
    search = sum(pd.read_csv(path)["wall_time_s"].sum() for path in trials if path.is_file())
    if search:
        seconds["search"] = float(search)
    return {stage: round(value / 60, 1) for stage, value in seconds.items()}


STRATEGIES = {
    "smac_ends": "SMAC, Hyperband's first and last brackets (default)",
    "smac": "SMAC, every Hyperband bracket",
    "smac_scratch": "SMAC, promoted configurations from scratch (the paper)",
    "random": "random search",
    "moasha": "MO-ASHA",
    "nsga2": "NSGA-II",
    "botorch": "BoTorch GP",
}
"""The strategy table's rows: method names of ``bench.comparison.methods`` (``bench/search_efficiency.py
--methods``) and how the strategy table (docs/search_benchmark.md) calls them."""


QUALITY_FILES = {
    "table_quality.csv": "embedded faces, noisy table",
}
"""The answer-quality files of ``bench/search_efficiency.py --quality-output`` the strategy table reads, relative to
its folder, each one problem's column pair (without and with the final stage); a file that is not there adds no
columns. A file in a subfolder was measured apart, and that subfolder's own manifest says how. The surrogate's
strategies are compared in their own block (:func:`comparison_table`), planned in advance over several budgets."""


def strategy_table(folder: Path) -> str:
    """The strategy table: per strategy, the analytic problem's share of the maximum hypervolume and, per
    answer-quality file (:data:`QUALITY_FILES`, real tables), the held-out true share of its answers without and
    with the final stage, the all-seed share beside it (mean ± s.e. over seeds)."""
    analytic = read_csv(folder / "analytic_runs.csv", ("method", "seed", "share"))
    present = [name for name in QUALITY_FILES if (folder / name).is_file()]
    qualities = {QUALITY_FILES[name]: read_csv(folder / name, ("method", "seed", "true_share")) for name in present}
    sources = dict.fromkeys([folder, *((folder / name).parent for name in present)])

    def cell(frame: pd.DataFrame, method: str, column: str) -> str:
        values = frame.loc[frame["method"] == method, column]
        return "" if values.empty else "{:.3f} ± {:.3f}".format(*mean_se(values))

    def held_out(frame: pd.DataFrame) -> bool:
        """A real table's file: its verdicts are decided on held-out seeds."""
        return "heldout_true_share" in frame and bool(frame["heldout_true_share"].notna().any())

    def quality_cell(frame: pd.DataFrame, method: str) -> str:
        rows = frame[frame["method"] == method]
        if rows.empty:
            return ""
        if held_out(frame):  # the held-out share, the all-seed one beside it
            if rows["heldout_true_share"].isna().all():
                return f"no seed left unread ({cell(frame, method, 'true_share')} on all seeds)"
            return f"{cell(frame, method, 'heldout_true_share')} (on all seeds {cell(frame, method, 'true_share')})"
        share, gap = cell(frame, method, "true_share"), ""
        if share and "gap_closed" in frame and method != "random":  # random search is its zero
            gap = f" (gap closed {cell(frame, method, 'gap_closed')})"
        return share + gap

    header = [f"analytic ZDT1: share of max. hypervolume ({analytic['seed'].nunique()} seeds)"]
    for label, frame in qualities.items():
        score = "held-out true share" if held_out(frame) else "true share"
        header += [f"{label}: {score} of the answer ({frame['seed'].nunique()} seeds)", "with the final stage (3 x 2)"]
    rows = [f"| strategy | {' | '.join(header)} |", "|" + " --- |" * (len(header) + 1)]
    for method, name in STRATEGIES.items():
        cells = [cell(analytic, method, "share")]
        for frame in qualities.values():
            cells += [quality_cell(frame, method), quality_cell(frame, f"{method}+final")]
        if any(cells):  # a strategy no file measured has no row
            rows.append(f"| {name} | {' | '.join(cells)} |")
    return "\n".join([*rows, "", "\n\n".join(_data_line(source) for source in sources)])


def _data_line(folder: Path) -> str:
    """Where a table's numbers come from: ``folder``'s files and how its manifest says they were made."""
    manifest = read_manifest(folder)
    commands = "; ".join(f"`{command}`" for command in manifest["commands"])
    return (
        f"Data: `{relative(folder)}/` ({', '.join(manifest['files'])}), from {commands} at commit "
        f"{manifest['commit']} ({manifest['finished']}; {manifest['machine']})."
    )


CLAIM_COLUMNS = ("family", "claim", "n", "metric", "effect", "ci_low", "ci_high", "status", "mde", "level", "p")
CLAIM_COLUMNS += ("p_holm", "p_exact_holm", "verdict")
"""The columns of a study's ``claims.csv`` its table is rendered from."""


def claims_table(folder: Path) -> str:
    """The claims table of a collected study (``claims.csv``): every primary claim with its seeds, the
    effect on its deciding metric with the 95 % t-interval, the Holm-adjusted p of the t-test and of the exact
    sign-flip test, the minimum detectable effect at the plan level and the verdict; the exploratory claims counted,
    with how many hold (both unadjusted p below their level, at or above their seed floor). A manifest's
    ``redecided`` records (:func:`redecide_study`) are named under the table."""
    claims = read_csv(folder / "claims.csv", CLAIM_COLUMNS)
    manifest = read_manifest(folder)
    primary = claims[claims["family"] == PRIMARY]
    exploratory = claims[claims["family"] == EXPLORATORY]
    rows = [
        "| primary claim | seeds | deciding metric | effect [95 % CI] | Holm p: t-test, sign-flip | detectable effect "
        "| verdict |",
        "| --- | ---: | --- | --- | ---: | ---: | --- |",
    ]
    for claim in primary.to_dict("records"):
        if pd.isna(claim["effect"]):
            effect = "n/a"
        elif claim["status"] == ZERO_VARIANCE:
            effect = f"{claim['effect']:+.3f} in every seed"
        else:
            effect = f"{claim['effect']:+.3f} [{claim['ci_low']:+.3f}, {claim['ci_high']:+.3f}]"
        if claim["status"] == ZERO_VARIANCE:
            detectable = "none: zero variance"
        elif claim["mde"] == np.inf:
            detectable = f"none below {min_seeds(claim['level'])} seeds"
        else:
            detectable = "" if pd.isna(claim["mde"]) else f"{claim['mde']:.3f}"
        p_values = "" if pd.isna(claim["p_holm"]) else f"{claim['p_holm']:.3g}, {claim['p_exact_holm']:.3g}"
        cells = [
            claim["claim"],
            str(claim["n"]),
            claim["metric"].replace("/", " ").replace("_", " "),
            effect,
            p_values,
            detectable,
            f"**{claim['verdict']}**" if claim["verdict"] == HOLDS else claim["verdict"],
        ]
        rows.append(f"| {' | '.join(cells)} |")
    tested = exploratory.dropna(subset=["p"])
    timing = f"; {manifest['wall_minutes']} min wall" if "wall_minutes" in manifest else ""
    if manifest.get("training_minutes"):
        timing += f"; {sum(manifest['training_minutes'].values()):.0f} min of training, summed over its runs"
    tested_primary = primary.dropna(subset=["p"])
    floors = " or ".join(str(n) for n in sorted({min_seeds(level) for level in tested_primary["level"]}))
    levels = " or ".join(f"{level:.2g}" for level in sorted(set(tested_primary["level"].round(8))))
    redecided = [
        f"Claims re-decided under the current rule from `{relative(folder)}/runs.csv`, without training, by "
        f"`{record['command']}` at commit {record['commit']} ({record['date']}): "
        + _moved(record["verdicts_moved"])
        + "."
        for record in manifest.get("redecided", [])
    ]
    return "\n".join(
        [
            *rows,
            "",
            f"Effects are the searched or mitigated model minus its baseline, paired by seed: negative is the claimed "
            f"direction. A claim holds only when both its one-sided t-test and its exact sign-flip test reject; a "
            f"dominance claim needs both objectives, so each test takes the larger of their p-values, and its row "
            f"shows the metric of the larger t-test p. The detectable effect is the smallest one this many seeds "
            f"would find with power 0.8 at the measured noise, at the claim's plan level ({levels}: alpha / m for the "
            f"m primary claims); below that level's seed floor ({floors} seeds) no effect is detectable and the "
            f"claim reads too few seeds. {(primary['verdict'] == HOLDS).sum()} of {len(primary)} primary claims "
            f"hold. There are also {len(exploratory)} exploratory claims, unadjusted: "
            f"{(tested['verdict'] == HOLDS).sum()} of the {len(tested)} tested ones hold at {_levels(tested)} "
            f"(`{relative(folder)}/claims.csv`).",
            "",
            f"Data: `{relative(folder)}/` ({len(manifest['files'])} tables), from `{manifest['commands'][0]}` at "
            f"commit {manifest['commit']} ({manifest['finished']}; {manifest['machine']}{timing}).",
            *(["", *redecided] if redecided else []),
        ]
    )


def _moved(moved: dict[str, str]) -> str:
    """The verdicts a re-decision moved, by change: how many, and which where only one or two did."""
    by_change: dict[str, list[str]] = {}
    for claim_id, change in moved.items():
        by_change.setdefault(change, []).append(claim_id)
    return (
        "; ".join(
            f"{len(ids)} {change}" + (f" ({', '.join(ids)})" if len(ids) <= 2 else "")
            for change, ids in sorted(by_change.items(), key=lambda item: len(item[1]))
        )
        or "no verdict moved"
    )


def _levels(claims: pd.DataFrame) -> str:
    levels = sorted(set(claims["level"].round(6)))
    return " or ".join(f"{level:g}" for level in levels) or "their level"


def format_verdicts(table: pd.DataFrame, plan: dict[str, Any]) -> str:
    """Markdown: per strategy (rows) and budget in full trials (columns), the lead over the baseline ± s.e. with
    the two mean scores (where ``table`` has them), Holm's p and the seeds: in bold where it leads or trails (Holm
    p < alpha), else with the lead the planned seeds detect; the verdict's words where a cell was not run."""
    budgets = sorted(table["budget"].unique())
    lines = [
        "| strategy | " + " | ".join(f"{budget} full trials" for budget in budgets) + " |",
        "|" + " --- |" * (len(budgets) + 1),
    ]
    for method in plan["methods"]:
        cells = [table.loc[table["method"] == method, "label"].iloc[0]]
        for budget in budgets:
            row = table[(table["method"] == method) & (table["budget"] == budget)].iloc[0]
            if not np.isfinite(row["p_holm"]):
                cells.append(row["verdict"])
                continue
            lead = f"{row['lead']:+.3f} ± {row['lead_se']:.3f}"
            tested = f"Holm p {row['p_holm']:.2g}, {row['seeds']} seeds"
            if "share" in row:
                tested = f"{row['share']:.3f} against {row['baseline_share']:.3f}; {tested}"
            if "all_seeds_lead" in row and pd.notna(row["all_seeds_lead"]):
                tested = f"{tested}; on all seeds {row['all_seeds_lead']:+.3f}"
            if row["p_holm"] < plan["alpha"]:
                cells.append(f"**{lead}** ({tested})")
            else:
                cells.append(f"{lead} ({tested}; detects {row['planned_detectable_lead']:.3f})")
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


VERDICT_COLUMNS = ("budget", "method", "label", "seeds", "lead", "lead_se", "p_holm", "verdict")
"""The columns of a plan's ``verdicts.csv`` its table is rendered from."""
PLAN_KEYS = ("methods", "baseline", "reference_point", "alpha", "power", "min_lead", "core_hours", "pilot_seeds")
"""The keys of a ``plan.json`` its table names."""


def comparison_table(folder: Path) -> str:
    """A planned strategy comparison: per budget and strategy, the lead over the plan's baseline (random
    search unless it names another) in true share with its s.e., Holm p and verdict (``verdicts.csv`` judged by
    ``plan.json``, :mod:`bench.comparison.plan`), and where the plan and the data come from."""
    verdict_rows = read_csv(folder / "verdicts.csv", VERDICT_COLUMNS)
    plan = read_json(folder / "plan.json", PLAN_KEYS + (() if "score" in verdict_rows else ("score",)))
    table = format_verdicts(verdict_rows, plan)
    reference = ", ".join(f"{value:.3g}" for value in plan["reference_point"])
    compared = len(plan["methods"])
    baseline = REGISTRY[plan["baseline"]].title if plan["baseline"] in REGISTRY else plan["baseline"]
    family = f"Holm over the {compared} comparisons of each budget" if compared > 1 else "one comparison per budget"
    score = verdict_rows["score"].iloc[0] if "score" in verdict_rows else plan["score"]
    held_out = score == "heldout_true_share"
    name = "held-out true share" if held_out else "true share"
    records = read_manifest(folder).get("redecided", [])
    redecided = [record for record in records if record.get("file") == "verdicts.csv"]
    return "\n".join(
        [
            table,
            "",
            f"Lead: the strategy's {name} minus {baseline}'s, paired by seed (mean ± s.e."
            + (f"; then the two mean {name}s on those seeds" if "share" in verdict_rows else "")
            + (
                "; the answer judged at the mean of the table seeds the search never read, and beside it, labelled "
                "'on all seeds', the lead at the mean of every seed, which flatters the search by what it selected on"
                if held_out
                else ""
            )
            + "). Reference point "
            f"({reference}); {family} at alpha {plan['alpha']:g}; seeds planned from a pilot "
            f"(seeds {plan['pilot_seeds'][0]}-{plan['pilot_seeds'][-1]}) "
            f"for power {plan['power']:g} to detect a lead of {plan['min_lead']:g} within {plan['core_hours']:g} "
            f"core-hours (`{relative(folder)}/plan.json`).",
            *[
                f"The plan sized the comparison on {record['sized_on']}; its committed runs were decided again on the "
                f"held-out score by `{record['command']}` at commit {record['commit']} ({record['date']}), the "
                f"detectable lead re-sized from the same pilot's held-out s.d. and the same seeds: "
                + (", ".join(f"{key}: {change}" for key, change in record["verdicts_moved"].items()) or "none moved")
                + "."
                for record in redecided
            ],
            "",
            _data_line(folder),
        ]
    )


Tables = dict[str, tuple[str, Callable[[Path], str]]]
"""A page's blocks: block name -> (its results folder, relative to the repository; the function that renders it)."""
PAGES: dict[str, Tables] = {
    "docs/search_benchmark.md": {
        "strategies": ("results/search_efficiency", strategy_table),
        "comparison": ("results/search_comparison", comparison_table),
    },
    "docs/showcase.md": {"claims": ("results/showcase", claims_table)},
    "docs/scale.md": {"gpu_check": ("results/gpu_check", gpu_check_table)},
    "docs/benchmarks.md": {"training_overhead": ("results/training_overhead", training_overhead_table)},
    "docs/search_strategies.md": {
        "default_comparison": ("results/search_default_comparison", comparison_table),
        "default_table_check": ("results/search_default_table", comparison_table),
        "fidelity_check": ("results/search_fidelity_check", comparison_table),
        "fidelity_check_vs_smac": ("results/search_fidelity_check_vs_smac", comparison_table),
        "hedge_check": ("results/search_hedge_check", comparison_table),
        "hedge_check_vs_smac": ("results/search_hedge_check_vs_smac", comparison_table),
        "hedge_surrogate": ("results/search_hedge_surrogate", comparison_table),
        "hedge_30": ("results/search_hedge_30", comparison_table),
        "botorch_table_check": ("results/search_botorch_table_check", comparison_table),
        "botorch_table_check_vs_smac": ("results/search_botorch_table_check_vs_smac", comparison_table),
    },
}
"""Every page with results blocks (relative to the repository) and its blocks."""


def write_manifest(folder: Path, *, commands: Sequence[str], commit: str | None = None, **facts: Any) -> dict:
    """``folder/manifest.json``: the commands that made the folder's files, the commit (default: HEAD), the date, the
    machine, the files and any further ``facts`` (e.g. wall time)."""
    files = sorted(path.name for path in folder.iterdir() if path.suffix in (".csv", ".json") and path.name != MANIFEST)
    manifest = {
        "commands": list(commands),
        "commit": commit or source_commit(),
        "finished": max(datetime.fromtimestamp((folder / name).stat().st_mtime, UTC) for name in files).strftime(
            "%Y-%m-%d %H:%M UTC"
        )
        if files
        else datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "machine": machine(),
        "files": files,
        **facts,
    }
    write_json_atomic(folder / MANIFEST, manifest)
    return manifest


def render(text: str, tables: Tables, root: Path = REPOSITORY) -> str:
    """``text`` (a page) with every block of ``tables`` rendered from its folder under ``root``; a block whose
    files cannot be read is refused in one line naming the block and the file."""
    for name, (folder, make) in tables.items():
        pattern = _block(name)
        if not pattern.search(text):
            raise ValueError(f"no block <!-- results:{name} --> ... <!-- /results:{name} -->")
        try:
            made = make(root / folder)
        except (FileNotFoundError, Unreadable) as error:
            raise type(error)(f"block {name}: {error}") from None
        block = f"<!-- results:{name} -->\n{made}\n<!-- /results:{name} -->"
        text = pattern.sub(block.replace("\\", "\\\\"), text)
    return text


def drifted(text: str, tables: Tables, root: Path = REPOSITORY) -> list[str]:
    """The names of the blocks of ``tables`` in ``text`` that differ from their data."""
    rendered = render(text, tables, root)
    return [name for name in tables if _block(name).search(text).group(0) != _block(name).search(rendered).group(0)]  # type: ignore[union-attr]


def _block(name: str) -> re.Pattern[str]:
    return re.compile(rf"<!-- results:{name} -->\n.*?\n?<!-- /results:{name} -->", flags=re.S)


def _time_logs(paths: Sequence[Path]) -> dict:
    """Wall time (summed) and peak memory (the largest) from GNU time's ``-v`` output in ``paths``, one file per
    invocation; ``invocations`` when there are several."""
    walls, peaks = [], []
    for path in paths:
        if not path.is_file():
            raise FileNotFoundError(f"time log: '{path}' does not exist")
        text = path.read_text(errors="replace")
        wall = re.search(r"Elapsed \(wall clock\) time \(h:mm:ss or m:ss\): ([\d:.]+)", text)
        if wall:
            parts = [float(part) for part in wall.group(1).split(":")]
            walls.append(sum(value * 60**power for power, value in enumerate(reversed(parts))))
        peak = re.search(r"Maximum resident set size \(kbytes\): (\d+)", text)
        if peak:
            peaks.append(int(peak.group(1)))
    found: dict = {"invocations": len(paths)} if len(paths) > 1 else {}
    if walls:
        found["wall_minutes"] = round(sum(walls) / 60, 1)
    if peaks:
        found["peak_memory_gb"] = round(max(peaks) / 1024**2, 2)
    return found


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.evidence.results", description=__doc__.splitlines()[0])
    commands = parser.add_subparsers(dest="action", required=True)
    commands.add_parser("render", help="rewrite the docs' results blocks from their data")
    commands.add_parser("check", help="exit 1 when a docs results block differs from its data")
    collect = commands.add_parser("collect-study", help="copy a finished study's tables into a results folder")
    collect.add_argument("study_dir", type=Path)
    collect.add_argument("target", type=Path)
    collect.add_argument("--command", required=True, help="the command that ran the study, as a user would type it")
    collect.add_argument("--commit", help="the commit the study ran at (default: HEAD)")
    collect.add_argument(
        "--time-log", type=Path, nargs="+", default=[], help="/usr/bin/time -v's output, one file per invocation"
    )
    again = commands.add_parser("redecide-study", help="decide a collected study's claims again under the current rule")
    again.add_argument("folder", type=Path)
    describe = commands.add_parser("manifest", help="write a results folder's manifest.json")
    describe.add_argument("folder", type=Path)
    describe.add_argument("--command", action="append", required=True, help="a command that made the files (repeat)")
    describe.add_argument("--commit", help="the commit they ran at (default: HEAD)")
    args = parser.parse_args(argv)
    try:
        _run(args, parser.prog)
    except (FileNotFoundError, ValueError) as error:  # a missing or unreadable file, named in one line
        raise SystemExit(f"{parser.prog} {args.action}: {error}") from None


def _run(args: argparse.Namespace, prog: str) -> None:
    if args.action == "collect-study":
        manifest = collect_study(
            args.study_dir, args.target, command=args.command, commit=args.commit, time_logs=args.time_log
        )
        print(json.dumps(manifest, indent=1))
    elif args.action == "redecide-study":
        command = f"{prog} redecide-study {args.folder}"
        print(json.dumps(redecide_study(args.folder, command=command), indent=1))
    elif args.action == "manifest":
        print(json.dumps(write_manifest(args.folder, commands=args.command, commit=args.commit), indent=1))
    elif args.action == "render":
        for page, tables in PAGES.items():
            path = REPOSITORY / page
            write_text_atomic(path, render(path.read_text(), tables, REPOSITORY))
    else:
        for page, tables in PAGES.items():
            stale = drifted((REPOSITORY / page).read_text(), tables, REPOSITORY)
            if stale:
                raise SystemExit(f"{page}: the results blocks {stale} differ from their data; run {prog} render")


if __name__ == "__main__":
    main()
