"""What a tabular benchmark holds: its size, front and seed noise (:func:`summary`), whether its space trades
error against rank disparity (:func:`landscape`), how well a surrogate fitted to it predicts held-out
configurations (:func:`surrogate_validation`), and whether the surrogate's simulated runs look like the table's real
ones (:func:`surrogate_realism`); ``python bench/tabular.py summary|landscape|surrogate`` prints them."""

from __future__ import annotations

import itertools
import time
from collections.abc import Sequence

import numpy as np
import pandas as pd

from fairnas.benchmarks.surrogate import INTERVAL, RunsTable, Surrogate, common_seeds, cross_validate, seed_statistics
from fairnas.benchmarks.tables import true_values
from fairnas.config import SPACES_DIR
from fairnas.search import load_space
from fairnas.search.pareto import non_dominated_mask


def summary(table: pd.DataFrame, spec: dict) -> str:
    """Size, the front of the true values (means over seeds) at the maximum budget, the spread of the objectives
    and, with several seeds, their seed noise."""
    objectives, max_budget = spec["objectives"], spec["max_budget"]
    values = true_values(table, objectives, max_budget)
    front = values[non_dominated_mask(values.to_numpy(dtype=float))].sort_values(objectives[0])
    configs = table.drop_duplicates("config_id").set_index("config_id")["config"]
    final = table[table["epoch"] == max_budget]
    lines = [
        f"{spec['configurations']} configurations x {len(spec['seeds'])} seeds x {max_budget} epochs; training "
        f"{spec['train_seconds']['total'] / 60:.0f} min (median run {spec['train_seconds']['median']:.0f} s)",
        values.describe().round(3).to_string(),
    ]
    if len(spec["seeds"]) > 1:
        noise = final.groupby("config_id")[[f"val/{name}" for name in objectives]].std().median()
        lines.append("median seed s.d. per configuration: " + ", ".join(f"{k} {v:.3f}" for k, v in noise.items()))
    lines += ["front of the means at the maximum budget:", front.assign(config=configs[front.index]).to_string()]
    return "\n".join(lines)


LEARNS = 0.9
"""Mean validation error below which a configuration counts as learning (chance is about 0.997)."""


def landscape(table: pd.DataFrame, spec: dict, split: str = "val", knob: str = "group_alpha") -> str:
    """Does the table's space trade error against rank disparity, and how much do the operations add to ``knob``?

    Over the configurations that learn (mean error below :data:`LEARNS`), at the maximum budget: Spearman's rank
    correlation of the means; the front of the means, and how many of its configurations are told apart, walking it
    in order of error and keeping a configuration when its paired difference (over the table's seeds) from the last
    one kept exceeds 2 standard errors in either objective; the share of the variance of each objective between the
    knob's values and between the operation triples; the best triple at each value of the knob, and Kendall's tau
    between the triples' error rankings at each pair of values."""
    from scipy.stats import kendalltau, spearmanr

    objectives, max_budget = list(spec["objectives"]), spec["max_budget"]
    final = table[table["epoch"] == max_budget]
    columns = [f"{split}/{name}" for name in objectives]
    means = final.groupby("config_id")[columns].mean()
    learning = means[means[columns[0]] < LEARNS]
    configs = final.drop_duplicates("config_id").set_index("config_id").loc[learning.index]
    rho = spearmanr(learning[columns[0]], learning[columns[1]]).statistic
    front = learning[non_dominated_mask(learning.to_numpy(dtype=float))].sort_values(columns[0])
    per_seed = final.pivot_table(index="seed", columns="config_id", values=columns)
    kept = [front.index[0]]
    for candidate in front.index[1:]:
        margins = []
        for column in columns:
            difference = per_seed[column][candidate] - per_seed[column][kept[-1]]
            margins.append(abs(difference.mean()) / difference.sem() if difference.sem() > 0 else np.inf)
        if max(margins) > 2:
            kept.append(candidate)
    triples = configs[["op0", "op1", "op2"]].astype(str).agg("-".join, axis=1)
    lines = [
        f"{len(learning)} of {len(means)} configurations learn ({split}, {len(spec['seeds'])} seeds, means):",
        f"Spearman(error, rank disparity) = {rho:.2f}",
        f"front of the means: {len(front)} configurations, {len(kept)} of them apart by more than 2 s.e. (paired):",
        front.assign(config=configs.loc[front.index, "config"], kept=front.index.isin(kept)).round(3).to_string(),
    ]
    for column in columns:
        total = ((learning[column] - learning[column].mean()) ** 2).sum()
        for name, groups in ((knob, configs[knob]), ("operations", triples)):
            between = learning.groupby(groups)[column].agg(["mean", "size"])
            share = (between["size"] * (between["mean"] - learning[column].mean()) ** 2).sum() / total
            lines.append(f"{column}: share of the variance between the values of {name}: {share:.2f}")
    ranking = learning.assign(triple=triples, knob=configs[knob])
    for value, rows in ranking.groupby("knob"):
        best = {column: rows.sort_values(column).iloc[0]["triple"] for column in columns}
        lines.append(f"{knob}={value}: lowest {columns[0]} {best[columns[0]]}, lowest {columns[1]} {best[columns[1]]}")
    values = sorted(ranking["knob"].unique())
    for a, b in itertools.combinations(values, 2):
        pair = ranking.pivot_table(index="triple", columns="knob", values=columns[0]).dropna(subset=[a, b])
        lines.append(
            f"Kendall's tau of the triples' {columns[0]} at {knob}={a} and {b}: "
            f"{kendalltau(pair[a], pair[b]).statistic:.2f} ({len(pair)} triples)"
        )
    return "\n".join(lines)


