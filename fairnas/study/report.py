"""A study's report: one section per stage (what it answers, its findings, tables and figures), written as
``report.md`` and as a self-contained ``report.html`` (:mod:`fairnas.html_report`) beside the CSV tables and PNG
figures."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping, Sequence
from pathlib import Path

import pandas as pd
from matplotlib.figure import Figure

from fairnas.html_report import Section, write_report
from fairnas.io import write_text_atomic

KIND_STYLE = {"default": ("black", "s"), "hand-designed": ("tab:orange", "o"), "searched": ("tab:blue", "D")}


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
        Section(stage.title, stage.description, tuple(stage.findings), stage.tables, stage.figures, stage.seconds)
        for stage in stages
    ]
    page = write_report(
        output_dir / "report.html", title=title, header=header, sections=sections, config_yaml=config_yaml
    )
    return md, page


def markdown_table(frame: pd.DataFrame, digits: int = 3) -> str:
    """A Markdown table; integer columns as integers, floats with ``digits`` decimals."""
    integers = frame.select_dtypes("integer").columns
    return frame.astype({column: str for column in integers}).to_markdown(index=False, floatfmt=f".{digits}f")


def _minutes(seconds: float) -> str:
    return "read back" if math.isnan(seconds) else f"{seconds / 60:.1f} min"
