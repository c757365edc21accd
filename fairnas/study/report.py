"""A study's report: one section per stage (what it answers, its findings, tables and figures), written as
``report.md`` and as a self-contained ``report.html`` (:mod:`fairnas.html_report`) beside the CSV tables and PNG
figures."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np
import pandas as pd
from matplotlib.figure import Figure
from matplotlib.lines import Line2D

from fairnas.html_report import PageSection, write_report
from fairnas.io import write_text_atomic
from fairnas.study.claims import DOES_NOT_HOLD, HOLDS, NOT_APPLICABLE, TOO_FEW_SEEDS
from fairnas.study.inference import ZERO_VARIANCE, d_z_interval

KIND_STYLE = {"default": ("black", "s"), "hand-designed": ("tab:orange", "o"), "searched": ("tab:blue", "D")}
VERDICT_COLOURS = {HOLDS: "tab:green", DOES_NOT_HOLD: "tab:red", TOO_FEW_SEEDS: "tab:gray", NOT_APPLICABLE: "lightgray"}
"""The colour of each verdict of a claims table (:func:`forest_figure`)."""
FOREST_CLIP = 10.0
"""The widest x axis of :func:`forest_figure`, in paired s.d. units: points beyond it are drawn at its edge."""


@dataclasses.dataclass
class StageReport:
    """One stage's part of the report. ``tables`` and ``figures`` are the files already written (name -> path)."""

    name: str
    title: str
    description: str
    findings: list[str]
    tables: dict[str, Path]
    figures: dict[str, Path]
    seconds: float
    notes: list[str] = dataclasses.field(default_factory=list)
    """Markdown shown in report.md below the findings (e.g. a table in Table 4.6's format)."""


def scatter_figure(summary: pd.DataFrame, title: str, splits: Sequence[str] = ("val", "test")) -> Figure:
    """Error against rank disparity per model (mean ± s.e. over seeds as error bars) and split, by model kind."""
    figure = Figure(figsize=(5.5 * len(splits), 4.5), layout="tight")
    axes = figure.subplots(1, len(splits), squeeze=False)[0]
    for axis, split in zip(axes, splits, strict=True):
        for kind, (colour, marker) in KIND_STYLE.items():
            rows = summary[summary["kind"] == kind]
            if rows.empty:
                continue
            axis.errorbar(
                rows[f"{split}/error_mean"],
                rows[f"{split}/rank_disparity_mean"],
                xerr=rows.get(f"{split}/error_se"),
                yerr=rows.get(f"{split}/rank_disparity_se"),
                fmt=marker,
                color=colour,
                label=kind,
                capsize=3,
            )
            for row in rows.to_dict("records"):
                point = (row[f"{split}/error_mean"], row[f"{split}/rank_disparity_mean"])
                axis.annotate(row["model"], point, fontsize=6, alpha=0.7)
        axis.set_xlabel(f"{split} error")
        axis.set_ylabel(f"{split} rank disparity")
        axis.set_title(f"{title} ({split})")
        axis.grid(alpha=0.3)
        axis.legend(fontsize=8)
    return figure


