"""The showcase's report: figures, tables and the claims of thesis Chapter 4, each measured with seeds.

Every number in ``report.md`` is computed here from the runs of ``bench/showcase.py``; nothing is asserted or
hard-coded. A claim "holds" when the measured difference points the claimed way by more than two standard errors
(paired over seeds where the runs share seeds), and the report gives the margin in standard errors either way.
"""

from __future__ import annotations

import dataclasses
import math
import re
import shutil
from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np
import pandas as pd
import search_efficiency
from matplotlib.figure import Figure

from fairnas.io import write_text_atomic
from fairnas.search import SearchResult
from fairnas.search.hypervolume import hypervolume_curve
from fairnas.search.plots import pareto_figure

SPLITS = ("val", "test")
KIND_STYLE = {"default": ("black", "s"), "hand-designed": ("tab:orange", "o"), "searched": ("tab:blue", "D")}


@dataclasses.dataclass(frozen=True)
class Candidate:
    """A model of the showcase: a display name, its kind (default / hand-designed / searched), its overrides."""

    name: str
    kind: str
    overrides: tuple[str, ...]

    @property
    def folder(self) -> str:
        return re.sub(r"[^\w.+-]+", "_", self.name)


def mean_sem(values: Sequence) -> tuple[float, float]:
    values = np.asarray(values, dtype=float)
    sem = values.std(ddof=1) / math.sqrt(len(values)) if len(values) > 1 else math.nan
    return float(values.mean()), float(sem)


def fmt(mean: float, sem: float, digits: int = 3) -> str:
    return f"{mean:.{digits}f}" if math.isnan(sem) else f"{mean:.{digits}f} ± {sem:.{digits}f}"


HOLDS = 2.0
"""A claim holds when the measured difference points the claimed way by more than this many standard errors."""


def verdict(difference: float, sem: float, claimed_sign: int) -> str:
    """'holds' when ``difference`` has the claimed sign by more than :data:`HOLDS` standard errors; the margin."""
    if difference == 0:
        return "does not hold (no change: the same value in every seed)"
    if math.isnan(sem) or sem == 0:
        return "holds (one seed: no standard error)" if difference * claimed_sign > 0 else "does not hold (one seed)"
    margin = difference * claimed_sign / sem
    return f"{'holds' if margin > HOLDS else 'does not hold'} ({margin:+.1f} s.e.)"


# ---- search efficiency -------------------------------------------------------------------------------------------


def search_table(runs: pd.DataFrame, total_budget: float) -> pd.DataFrame:
    """Per seed: final hypervolume of SMAC and random search, their difference, and the epochs each needs to reach
    random search's mean final hypervolume."""
    final = {
        (method, seed): search_efficiency.hypervolume_at(curve, total_budget)
        for (method, seed), curve in runs.groupby(["method", "seed"])
    }
    goal = np.mean([volume for (method, _), volume in final.items() if method == "random"])
    rows = []
    for seed in sorted({seed for _, seed in final}):
        row = {"seed": seed, "smac": final["smac", seed], "random": final["random", seed]}
        row["difference"] = row["smac"] - row["random"]
        for method in ("smac", "random"):
            curve = runs[(runs["method"] == method) & (runs["seed"] == seed)]
            row[f"{method}_trials"] = len(curve)
            row[f"{method}_epochs_to_goal"] = search_efficiency.budget_to_reach(curve, goal)
        rows.append(row)
    table = pd.DataFrame(rows)
    table.attrs["goal"] = goal
    return table


def search_curve_figure(runs: pd.DataFrame, total_budget: float, live: pd.DataFrame, scale: float) -> Figure:
    """Hypervolume (as a share of ``scale``, the table's own front) against consumed epochs: mean ± s.e. over the
    table's seeds per method, and the live search's curve."""
    figure = Figure(figsize=(6, 4.2), layout="tight")
    axis = figure.subplots()
    grid = np.linspace(0, total_budget, 49)
    for method, colour in (("smac", "tab:blue"), ("random", "tab:orange")):
        curves = np.array(
            [
                [search_efficiency.hypervolume_at(curve, budget) / scale for budget in grid]
                for _, curve in runs[runs["method"] == method].groupby("seed")
            ]
        )
        mean = curves.mean(axis=0)
        sem = curves.std(axis=0, ddof=1) / math.sqrt(len(curves)) if len(curves) > 1 else np.zeros_like(mean)
        label = f"{search_efficiency.METHODS[method].label}, table ({len(curves)} seeds)"
        axis.plot(grid, mean, color=colour, label=label)
        axis.fill_between(grid, mean - sem, mean + sem, color=colour, alpha=0.25)
    for seed, curve in live.groupby("seed"):
        axis.plot(
            grid,
            [search_efficiency.hypervolume_at(curve, budget) / scale for budget in grid],
            color="tab:blue",
            linestyle="--",
            label=f"SMAC, live training (seed {seed})",
        )
    axis.set_xlabel("consumed epochs")
    axis.set_ylabel("hypervolume / the table front's")
    axis.legend()
    return figure


