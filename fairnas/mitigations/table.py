"""The bias-mitigation comparison in the format of thesis Tables 4.4/4.6, and a scatter plot of its cells.

One table per fairness metric: one row per model, one column per mitigation, each cell "(error; metric)" as mean
± standard error over seeds (the error in percent, as in the thesis). Within a table, the cells that no other cell
dominates in (error, metric), both minimised, are Pareto-optimal: bold in Markdown, marked ``*`` in CSV.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

import pandas as pd
from matplotlib.figure import Figure

from fairnas.groups import standard_error
from fairnas.search.pareto import non_dominated_mask

CELL_KEYS = ("model", "mitigation")
SUMMARY_COLUMNS = (
    *CELL_KEYS,
    "metric",
    "n_seeds",
    "error_mean",
    "error_sem",
    "value_mean",
    "value_sem",
    "pareto_optimal",
)


def summarize(runs: pd.DataFrame, metrics: Sequence[str]) -> pd.DataFrame:
    """Mean and standard error over seeds of ``error`` and each metric, per (model, mitigation, metric) cell.

    ``runs`` has one row per run with columns ``model``, ``mitigation``, ``error`` and the ``metrics``. The
    standard error is NaN for a single seed. ``pareto_optimal`` marks the non-dominated cells of each metric.
    """
    missing = [column for column in (*CELL_KEYS, "error", *metrics) if column not in runs.columns]
    if missing:
        raise ValueError(f"runs lack the columns {missing}")
    cells = runs.groupby(list(CELL_KEYS), sort=False)
    rows = []
    for metric in metrics:
        stats = cells.agg(
            n_seeds=("error", "size"),
            error_mean=("error", "mean"),
            error_sem=("error", standard_error),
            value_mean=(metric, "mean"),
            value_sem=(metric, standard_error),
        ).reset_index()
        stats.insert(2, "metric", metric)
        stats["pareto_optimal"] = non_dominated_mask(stats[["error_mean", "value_mean"]].to_numpy(dtype=float))
        rows.append(stats)
    return pd.concat(rows, ignore_index=True)[list(SUMMARY_COLUMNS)]


def format_cell(error_mean: float, error_sem: float, value_mean: float, value_sem: float, digits: int = 2) -> str:
    """``(error ± se; metric ± se)``, without the ``± se`` parts when the standard error is unknown (NaN)."""

    def part(mean: float, sem: float) -> str:
        return f"{mean:.{digits}f}" if math.isnan(sem) else f"{mean:.{digits}f} ± {sem:.{digits}f}"

    return f"({part(error_mean, error_sem)}; {part(value_mean, value_sem)})"


def comparison_table(
    summary: pd.DataFrame,
    metric: str,
    titles: Mapping[str, str] | None = None,
    *,
    error_scale: float = 100.0,
    mark: str = "*{}",
    digits: int = 2,
) -> pd.DataFrame:
    """Table 4.6 for one metric: models (first-seen order) x mitigations, formatted cells, Pareto cells marked.

    ``mark`` formats a Pareto-optimal cell (``"*{}"`` for CSV, ``"**{}**"`` for Markdown); ``titles`` maps
    mitigation names to column titles; ``error_scale`` converts the error (100: percent).
    """
    rows = summary[summary["metric"] == metric]
    if rows.empty:
        raise ValueError(f"no summary rows for metric {metric!r}; metrics: {sorted(set(summary['metric']))}")
    titles = dict(titles or {})
    cells = {}
    for row in rows.itertuples():
        text = format_cell(
            row.error_mean * error_scale, row.error_sem * error_scale, row.value_mean, row.value_sem, digits
        )
        cells[(row.model, row.mitigation)] = mark.format(text) if row.pareto_optimal else text
    table = pd.Series(cells).unstack().reindex(index=pd.unique(rows["model"]), columns=pd.unique(rows["mitigation"]))
    table.columns = [titles.get(name, name) for name in table.columns]
    return table.rename_axis("model").fillna("")


def markdown_tables(
    summary: pd.DataFrame,
    metrics: Sequence[str],
    titles: Mapping[str, str] | None = None,
    *,
    split: str,
    error_scale: float = 100.0,
) -> str:
    """One Markdown table per metric under a heading, Pareto-optimal cells in bold."""
    unit = "error in %" if error_scale == 100.0 else "error"
    sections = []
    for metric in metrics:
        table = comparison_table(summary, metric, titles, error_scale=error_scale, mark="**{}**")
        sections.append(
            f"### ({unit}; {metric}) on {split}, mean ± standard error; bold: Pareto-optimal\n\n{table.to_markdown()}\n"
        )
    return "\n".join(sections)


def comparison_figure(
    summary: pd.DataFrame,
    metrics: Sequence[str],
    titles: Mapping[str, str] | None = None,
    *,
    error_scale: float = 100.0,
) -> Figure:
    """One panel per metric: every cell at (error, metric) with standard-error bars; colour = model, marker =
    mitigation, Pareto-optimal cells ringed and joined by the front's staircase."""
    titles = dict(titles or {})
    figure = Figure(figsize=(4.5 * len(metrics), 4.2), layout="constrained")  # no pyplot: no global state
    axes = figure.subplots(1, len(metrics), squeeze=False)[0]
    models = list(pd.unique(summary["model"]))
    mitigations = list(pd.unique(summary["mitigation"]))
    colours = {model: f"C{i % 10}" for i, model in enumerate(models)}
    markers = {name: "osD^vP*Xh<>p"[i % 12] for i, name in enumerate(mitigations)}
    for axis, metric in zip(axes, metrics, strict=True):
        rows = summary[summary["metric"] == metric]
        for row in rows.itertuples():
            axis.errorbar(
                row.error_mean * error_scale,
                row.value_mean,
                xerr=_bar(row.error_sem * error_scale),
                yerr=_bar(row.value_sem),
                fmt=markers[row.mitigation],
                color=colours[row.model],
                markeredgecolor="black" if row.pareto_optimal else colours[row.model],
                markersize=7,
                capsize=2,
                elinewidth=0.8,
            )
        front = rows[rows["pareto_optimal"]].sort_values(["error_mean", "value_mean"])
        axis.step(
            front["error_mean"] * error_scale,
            front["value_mean"],
            where="post",
            color="black",
            linestyle="--",
            linewidth=0.8,
            alpha=0.7,
        )
        axis.set_xlabel("error (%)" if error_scale == 100.0 else "error")
        axis.set_ylabel(metric)
        axis.grid(alpha=0.3)
    handles = [axes[0].plot([], [], "s", color=colours[m])[0] for m in models]
    handles += [axes[0].plot([], [], markers[m], color="0.4")[0] for m in mitigations]
    figure.legend(
        handles, [*models, *(titles.get(m, m) for m in mitigations)], loc="outside right upper", fontsize="small"
    )
    return figure


def _bar(sem: float) -> float | None:
    return None if math.isnan(sem) else sem