def surrogate_validation(
    table: pd.DataFrame,
    spec: dict,
    families: Sequence[str],
    group_by: Sequence[str] = (),
    folds: int = 5,
    train_fractions: Sequence[float] = (1.0,),
    repeats: int = 1,
) -> pd.DataFrame:
    """:func:`~fairnas.benchmarks.surrogate.cross_validate` of every mean-model family on the table, each
    configuration held out on its own and, with ``group_by``, whole groups of configurations sharing those values
    (one row per family and hold-out); a training fraction below 1 (a learning curve's point) is drawn ``repeats``
    times, and each draw is a row."""
    space = load_space(SPACES_DIR.parent / spec["space"])
    runs = RunsTable.of(table, spec["objectives"])
    holdouts = [()] + ([tuple(group_by)] if group_by else [])
    rows = []
    for family, held_out, fraction in itertools.product(families, holdouts, train_fractions):
        for repeat in range(repeats if fraction < 1 else 1):
            start = time.perf_counter()
            result = cross_validate(
                space, runs, family, folds=folds, group_by=held_out, train_fraction=fraction, subset_seed=repeat
            )
            held = "configuration" if not held_out else "+".join(held_out)
            rows.append(
                {
                    "family": family,
                    "held_out": held,
                    "train_fraction": fraction,
                    "repeat": repeat,
                    **result,
                    "seconds": time.perf_counter() - start,
                }
            )
    return pd.DataFrame(rows)


REALISM_WORLDS = 20
"""How many worlds (:meth:`~fairnas.benchmarks.surrogate.Surrogate.sample`) :func:`surrogate_realism` simulates the
table in."""
FRESH_DRAWS = 200
"""How many simulated runs of a configuration give the interval :func:`fresh_coverage` judges a fresh run by."""


def simulated_table(surrogate: Surrogate, configs: Sequence[dict], seeds: Sequence[int], world: int) -> np.ndarray:
    """[configuration, seed, epoch, objective]: the surrogate's runs of ``configs`` with ``seeds`` in ``world``."""
    return np.array([[surrogate.sample(config, seed, world) for seed in seeds] for config in configs])