# ---- models: scatter with error bars -----------------------------------------------------------------------------


def scatter_figure(summary: pd.DataFrame, title: str, splits: Sequence[str] = SPLITS) -> Figure:
    """Error vs rank disparity per model and split, mean ± standard error bars, colour/marker by kind."""
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
                xerr=rows.get(f"{split}/error_sem"),
                yerr=rows.get(f"{split}/rank_disparity_sem"),
                fmt=marker,
                color=colour,
                label=kind,
                capsize=3,
            )
            for row in rows.to_dict("records"):
                axis.annotate(
                    row["model"],
                    (row[f"{split}/error_mean"], row[f"{split}/rank_disparity_mean"]),
                    fontsize=6,
                    alpha=0.7,
                )
        axis.set_xlabel(f"{split} error")
        axis.set_ylabel(f"{split} rank disparity")
        axis.set_title(f"{title} ({split})")
        axis.legend(fontsize=8)
    return figure


def as_summary(runs: pd.DataFrame) -> pd.DataFrame:
    """Single-seed runs in the summary's column layout (standard errors NaN)."""
    columns = {f"{split}/{name}": f"{split}/{name}_mean" for split in SPLITS for name in ("error", "rank_disparity")}
    return runs.rename(columns=columns)


def dominance_claims(final: pd.DataFrame, split: str) -> list[str]:
    """Does a searched model dominate the default DPN and the best hand-designed model on (error, rank disparity)?"""
    searched = final[final["kind"] == "searched"]
    hand = final[final["kind"] == "hand-designed"].sort_values("val/error_mean")
    baselines = [final[final["kind"] == "default"].iloc[0], *([hand.iloc[0]] if len(hand) else [])]
    lines = []
    for baseline in baselines:
        best = None
        for row in searched.to_dict("records"):
            margins = [
                (baseline[f"{split}/{name}_mean"] - row[f"{split}/{name}_mean"])
                / math.hypot(baseline[f"{split}/{name}_sem"], row[f"{split}/{name}_sem"])
                for name in ("error", "rank_disparity")
            ]
            if best is None or min(margins) > min(best[1]):
                best = (row, margins)
        if best is None:
            lines.append(f"- vs {baseline['model']}: no searched model to compare")
            continue
        row, margins = best
        dominated = all(m > 0 for m in margins)
        clearly = all(m > 1 for m in margins)
        lines.append(
            f"- vs **{baseline['model']}** ({split}): {row['model']} "
            f"{'dominates it' if dominated else 'does not dominate it'}"
            f"{' by more than one s.e. in both objectives' if clearly else ''}: error "
            f"{fmt(row[f'{split}/error_mean'], row[f'{split}/error_sem'])} vs "
            f"{fmt(baseline[f'{split}/error_mean'], baseline[f'{split}/error_sem'])} ({margins[0]:+.1f} s.e.), "
            f"rank disparity {fmt(row[f'{split}/rank_disparity_mean'], row[f'{split}/rank_disparity_sem'], 2)} vs "
            f"{fmt(baseline[f'{split}/rank_disparity_mean'], baseline[f'{split}/rank_disparity_sem'], 2)} "
            f"({margins[1]:+.1f} s.e.)"
        )
    return lines


# ---- mitigations and AdvERM --------------------------------------------------------------------------------------