def forest_figure(claims: pd.DataFrame) -> Figure:
    """Each claim's effect in the direction it claims, in paired s.d. units (Cohen's d_z), with its 95 % interval.

    ``claims`` has the columns of the study's ``claims.csv``: ``id``, ``family``, ``verdict``, ``n``, ``effect`` (the
    mean paired difference, model minus baseline: every claim says the metric is *lower*) and ``sd`` (the s.d. of the
    paired differences); ``status`` where it has one. One row per claim, the first at the top, its y tick label the
    claim's id (primary claims "★ " and bold); x = d_z = -effect / sd, so right of 0 is the claimed improvement, and
    the interval is the noncentral-t interval of d_z (:func:`~fairnas.study.inference.d_z_interval`: the observed
    t = d_z sqrt(n) inverted in the noncentrality, so it carries the s.d.'s own uncertainty, which the mean's
    t-interval divided by the s.d. would not). The colour is the verdict's (:data:`VERDICT_COLOURS`). The x axis is
    symmetric around 0, as wide as the largest finite value but at most :data:`FOREST_CLIP`. A point beyond it, or
    one with no s.d. to divide by (the same difference in every seed, or a single seed; at 0 when that difference is
    0), is drawn at the edge as a triangle pointing outwards, without an interval; a claim whose status is
    degenerate (zero variance) is drawn hollow. Intervals are cut at the edges. A claim without an effect (not
    applicable) is shown as "n/a" at 0. Each point is the :class:`~matplotlib.lines.Line2D` whose gid is the
    claim's id.
    """
    n = len(claims)
    figure = Figure(figsize=(7.5, 1.5 + 0.35 * max(n, 1)), layout="tight")
    axis = figure.subplots()
    effect, sd = (claims[c].to_numpy(dtype=float) for c in ("effect", "sd"))
    seeds = claims["n"].fillna(0).to_numpy(dtype=int)
    scale = np.where(sd > 0, sd, np.nan)
    improvement = -effect / scale
    intervals = [d_z_interval(float(d), int(k)) for d, k in zip(improvement, seeds, strict=True)]
    low = np.array([interval[0] for interval in intervals], dtype=float).reshape(n)
    high = np.array([interval[1] for interval in intervals], dtype=float).reshape(n)
    without_scale = np.isfinite(effect) & ~np.isfinite(scale)
    improvement[without_scale] = np.where(effect[without_scale] == 0, 0.0, np.copysign(np.inf, -effect[without_scale]))
    degenerate = claims.get("status", pd.Series([""] * n, index=claims.index)).eq(ZERO_VARIANCE).to_numpy()
    finite = np.concatenate([v[np.isfinite(v)] for v in (improvement, low, high)])
    edge = min(FOREST_CLIP, max(1.0, float(np.abs(finite).max(initial=0.0))))
    y = np.arange(n)[::-1]
    clipped = False
    rows = zip(claims.to_dict("records"), y, improvement, low, high, degenerate, strict=True)
    for row, position, x, left, right, hollow in rows:
        colour = VERDICT_COLOURS.get(row["verdict"], "black")
        if np.isnan(x):
            axis.text(0, position, " n/a", va="center", ha="left", color="gray", fontsize=8, gid=str(row["id"]))
            continue
        if np.isfinite(left) and np.isfinite(right):
            axis.plot(
                np.clip([left, right], -edge, edge), [position, position], color=colour, lw=2, solid_capstyle="butt"
            )
        marker = "o" if abs(x) <= edge else (">" if x > 0 else "<")
        clipped |= marker != "o"
        axis.plot(
            [np.clip(x, -edge, edge)],
            [position],
            marker=marker,
            color=colour,
            ms=7,
            ls="",
            fillstyle="none" if hollow else "full",
            gid=str(row["id"]),
        )
    axis.axvline(0, color="black", lw=0.8)
    axis.set_xlim(-1.08 * edge, 1.08 * edge)
    axis.set_ylim(-0.7, max(n, 1) - 0.3)
    primary = [row["family"] == "primary" for row in claims.to_dict("records")]
    axis.set_yticks(y, [f"★ {i}" if p else str(i) for i, p in zip(claims["id"], primary, strict=True)])
    for label, p in zip(axis.get_yticklabels(), primary, strict=True):
        label.set_fontweight("bold" if p else "normal")
    axis.set_xlabel("improvement in the claimed direction (paired s.d. units, d_z)")
    axis.set_ylabel("claim (★ primary)")
    axis.set_title("claims: effect and 95 % noncentral-t interval" if n else "no claims")
    axis.grid(axis="x", alpha=0.3)
    handles = [Line2D([], [], color=c, marker="o", lw=2, label=v) for v, c in VERDICT_COLOURS.items()]
    if clipped:
        handles.append(Line2D([], [], color="black", marker=">", ls="", label=f"clipped: beyond ±{edge:g} or no s.d."))
    if degenerate.any():
        handles.append(Line2D([], [], color="black", marker="o", ls="", fillstyle="none", label=ZERO_VARIANCE))
    axis.legend(handles=handles, fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1), frameon=False)
    return figure


def write_pages(
    output_dir: Path, *, title: str, header: Mapping[str, str], stages: Sequence[StageReport], config_yaml: str
) -> tuple[Path, Path]:
    """``report.md`` and ``report.html`` in ``output_dir``; figures and tables are referenced beside them."""
    markdown = [f"# {title}", "", *(f"- **{key}**: {value}" for key, value in header.items()), ""]
    for stage in stages:
        markdown += [f"## {stage.title}", "", f"_{stage.description}_ ({_minutes(stage.seconds)})", ""]
        markdown += [*(f"- {finding}" for finding in stage.findings), ""]
        markdown += [*stage.notes, ""] if stage.notes else []
        markdown += [f"![{name}]({path.relative_to(output_dir)})" for name, path in stage.figures.items()]
        markdown += [""] if stage.figures else []
        markdown += [f"[{name}]({path.relative_to(output_dir)})" for name, path in stage.tables.items()]
        markdown += [""]
    md = output_dir / "report.md"
    write_text_atomic(md, "\n".join(markdown) + "\n")
    sections = [
        PageSection(stage.title, stage.description, tuple(stage.findings), stage.tables, stage.figures, stage.seconds)
        for stage in stages
    ]
    page = write_report(
        output_dir / "report.html", title=title, header=header, sections=sections, config_yaml=config_yaml
    )
    return md, page


def _minutes(seconds: float) -> str:
    return "read back" if math.isnan(seconds) else f"{seconds / 60:.1f} min"
