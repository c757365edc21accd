"""The host-overhead goal of ``bench/training_speed.py --parts overhead`` and the docs' tables of one collected run.

A run's ``overhead.csv`` and ``overhead_breakdown.csv`` are copied into ``results/training_overhead/`` with a
manifest; ``python -m bench.evidence.results render`` writes :func:`training_overhead_table` into docs/benchmarks.md.
"""

from __future__ import annotations

from pathlib import Path

from bench.evidence.files import MANIFEST, read_csv, read_json

OVERHEAD_GOAL_MS = 0.3
"""Lightning's host time per step over the bare loop's, near-zero model on the CPU (docs/benchmarks.md,
"Host overhead per step on the CPU")."""
LIGHTNING = "Lightning"
"""The way the goal is judged on: the module and trainer profiler as ``train.py`` gives them, no callbacks."""


def training_overhead_table(folder: Path) -> str:
    """How and where the run was measured (``manifest.json``); ms/step of each way against the bare loop (median,
    min-max, the excess); whether Lightning meets :data:`OVERHEAD_GOAL_MS`; the traced ways' host time by group."""
    manifest = read_json(folder / MANIFEST, ("commands", "commit", "finished", "machine"))
    summary = read_csv(folder / "overhead.csv", ("way", "ms/step", "min", "max", "over bare")).set_index("way")
    breakdown = read_csv(folder / "overhead_breakdown.csv", ("group",)).set_index("group")
    over = float(summary.loc[LIGHTNING, "over bare"])
    ways = [column.removesuffix(": ms/step") for column in breakdown.columns if column.endswith(": ms/step")]
    traced = breakdown[[f"{way}: ms/step" for way in ways]]
    traced = traced[traced.max(axis=1) >= 0.0005]  # the groups that took any time
    commands = "; ".join(f"`{command}`" for command in manifest["commands"])
    return "\n".join(
        [
            f"Measured with {commands} at commit {manifest['commit']} ({manifest['finished']}; "
            f"{manifest['machine']}), from `results/{folder.name}/`, ms/step, median of the repeats:",
            "",
            "| way | ms/step | min–max | over bare |",
            "| --- | ---: | ---: | ---: |",
            *(
                f"| {way} | {row['ms/step']:.3f} | {row['min']:.3f}–{row['max']:.3f} | {row['over bare']:.3f} |"
                for way, row in summary.iterrows()
            ),
            "",
            f"Goal: {LIGHTNING} at most {OVERHEAD_GOAL_MS} ms/step over the bare loop: "
            f"**{'met' if over <= OVERHEAD_GOAL_MS else 'not met'}** ({over:.3f}).",
            "",
            "Where the traced ways' host time goes, ms/step (each group's share of the traced time times the way's "
            "median above):",
            "",
            "| group | " + " | ".join(ways) + " |",
            "| --- |" + " ---: |" * len(ways),
            *(f"| {group} | " + " | ".join(f"{value:.3f}" for value in row) + " |" for group, row in traced.iterrows()),
        ]
    )