def mitigation_effects(runs: pd.DataFrame) -> pd.DataFrame:
    """Per model and mitigation: change from the baseline in error and rank disparity, paired by seed."""
    baseline = runs[runs["mitigation"] == "none"].set_index(["model", "seed"])
    rows = []
    for (model, mitigation), cell in runs[runs["mitigation"] != "none"].groupby(["model", "mitigation"], sort=False):
        paired = cell.set_index(["model", "seed"])
        row = {"model": model, "mitigation": mitigation}
        for name in ("error", "rank_disparity"):
            row[f"d_{name}"], row[f"d_{name}_sem"] = mean_sem(paired[name] - baseline.loc[paired.index, name])
        rows.append(row)
    return pd.DataFrame(rows)


def adverm_table(adverm: pd.DataFrame) -> pd.DataFrame:
    rows = []
    for model, runs in adverm.groupby("model", sort=False):
        row = {"training": model, "seeds": len(runs)}
        for split in SPLITS:
            for name in ("robustness_bias", "error", "rank_disparity"):
                row[f"{split} {name}"] = fmt(*mean_sem(runs[f"{split}/{name}"]), 4 if name == "robustness_bias" else 3)
        rows.append(row)
    return pd.DataFrame(rows)


def adverm_claim(adverm: pd.DataFrame, split: str) -> str:
    plain = adverm[adverm["model"] == "plain"].set_index("seed")
    regularised = adverm[adverm["model"] == "AdvERM"].set_index("seed")
    d_rb, s_rb = mean_sem(regularised[f"{split}/robustness_bias"] - plain[f"{split}/robustness_bias"])
    d_error, s_error = mean_sem(regularised[f"{split}/error"] - plain[f"{split}/error"])
    return (
        f"- AdvERM lowers robustness bias ({split}): {verdict(d_rb, s_rb, -1)}; change "
        f"{fmt(d_rb, s_rb, 4)} at an error change of {fmt(d_error, s_error)} (paired over "
        f"{len(plain)} seeds)"
    )


# ---- the report ---------------------------------------------------------------------------------------------------


def markdown(frame: pd.DataFrame, digits: int = 3) -> str:
    """A Markdown table; integer columns (seeds, counts) as integers, floats with ``digits`` decimals."""
    integers = frame.select_dtypes("integer").columns
    return frame.astype({column: str for column in integers}).to_markdown(index=False, floatfmt=f".{digits}f")


def summary_table(summary: pd.DataFrame, digits: int = 3) -> pd.DataFrame:
    table = summary[["model", "kind", "n_seeds"]].copy()
    for split in SPLITS:
        for name in ("error", "rank_disparity"):
            table[f"{split} {name}"] = [
                fmt(m, s, digits)
                for m, s in zip(summary[f"{split}/{name}_mean"], summary[f"{split}/{name}_sem"], strict=True)
            ]
    return table


def live_table(live_runs: pd.DataFrame, search: pd.DataFrame, total_budget: float, table) -> pd.DataFrame:
    """The live searches' final hypervolume (share of the table front) against the table's SMAC and random search
    (mean ± s.e. over the table's seeds, and the live value's place among the table's SMAC seeds).

    A live trial carries its own seed's training noise, the table's front the best of seed 0's. To tell the
    search's choices from that noise, the share is also given with the table's values of the configurations the
    live search trained to the full budget ("at table values")."""
    lookup = table.make_target(None, True, 0)[0].lookup
    scale = table.max_hypervolume
    rows = []
    for seed, curve in live_runs.groupby("seed"):
        at_table = curve.copy()
        full = at_table["budget"] == table.max_budget
        values = pd.DataFrame([lookup(cid, table.max_budget) for cid in at_table.loc[full, "config_id"]])
        for name in table.objectives:
            at_table.loc[full, name] = values[name].to_numpy() if len(values) else []
        volumes = hypervolume_curve(at_table, table.objectives, table.max_budget, table.reference_point)
        at_table["hypervolume"] = volumes["hypervolume"].to_numpy()
        share = search_efficiency.hypervolume_at(curve, total_budget) / scale
        rows.append(
            {
                "live seed": seed,
                "live SMAC share": share,
                "at table values": search_efficiency.hypervolume_at(at_table, total_budget) / scale,
                "table SMAC share": fmt(*mean_sem(search["smac"] / scale)),
                "table random share": fmt(*mean_sem(search["random"] / scale)),
                "table SMAC seeds below": f"{int((search['smac'] / scale < share).sum())}/{len(search)}",
                "live trials": len(curve),
            }
        )
    return pd.DataFrame(rows)


