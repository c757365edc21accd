"""The GPU goals of ``bench/gpu_check.py`` and the docs' table of one collected run, met or not.

A run's files are copied into ``results/gpu_check/`` (``gpu_check.json`` for the device and versions, the
throughput check's ``loop.csv`` and ``models.csv``, the metrics check's ``metrics_speed_<set>.json`` and the
``trials_per_gpu.csv`` of the sharing check) with a manifest; ``python -m bench.evidence.results render`` writes
:func:`gpu_check_table` into docs/scale.md. A check that did not run, or did not finish, reads "not measured".
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pandas as pd

from bench.evidence.files import MANIFEST, read_csv, read_json

GOALS = {
    "loop_ratio": 0.95,
    "paper_dpn_bf16_images_per_s": 14_000,
    "dpn68_bf16_speedup": 1.5,
    "metrics_1m_seconds": 8.0,
}
"""The GPU check's goals (docs/benchmarks.md, "On a GPU"): Lightning against the bare loop, the paper's DPN in bf16
(images/s at 112 px, batch 256), dpn68's bf16 speed-up over fp32, and exact metrics at N = 1M, D = 512 (seconds)."""
PAPER_DPN = "DPN paper (SMAC_301)"
DPN68 = "timm dpn68"
METRIC_SETS = ("hard", "separable")
NOT_MEASURED = "not measured"


def met(goal: str, value: float) -> bool:
    """Whether ``value`` meets ``GOALS[goal]``: at most the goal for seconds, at least it for everything else."""
    return value <= GOALS[goal] if goal.endswith("_seconds") else value >= GOALS[goal]


def paper_dpn_bf16(rate: pd.Series) -> float:
    """The paper DPN's best bfloat16 rate (images/s) of ``rate``, indexed by (model, variant)."""
    return float(rate[PAPER_DPN].filter(like="bf16").max())


def exact_metrics_met(rows: list[dict[str, Any]]) -> bool:
    """The metrics goal on one set's rows of ``bench/metrics_speed.py``: identical ranks at every size and the
    faster precision at N = 1M within the goal's seconds."""
    identical = all(row["float32"]["metrics"]["rank"] == row["bfloat16"]["metrics"]["rank"] for row in rows)
    largest = next(row for row in rows if row["n"] == 1_000_000)
    return identical and met("metrics_1m_seconds", min(largest[p]["seconds"] for p in ("float32", "bfloat16")))


def gpu_check_table(folder: Path) -> str:
    """Markdown: the run's device and versions, then one row per goal with the figures behind it."""
    facts = read_json(folder / "gpu_check.json", ("facts",))["facts"]
    manifest = read_json(folder / MANIFEST, ("commit",))
    rows = [*_throughput_rows(folder), *_metric_rows(folder), *_sharing_rows(folder)]
    header = (
        f"Measured with `python bench/gpu_check.py` on one {facts['device']} ({facts['date']}, commit "
        f"{manifest['commit']}; torch {facts['torch']}, CUDA {facts['cuda']}, Lightning {facts['lightning']}, Python "
        f"{facts['python']}), from `results/gpu_check/`:"
    )
    table = ["| figure | measured | goal | met |", "| --- | --- | --- | --- |"]
    table += [f"| {figure} | {measured} | {goal} | {met} |" for figure, measured, goal, met in rows]
    return "\n".join([header, "", *table])


def _met(value: bool | None) -> str:
    return "" if value is None else "yes" if value else "no"


def _throughput_rows(folder: Path) -> list[tuple[str, str, str, str]]:
    loop_goal = f">= {GOALS['loop_ratio']}"
    paper_goal = f">= {GOALS['paper_dpn_bf16_images_per_s']:,} img/s"
    dpn68_goal = f">= {GOALS['dpn68_bf16_speedup']}x"
    figures = ("Lightning / bare loop (tiny DPN, 112 px, bf16, batch 256)", "paper DPN, 112 px, batch 256")
    figures += ("timm dpn68, bf16 / fp32",)
    if not (folder / "loop.csv").is_file():
        return [
            (figure, NOT_MEASURED, goal, "")
            for figure, goal in zip(figures, (loop_goal, paper_goal, dpn68_goal), strict=True)
        ]
    loop = read_csv(folder / "loop.csv", ("loop", "images/s")).set_index("loop")["images/s"]
    ratio = loop["Lightning"] / loop["bare PyTorch"]
    rate = read_csv(folder / "models.csv", ("model", "variant", "images/s")).set_index(["model", "variant"])["images/s"]
    paper = rate[PAPER_DPN]
    speedup = rate[DPN68, "bf16"] / rate[DPN68, "fp32"]
    return [
        (
            figures[0],
            f"{loop['Lightning']:,.0f} / {loop['bare PyTorch']:,.0f} img/s = {ratio:.3f}",
            loop_goal,
            _met(met("loop_ratio", ratio)),
        ),
        (
            figures[1],
            " / ".join(f"{variant} {value:,.0f}" for variant, value in paper.items()) + " img/s",
            paper_goal,
            _met(met("paper_dpn_bf16_images_per_s", paper_dpn_bf16(rate))),
        ),
        (figures[2], f"{speedup:.2f}x", dpn68_goal, _met(met("dpn68_bf16_speedup", speedup))),
    ]


def _metric_rows(folder: Path) -> list[tuple[str, str, str, str]]:
    goal = f"<= {GOALS['metrics_1m_seconds']:g} s at 1M, exact"
    rows = []
    for data in METRIC_SETS:
        path = folder / f"metrics_speed_{data}.json"
        if not path.is_file():
            rows.append((f"exact metrics, {data} set, N = 1M, D = 512", NOT_MEASURED, goal, ""))
            continue
        found = read_json(path)
        for row in found:
            figure = f"exact metrics, {data} set, N = {row['n']:,}, D = 512: float32 / bfloat16"
            identical = row["float32"]["metrics"]["rank"] == row["bfloat16"]["metrics"]["rank"]
            measured = " / ".join(_engine(row, precision) for precision in ("float32", "bfloat16"))
            measured += "; ranks identical" if identical else "; RANKS DIFFER"
            largest = row["n"] == 1_000_000
            rows.append(
                (figure, measured, goal if largest else "", _met(exact_metrics_met(found) if largest else None))
            )
    return rows


def _engine(row: dict[str, Any], precision: str) -> str:
    """An engine's seconds, with its product bound's when the row timed it."""
    seconds = row[precision]["seconds"]
    bound = row.get(f"bound_{precision}")
    return f"{seconds:.2f} s" + ("" if bound is None else f" (product alone {bound['seconds']:.2f} s)")


def _sharing_rows(folder: Path) -> list[tuple[str, str, str, str]]:
    path = folder / "trials_per_gpu.csv"
    columns = ["trials", "k", "trials_per_hour"]
    runs = read_csv(path, columns) if path.is_file() else pd.DataFrame(columns=columns)
    rows = []
    for trials in ("default", "paper_112px"):
        measured = runs[runs["trials"] == trials].set_index("k")["trials_per_hour"]
        figures = [f"{measured[k]:,.0f}" if k in measured.index else NOT_MEASURED for k in (1, 2, 4)]
        rows.append((f"trials per hour, {trials} trials, k = 1 / 2 / 4 per GPU", " / ".join(figures), "the best k", ""))
    return rows