def surrogate_realism(
    surrogate: Surrogate, runs: RunsTable, worlds: int = REALISM_WORLDS, epoch: int | None = None
) -> pd.DataFrame:
    """Do the surrogate's runs look like the table's? :func:`seed_statistics` of every objective at ``epoch``
    (default the last) over the seeds every configuration has, for the table (``real``) and for the same
    configurations and seeds simulated in each of ``worlds`` worlds (``simulated``: the mean over the worlds, with
    their s.d.; the shift as its root mean square over the worlds, the t statistic and the share as their means of
    absolute values). One row per objective and figure. The surrogate may be fitted to ``runs`` itself: the figures
    ask whether the benchmark's own runs look like the runs it was built from."""
    seeds = common_seeds(runs.values[:, :, -1, 0])
    column = runs.epochs.index(epoch if epoch is not None else runs.epochs[-1])
    real = runs.values[:, seeds, column]
    error = runs.objectives.index("error")
    simulated = [
        simulated_table(surrogate, runs.configs, [runs.seeds[s] for s in seeds], world)[:, :, column]
        for world in range(worlds)
    ]
    rows = []
    for k, name in enumerate(runs.objectives):
        measured = seed_statistics(real[:, :, k], real[:, :, error])
        drawn = pd.DataFrame([seed_statistics(table[:, :, k], table[:, :, error]) for table in simulated])
        for figure, value in measured.items():
            if figure == "shift":
                typical, spread = float(np.sqrt((drawn[figure] ** 2).mean())), float(drawn[figure].abs().std())
            elif figure == "shift_t":
                value, typical, spread = abs(value), float(drawn[figure].abs().mean()), float(drawn[figure].abs().std())
            else:
                typical, spread = float(drawn[figure].mean()), float(drawn[figure].std())
            rows.append(
                {"objective": name, "figure": figure, "real": value, "simulated": typical, "simulated_sd": spread}
            )
    return pd.DataFrame(rows)


def fresh_coverage(surrogate: Surrogate, runs: RunsTable, draws: int = FRESH_DRAWS, world: int = 0) -> pd.DataFrame:
    """The share of the table's runs on seeds the surrogate was not fitted on (``runs``: those runs alone, e.g. the
    top region's extra seeds of ``dpn_paper_top5`` beside a surrogate fitted to ``dpn_paper_sampled``) inside the
    central :data:`INTERVAL` interval of ``draws`` simulated runs of their configuration (seeds from 10,000 in
    ``world``), per objective at the last epoch: the coverage of fresh real runs. One row per objective."""
    rows = []
    present = ~np.isnan(runs.values[:, :, -1, 0])
    simulated = simulated_table(surrogate, runs.configs, range(10_000, 10_000 + draws), world)[:, :, -1]
    low, high = np.quantile(simulated, [(1 - INTERVAL) / 2, (1 + INTERVAL) / 2], axis=1)  # [configuration, objective]
    for k, name in enumerate(runs.objectives):
        fresh = runs.values[:, :, -1, k]
        inside = (fresh >= low[:, None, k]) & (fresh <= high[:, None, k])
        rows.append({"objective": name, "fresh_runs": int(present.sum()), "coverage": float(inside[present].mean())})
    return pd.DataFrame(rows)


def realism_report(table: pd.DataFrame, spec: dict, worlds: int = REALISM_WORLDS) -> pd.DataFrame:
    """:func:`surrogate_realism` of the table's surrogate (:func:`~fairnas.benchmarks.problems.table_surrogate`, on
    its spec's objectives) against the table itself and, where the table has seeds beyond those every
    configuration has (a top region's), :func:`fresh_coverage` of those runs by the surrogate fitted without them
    (rows ``figure == "fresh_coverage"``; ``real`` is the coverage, ``simulated`` the interval's nominal one)."""
    from fairnas.benchmarks.problems import table_surrogate  # problems imports this module's neighbours

    _, runs, surrogate = table_surrogate(table, spec)
    report = [surrogate_realism(surrogate, runs, worlds)]
    common = [runs.seeds[s] for s in common_seeds(runs.values[:, :, -1, 0])]
    if len(common) < len(runs.seeds):
        fitted = table_surrogate(table[table["seed"].isin(common)], spec)[2]
        fresh_runs = RunsTable.of(table[~table["seed"].isin(common)], spec["objectives"])
        coverage = fresh_coverage(fitted, fresh_runs)
        report.append(
            pd.DataFrame(
                {
                    "objective": coverage["objective"],
                    "figure": "fresh_coverage",
                    "real": coverage["coverage"],
                    "simulated": INTERVAL,
                    "simulated_sd": np.nan,
                    "runs": coverage["fresh_runs"],
                }
            )
        )
    return pd.concat(report, ignore_index=True)