def write_report(
    report,
    *,
    settings: Mapping,
    timings: Mapping[str, float],
    noise: pd.DataFrame,
    sweep: pd.DataFrame,
    table_runs: pd.DataFrame,
    table,
    live_runs: pd.DataFrame,
    live,
    front: pd.DataFrame,
    final: pd.DataFrame,
    mitigations: pd.DataFrame,
    adverm: pd.DataFrame,
    transfer: pd.DataFrame,
    search_dir: Path,
) -> None:
    """Tables (CSV) and figures (PNG) through ``report`` (files + W&B), and ``report.md`` tying them together."""
    out = report.output_dir
    total_budget = settings["scale"]["total_budget"]
    pipeline = sum(seconds for name, seconds in timings.items() if name != "table")
    lines = ["# fairnas showcase: thesis Chapter 4 on the embedded faces", ""]
    lines += [
        f"Wall time of this invocation {pipeline / 60:.1f} min without the table (runs that an earlier invocation "
        "finished are read back in seconds): "
        + ", ".join(f"{name} {seconds / 60:.1f} min" for name, seconds in timings.items())
        + ".",
        "",
    ]
    lines += [
        "Settings (fixed before any method was compared):",
        "",
        "```",
        f"overrides: {' '.join(settings['overrides'])}",
        f"data: {dict(settings['data'])}",
        f"transfer data: {' '.join(settings['transfer'])}",
        f"scale: {dict(settings['scale'])}",
        f"hypervolume reference point (error, rank disparity): {settings['reference_point']}",
        "```",
        "",
    ]

    # noise
    report.table("noise", noise)
    lines += ["## Seed noise of the default configuration", ""]
    noise_rows = []
    for split in SPLITS:
        for name in ("error", "rank_disparity"):
            mean, sem = mean_sem(noise[f"{split}/{name}"])
            spread = sweep[f"{split}/{name}"].std(ddof=1) if len(sweep) > 1 else math.nan
            noise_rows.append(
                {
                    "metric": f"{split} {name}",
                    "mean": mean,
                    "seed s.d.": noise[f"{split}/{name}"].std(ddof=1) if len(noise) > 1 else math.nan,
                    "seed s.e.": sem,
                    "s.d. across hand-designed models": spread,
                }
            )
    lines += [
        markdown(pd.DataFrame(noise_rows)),
        "",
        f"{len(noise)} seeds of the default DPN. The last column is the spread between configurations of "
        "stage (a) (one seed each): differences between configurations are measured against the seed s.e.",
        "",
    ]

    # (a) sweep
    report.table("sweep", sweep)
    default_summary = final[final["kind"] == "default"]
    report.figure("sweep", scatter_figure(pd.concat([as_summary(sweep), default_summary]), "hand-designed sweep"))
    lines += [
        "## (a) Hand-designed sweep (Sec. 4.3 analogue)",
        "",
        "![sweep](sweep.png)",
        "",
        markdown(sweep[["model", "val/error", "val/rank_disparity", "test/error", "test/rank_disparity"]]),
        "",
    ]

    # (b) search
    search = search_table(table_runs, total_budget)
    report.table("search_efficiency", search)
    report.table("search_trials", table_runs)
    live_rows = live_table(live_runs, search, total_budget, table)
    report.table("live_search", live_rows)
    report.table("live_search_trials", live_runs)
    report.figure("search_hypervolume", search_curve_figure(table_runs, total_budget, live_runs, table.max_hypervolume))
    live_seed = settings["scale"]["live_seeds"][0]
    result = SearchResult.load(search_dir / live.name / "smac" / f"seed{live_seed}" / "search")
    report.figure("search_front", pareto_figure(result.trials, result.pareto_front, live.objectives, live.max_budget))
    difference, difference_sem = mean_sem(search["difference"])
    wins = int((search["difference"] > 0).sum())
    lines += [
        "## (b) Joint DPN architecture + hyperparameter search (Sec. 4.4 analogue)",
        "",
        f"SMAC vs random search on the tabular benchmark of this preset (`{table.name}`: every configuration of "
        f"the space trained once, seed 0, metrics after every epoch) at {total_budget:g} consumed epochs per "
        f"search, {len(search)} seeds; hypervolume of the validation (error, rank disparity) front against "
        f"{[round(v, 3) for v in settings['reference_point']]}; the table's own front has "
        f"{table.max_hypervolume:.4f}:",
        "",
        "![hypervolume](search_hypervolume.png)",
        "",
        markdown(search, 4),
        "",
        f"Random search's mean final hypervolume (the goal for the epochs-to-goal columns): "
        f"{search.attrs['goal']:.4f}.",
        "",
        f"Live searches: SMAC on the same space and preset with search and training seeds "
        f"{', '.join(map(str, settings['scale']['live_seeds']))} (the table's runs used seed 0), so their trials "
        "carry other seeds' training noise. \"at table values\" is the share of the same search's full-budget "
        "configurations with the table's (seed 0) values: it reads the search's choices apart from that noise.",
        "",
        markdown(live_rows, 3),
        "",
        f"The trials and front of seed {live_seed} (re-trained below):",
        "",
        "![front](search_front.png)",
        "",
        markdown(front[["model", *live.objectives]]),
        "",
    ]

    # (c) final
    report.table("final", final)
    report.figure("final", scatter_figure(final, "re-trained models"))
    lines += [
        "## (c) Front and hand-designed models re-trained with seeds (Fig. 4.x analogue)",
        "",
        "![final](final.png)",
        "",
        markdown(summary_table(final)),
        "",
    ]

    # (d) mitigations
    effects = mitigation_effects(mitigations)
    report.table("mitigation_effects", effects)
    report.table("adverm", adverm)
    shutil.copyfile(out / "mitigations" / "comparison.png", out / "mitigations.png")
    report.log_image("mitigations", out / "mitigations.png")
    tables_md = (out / "mitigations" / "tables.md").read_text()
    lines += [
        "## (d) Mitigations (Table 4.6 analogue) and AdvERM",
        "",
        f"Seeds {', '.join(map(str, sorted(mitigations['seed'].unique())))}, the first of the final stage's. A "
        "model's baseline (no mitigation) is its noise- or final-stage run of the same seed, read back, not trained "
        "again.",
        "",
        tables_md,
        "![mitigations](mitigations.png)",
        "",
        "Change from each model's baseline, paired by seed (test split):",
        "",
        markdown(effects, 3),
        "",
        "AdvERM vs plain training of the default DPN (robustness bias from DeepFool):",
        "",
        markdown(adverm_table(adverm)),
        "",
    ]

    # (e) transfer
    report.table("transfer", transfer)
    report.figure("transfer", scatter_figure(transfer, "transfer data set"))
    lines += [
        "## (e) Transfer to a second synthetic data set (Tables 4.5 / 4.8 analogue)",
        "",
        f"Rendered with `{' '.join(settings['transfer'])}`.",
        "",
        "![transfer](transfer.png)",
        "",
        markdown(summary_table(transfer)),
        "",
    ]

    # claims
    searched_best = final[final["kind"] == "searched"].sort_values("val/error_mean").iloc[0]
    default = final[final["kind"] == "default"].iloc[0]
    arch_d_rd = searched_best["test/rank_disparity_mean"] - default["test/rank_disparity_mean"]
    arch_d_error = searched_best["test/error_mean"] - default["test/error_mean"]
    lines += [
        "## Claims",
        "",
        f"- **Search efficiency** (table): SMAC's final hypervolume beats random search's in {wins} of "
        f"{len(search)} seeds; mean difference {fmt(difference, difference_sem, 4)}: "
        f"{verdict(difference, difference_sem, 1)}.",
        "- **Architectures matter for fairness** (does the searched front dominate?):",
        *dominance_claims(final, "val"),
        *dominance_claims(final, "test"),
        adverm_claim(adverm, "val"),
        adverm_claim(adverm, "test"),
        f"- **Mitigations vs architecture** (test): the lowest-error searched model ({searched_best['model']}) "
        f"differs from the default DPN by {arch_d_error:+.3f} error and {arch_d_rd:+.2f} rank disparity "
        "(means over seeds); the mitigations move them by:",
    ]
    for row in effects.itertuples(index=False):
        lines.append(
            f"  - {row.mitigation} on {row.model}: error {fmt(row.d_error, row.d_error_sem)}, rank disparity "
            f"{fmt(row.d_rank_disparity, row.d_rank_disparity_sem, 2)}; lowers rank disparity: "
            f"{verdict(row.d_rank_disparity, row.d_rank_disparity_sem, -1)}"
        )
    write_text_atomic(out / "report.md", "\n".join(lines) + "\n")
