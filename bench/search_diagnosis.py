"""Where each search strategy's budget goes on the surrogate benchmark of the paper's DPN space, and why the
model-based ones do not pull ahead of random search (issue 60, item 1: "diagnose before designing").

It reads the trials (``consumed.csv``) of the planned comparison's finished runs (``bench/search_efficiency.py
--problem surrogate``, one folder ``<method>_<epochs>`` per cell, the seeds listed in its ``--quality-output`` CSV)
and judges every configuration they trained at the surrogate's noise-free means (the truth of "true share"). No
search is run. Per method and budget, mean ± standard error over seeds:

- **budget**: the share of consumed epochs spent at each fidelity (the epochs a trial trained, charged at the
  budget it reached) and by the final stage; distinct configurations; the share of search trials that re-evaluate
  a configuration seen before (same ``config_id``, any budget, so promotions count; and at the same budget, which on
  the deterministic surrogate repeats a run already seen); near-duplicates: new configurations whose operations,
  head and optimizer (``op0``-``op2``, ``head``, ``optimizer``) an earlier trial already had;
- **regions**: the share of the configurations a run trained at the full budget whose truth lies in the top quartile
  or decile of the space by true error and by true hypervolume (the box one configuration dominates inside the
  reference point; 0 outside it), the quantiles estimated on a fixed Sobol sample of the space, overall and in the
  first and second half of the run (a search that learns concentrates later); the same for every new configuration
  a run proposed at any budget; the share outside the reference box;
- **promotions** (multi-fidelity methods): how many of the configurations that reached each budget lie in the top
  quartile by true error at the last epoch;
- **the answer**: the pick's (the answer's lowest-error configuration) observed minus true error and rank disparity
  (the winner's curse), beside the same gap averaged over every configuration trained at the full budget (the noise
  without the selection);
- **the fidelity signal** (of the space, not of a method): Kendall's tau between each epoch's error and the last
  epoch's over the Sobol sample and within its top quartile, at the truth and for one simulated run; the seed noise
  against the true spread in the top quartile;
- **model quality** (``--model-seeds`` runs per cell): a random forest fitted to the first half of a run's search
  trials (observed values, the budget as an input) under three encodings of the operations (one-hot; the choice
  index; kernel size and where the batch norm sits), and its Kendall tau against the true last-epoch values of the
  configurations of the run's second half and of a fixed sample of the space; also fitted to the true means, to
  separate what the noise costs from what the model cannot represent.

    PYTHONHASHSEED=0 OMP_NUM_THREADS=1 python bench/search_diagnosis.py --runs outputs/search_comparison \\
        --quality results/search_comparison/quality.csv --epochs 120 240 \\
        --output results/search_diagnosis/diagnosis.csv --runs-output outputs/search_diagnosis_runs.csv
"""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from scipy import stats
from sklearn.ensemble import RandomForestRegressor

from bench.comparison.methods import METHODS
from fairnas.benchmarks.answer_quality import answer, evaluated
from fairnas.benchmarks.problems import surrogate_problem
from fairnas.benchmarks.surrogate import Encoding
from fairnas.groups import mean_se
from fairnas.io import write_text_atomic
from fairnas.models.ops import OPERATIONS
from fairnas.search.encoding import CATEGORICAL, SpaceEncoding
from fairnas.search.pareto import non_dominated_mask

FIDELITIES = (1, 2, 3, 4)
MAX_BUDGET = 4
ARCHITECTURE = ("op0", "op1", "op2", "head", "optimizer")
"""The discrete part of a configuration: two trials that share it are near-duplicates."""
OPS = ("op0", "op1", "op2")
OBJECTIVES = ("error", "rank_disparity")
REGIONS = {"top25_error": 0.25, "top10_error": 0.10, "top10_hv": 0.10, "top01_hv": 0.01}
"""Region -> the share of the space it holds (lowest true error, or highest true hypervolume). A top quarter by
hypervolume does not exist on the paper's space: 85 % of it lies outside the reference box (hypervolume 0), so the
box itself (``in_box``, :func:`in_regions`) stands in for it."""
SAMPLE = 4096
SAMPLE_SEED = 1
"""The Sobol sample the regions' quantiles are estimated on (seed 1: not the design of the problem's best front)."""
METHOD_ORDER = ("random", "smac", "moasha", "nsga2", "random+final", "smac+final", "moasha+final", "nsga2+final")
MODEL_METHODS = ("random", "smac", "moasha", "nsga2")
"""The searches whose trials the model-quality check refits (the +final variants search the same way)."""


# --- one run's trials ---------------------------------------------------------------------------------------------


def search_trials(trials: pd.DataFrame) -> pd.DataFrame:
    """The search stage's trials in the order they ran."""
    search = trials[trials["stage"] == "search"] if "stage" in trials else trials
    return search.sort_values("trial_id", kind="stable")


def budget_use(trials: pd.DataFrame, fidelities: Sequence[int] = FIDELITIES) -> dict[str, float]:
    """Where one run's consumed epochs went: ``epochs_at_<b>`` (share of the epochs trained by trials that reached
    budget b, search and final stage), ``final_share`` (the final stage's), ``trials`` and ``configs`` (distinct) of
    the search, ``repeat_share`` (search trials of a configuration an earlier trial had, at any budget),
    ``same_budget_repeat_share`` (at the same budget), ``near_duplicate_share`` (search trials of a new configuration
    whose :data:`ARCHITECTURE` an earlier trial had) and ``repeat_epoch_share`` (the epochs of repeats)."""
    cost = trials["cost"].to_numpy(dtype=float)
    total = cost.sum()
    budget = trials["budget"].to_numpy(dtype=float)
    out = {f"epochs_at_{b}": float(cost[np.isclose(budget, b)].sum() / total) for b in fidelities}
    stage = trials["stage"].to_numpy() if "stage" in trials else np.full(len(trials), "search")
    out["final_share"] = float(cost[stage == "final"].sum() / total)
    search = search_trials(trials)
    seen: set[str] = set()
    seen_at: set[tuple[str, float]] = set()
    architectures: set[tuple] = set()
    repeats = same_budget = near = 0
    repeat_cost = 0.0
    for row in search.itertuples(index=False):
        key = (row.config_id, float(row.budget))
        architecture = tuple(getattr(row, name) for name in ARCHITECTURE)
        if row.config_id in seen:
            repeats += 1
            repeat_cost += float(row.cost)
            same_budget += key in seen_at
        elif architecture in architectures:
            near += 1
        seen.add(row.config_id)
        seen_at.add(key)
        architectures.add(architecture)
    n = len(search)
    out |= {
        "trials": float(n),
        "configs": float(len(seen)),
        "repeat_share": repeats / n if n else np.nan,
        "same_budget_repeat_share": same_budget / n if n else np.nan,
        "near_duplicate_share": near / n if n else np.nan,
        "repeat_epoch_share": repeat_cost / total,
    }
    return out


def first_seen(trials: pd.DataFrame) -> list[str]:
    """The configurations of ``trials`` (in their order), each once, where it first appears."""
    return list(dict.fromkeys(trials["config_id"]))


def halves(items: Sequence[Any]) -> tuple[Sequence[Any], Sequence[Any]]:
    """The first and the second half of ``items`` (the middle one of an odd count goes to neither)."""
    half = len(items) // 2
    return items[:half], items[len(items) - half :]


def region_shares(trials: pd.DataFrame, regions: pd.DataFrame, max_budget: float = MAX_BUDGET) -> dict[str, float]:
    """Per boolean column r of ``regions`` (indexed by ``config_id``): ``full_<r>``, the share of the configurations
    the search trained at ``max_budget`` that lie in r, and ``full_<r>_first`` / ``_second`` / ``_shift`` (second
    minus first) over the first and second half of them in the order they first reached it; ``new_<r>`` and its
    halves the same for every configuration the search proposed, at any budget."""
    search = search_trials(trials)
    full = first_seen(search[np.isclose(search["budget"].to_numpy(dtype=float), max_budget)])
    proposed = first_seen(search)
    out: dict[str, float] = {}
    for prefix, configs in (("full", full), ("new", proposed)):
        first, second = halves(configs)
        for region in regions.columns:
            inside = regions[region]
            share = {
                part: float(inside.loc[list(ids)].mean()) if len(ids) else np.nan
                for part, ids in (("", configs), ("_first", first), ("_second", second))
            }
            out[f"{prefix}_{region}"] = share[""]
            out[f"{prefix}_{region}_first"] = share["_first"]
            out[f"{prefix}_{region}_second"] = share["_second"]
            out[f"{prefix}_{region}_shift"] = share["_second"] - share["_first"]
            out[f"{prefix}_{region}_count"] = float(inside.loc[list(configs)].sum())
    out["full_configs"] = float(len(full))
    return out


def proposal_curve(
    trials: pd.DataFrame, inside: pd.Series, window: int = 10, windows: int = 13, name: str = "top25_error"
) -> dict[str, float]:
    """``curve_<name>_<k>``: the share of the search's new configurations number ``k * window`` to ``(k + 1) *
    window - 1`` (in the order first proposed, at any budget) lying in the region ``inside``; NaN past the last."""
    proposed = first_seen(search_trials(trials))
    out = {}
    for k in range(windows):
        ids = proposed[k * window : (k + 1) * window]
        out[f"curve_{name}_{k}"] = float(inside.loc[ids].mean()) if ids else np.nan
    return out


def promotion_shares(
    trials: pd.DataFrame, inside: pd.Series, fidelities: Sequence[int] = FIDELITIES, name: str = "top25_error"
) -> dict[str, float]:
    """``reached_<b>_<name>``: the share of the configurations that reached budget b in the search lying in the
    region ``inside`` (boolean, by ``config_id``); ``promoted_<name>``: of those that reached the last budget after a
    lower one; ``direct_<name>``: of those started at the last budget."""
    search = search_trials(trials)
    budget = search["budget"].to_numpy(dtype=float)
    out = {}
    for b in fidelities:
        ids = search.loc[np.isclose(budget, b), "config_id"].unique()
        out[f"reached_{b}_{name}"] = float(inside.loc[ids].mean()) if len(ids) else np.nan
    lowest = search.groupby("config_id")["budget"].min()
    top = search.loc[np.isclose(budget, fidelities[-1]), "config_id"].unique()
    promoted = [c for c in top if lowest[c] < fidelities[-1]]
    direct = [c for c in top if lowest[c] >= fidelities[-1]]
    out[f"promoted_{name}"] = float(inside.loc[promoted].mean()) if promoted else np.nan
    out[f"direct_{name}"] = float(inside.loc[direct].mean()) if direct else np.nan
    out["promoted_count"] = float(len(promoted))
    return out


def winners_curse(
    trials: pd.DataFrame, truth: pd.DataFrame, objectives: Sequence[str] = OBJECTIVES, max_budget: float = MAX_BUDGET
) -> dict[str, float]:
    """``pick_<objective>_gap``: the answer's pick (lowest estimated first objective,
    :func:`~fairnas.benchmarks.answer_quality.answer`) at its true value (``truth``, by ``config_id``) less the value
    the run reported for it; ``trained_<objective>_gap``: the same averaged over every configuration trained at the
    full budget (the noise without the selection); ``pick_<region>`` of ``truth``'s boolean columns: whether the pick
    lies there; ``pick_error_excess``: the pick's true error less the lowest true error of the configurations trained
    at the full budget (0: the selection found the truly best of them), and ``pick_is_best`` (whether it did)."""
    returned = answer(trials, objectives, max_budget)
    trained = evaluated(trials, objectives, max_budget)
    out: dict[str, float] = {}
    for name in objectives:
        if returned.empty:
            out[f"pick_{name}_gap"] = out[f"trained_{name}_gap"] = np.nan
            continue
        pick = returned.index[0]
        out[f"pick_{name}_gap"] = float(truth.loc[pick, name] - returned.iloc[0][name])
        out[f"trained_{name}_gap"] = float((truth.loc[trained.index, name] - trained[name]).mean())
    for column in truth.columns:
        if truth[column].dtype == bool:
            out[f"pick_{column}"] = float(truth.loc[returned.index[0], column]) if len(returned) else np.nan
    if len(returned):
        best = float(truth.loc[trained.index, objectives[0]].min())
        excess = float(truth.loc[returned.index[0], objectives[0]]) - best
        out[f"pick_{objectives[0]}_excess"], out["pick_is_best"] = excess, float(excess <= 0.0)
    return out


# --- the space ----------------------------------------------------------------------------------------------------


def point_hypervolume(values: np.ndarray, reference_point: Sequence[float]) -> np.ndarray:
    """The hypervolume of each row of ``values`` (2 objectives, minimised) alone: the box it dominates inside
    ``reference_point``, 0 outside it."""
    widths = np.clip(np.asarray(reference_point, dtype=float) - values, 0.0, None)
    return widths.prod(axis=1)


def region_thresholds(sample: pd.DataFrame) -> dict[str, float]:
    """The cut of each region of :data:`REGIONS` on the sample's true ``error`` and ``hv`` (at the last epoch)."""
    cuts = {}
    for region, share in REGIONS.items():
        column = region.split("_", 1)[1]
        cuts[region] = float(sample[column].quantile(share if column == "error" else 1 - share))
    return cuts


def in_regions(values: pd.DataFrame, cuts: Mapping[str, float], reference_point: Sequence[float]) -> pd.DataFrame:
    """Boolean columns, one per region: error at or below its cut, hypervolume above its cut (above 0 at least, so
    configurations outside the box are in no hypervolume region); ``in_box`` (hypervolume above 0) and
    ``outside_box`` (hypervolume 0), the latter split into
    ``error_outside`` (error at or past the reference point) and ``rank_disparity_outside`` (error inside, rank
    disparity at or past it)."""
    regions = {}
    for region, cut in cuts.items():
        column = region.split("_", 1)[1]
        regions[region] = values[column] <= cut if column == "error" else values[column] > max(cut, 0.0)
    regions["in_box"] = values["hv"] > 0.0
    regions["outside_box"] = values["hv"] <= 0.0
    regions["error_outside"] = values["error"] >= reference_point[0]
    regions["rank_disparity_outside"] = (values["error"] < reference_point[0]) & (
        values["rank_disparity"] >= reference_point[1]
    )
    return pd.DataFrame(regions, index=values.index)


def kendall(x: np.ndarray, y: np.ndarray, rng: np.random.Generator, resamples: int = 100) -> tuple[float, float]:
    """Kendall's tau of ``x`` and ``y`` and its bootstrap standard error (resampling the pairs)."""
    tau = float(stats.kendalltau(x, y).statistic)
    boots = []
    for _ in range(resamples):
        rows = rng.integers(0, len(x), len(x))
        boots.append(stats.kendalltau(x[rows], y[rows]).statistic)
    return tau, float(np.std(boots, ddof=1))


def fidelity_signal(
    true: np.ndarray, observed: np.ndarray, noise_sd: np.ndarray, rng: np.random.Generator
) -> pd.DataFrame:
    """Arrays [configuration, epoch, objective] of the sample: true means, one simulated run, its predicted seed s.d.
    Rows: Kendall's tau of each epoch's value (true, or one observed run) with the true last-epoch value, over the
    sample and within its top quartile by true last-epoch error; and, in the top quartile, the s.d. of the true values
    against the median seed s.d. at the last epoch; per epoch, :func:`promotion_rules` on the observed run."""
    top = true[:, -1, 0] <= np.quantile(true[:, -1, 0], 0.25)
    rows = []
    for k, objective in enumerate(OBJECTIVES):
        for where, mask in (("all", np.ones(len(true), dtype=bool)), ("top25_error", top)):
            target = true[mask, -1, k]
            for epoch in range(true.shape[1]):
                for kind, values in (("true", true), ("observed", observed)):
                    if kind == "true" and epoch == true.shape[1] - 1:
                        continue
                    tau, se = kendall(values[mask, epoch, k], target, rng)
                    rows.append(
                        {
                            "objective": objective,
                            "configs": where,
                            "quantity": f"tau_{kind}_epoch{epoch + 1}_vs_true_last",
                            "mean": tau,
                            "se": se,
                            "n": int(mask.sum()),
                        }
                    )
        if k == 0:
            for epoch in range(true.shape[1]):
                for rule, (mean, se) in promotion_rules(observed[:, epoch], top, rng).items():
                    rows.append(
                        {
                            "objective": "both",
                            "configs": "rungs of 16",
                            "quantity": f"promoted_top25_epoch{epoch + 1}_{rule}",
                            "mean": mean,
                            "se": se,
                            "n": 2000,
                        }
                    )
        spread = float(true[top, -1, k].std(ddof=1))
        noise = float(np.median(noise_sd[top, -1, k]))
        for quantity, value in (
            ("true_sd_top25", spread),
            ("seed_sd_top25", noise),
            ("seed_over_true_sd", noise / spread),
        ):
            rows.append(
                {
                    "objective": objective,
                    "configs": "top25_error",
                    "quantity": quantity,
                    "mean": value,
                    "se": np.nan,
                    "n": int(top.sum()),
                }
            )
    return pd.DataFrame(rows)


def promotion_rules(
    observed: np.ndarray, inside: np.ndarray, rng: np.random.Generator, rung: int = 16, repeats: int = 2000
) -> dict[str, tuple[float, float]]:
    """How well each promotion rule picks, from one observed run at one epoch (``observed``: [configuration,
    objective], error first): over ``repeats`` random rungs of ``rung`` configurations, the share of the half it
    promotes that lies in ``inside`` (e.g. the top quartile by true last-epoch error), mean and standard error. Rules:
    ``error`` (lowest observed error), ``nondominated`` (non-dominated sorting, ties by error, as a multi-objective
    successive halving ranks), ``parego`` (ParEGO's augmented Chebyshev scalarisation, a fresh random weight per rung,
    rho 0.05, objectives scaled to the rung's range) and ``random``."""
    shares: dict[str, list[float]] = {"error": [], "nondominated": [], "parego": [], "random": []}
    keep = rung // 2
    for _ in range(repeats):
        rows = rng.choice(len(observed), rung, replace=False)
        values = observed[rows]
        shares["error"].append(inside[rows[np.argsort(values[:, 0], kind="stable")[:keep]]].mean())
        fronts = np.zeros(rung, dtype=int)
        left, front = np.arange(rung), 0
        while len(left):
            mask = non_dominated_mask(values[left])
            fronts[left[mask]], left, front = front, left[~mask], front + 1
        shares["nondominated"].append(inside[rows[np.lexsort((values[:, 0], fronts))[:keep]]].mean())
        weight = rng.dirichlet(np.ones(values.shape[1]))
        scaled = (values - values.min(axis=0)) / np.maximum(values.max(axis=0) - values.min(axis=0), 1e-12)
        scalar = (weight * scaled).max(axis=1) + 0.05 * (weight * scaled).sum(axis=1)
        shares["parego"].append(inside[rows[np.argsort(scalar, kind="stable")[:keep]]].mean())
        shares["random"].append(inside[rows[:keep]].mean())
    return {rule: mean_se(values) for rule, values in shares.items()}


# --- model quality ------------------------------------------------------------------------------------------------


class OperationFeatures:
    """Configurations as features with each operation as what it is (:data:`fairnas.models.ops.OPERATIONS`): its
    kernel size (1, 3, 5 as 0, 0.5, 1) and where its batch norm sits (pre, post, none; one-hot), every other
    categorical one-hot and every number as in :class:`~fairnas.search.encoding.SpaceEncoding` (-1 inactive)."""

    NORMS = ("pre", "post", "none")

    def __init__(self, configspace: Any, operations: Sequence[str] = OPS):
        self._space = SpaceEncoding(configspace)
        self._operations = set(operations)

    def _width(self, column: Any) -> int:
        if column.name in self._operations:
            return 1 + len(self.NORMS)
        return len(column.values) if column.kind == CATEGORICAL else 1

    def slot(self, name: str) -> int:
        """The first feature of hyperparameter ``name``."""
        start = 0
        for column in self._space.columns:
            if column.name == name:
                return start
            start += self._width(column)
        raise KeyError(name)

    def __call__(self, configs: Sequence[Mapping[str, Any]]) -> np.ndarray:
        rows = []
        for config in configs:
            row: list[float] = []
            for value, column in zip(self._space.encode(config), self._space.columns, strict=True):
                if column.name in self._operations:
                    spec = OPERATIONS[int(config[column.name])]
                    row += [(spec.kernel_size - 1) / 4, *(float(spec.norm == norm) for norm in self.NORMS)]
                elif column.kind == CATEGORICAL:
                    row += [float(value == choice) for choice in column.values]
                else:
                    row.append(float(value))
            rows.append(row)
        return np.array(rows, dtype=float)


def encodings(configspace: Any) -> dict[str, Callable[[Sequence[Mapping[str, Any]]], np.ndarray]]:
    """The encodings the model-quality check compares: ``onehot`` (the surrogate's and BoTorch's), ``index`` (each
    categorical as its choice index, as a tree over ConfigSpace's vector reads it) and ``features``
    (:class:`OperationFeatures`)."""
    space = SpaceEncoding(configspace)
    return {
        "onehot": Encoding(configspace),
        "index": lambda configs: np.array([space.encode(config) for config in configs]),
        "features": OperationFeatures(configspace),
    }


def model_taus(
    trials: pd.DataFrame,
    truth: Callable[[Sequence[Mapping[str, Any]]], np.ndarray],
    encode: Callable[[Sequence[Mapping[str, Any]]], np.ndarray],
    sample: Sequence[Mapping[str, Any]],
    sample_truth: np.ndarray,
    seed: int = 0,
) -> dict[str, float]:
    """Fit a random forest per objective to the first half of the run's search trials (inputs: the encoding and the
    budget; target: the observed value, or with ``true_`` the true mean at that budget) and return Kendall's tau of
    its predictions at the last budget against the true last-epoch values (``truth(configs)``: [configuration,
    epoch, objective]) of the configurations of the second half (``<target>_<objective>_queried``) and of ``sample``
    (``..._space``, and ``..._space_top25`` over its quarter lowest in true error; ``sample_truth`` its true
    last-epoch values [configuration, objective])."""
    search = search_trials(trials)
    first, second = halves(search)
    configs = [json.loads(text) for text in first["config"]]
    later = {c: json.loads(text) for c, text in zip(second["config_id"], second["config"], strict=True)}
    later_configs = list(later.values())
    out: dict[str, float] = {}
    if len(first) < 4 or len(later_configs) < 3:
        return out
    budget = first["budget"].to_numpy(dtype=float)[:, None] / MAX_BUDGET
    inputs = np.hstack([encode(configs), budget])
    epochs = np.rint(first["budget"].to_numpy(dtype=float)).astype(int) - 1
    true_first = truth(configs)[np.arange(len(configs)), epochs]
    later_truth = truth(later_configs)[:, -1]
    targets = {"observed": first[list(OBJECTIVES)].to_numpy(dtype=float), "true": true_first}
    queried = np.hstack([encode(later_configs), np.ones((len(later_configs), 1))])
    space = np.hstack([encode(sample), np.ones((len(sample), 1))])
    good = sample_truth[:, 0] <= np.quantile(sample_truth[:, 0], 0.25)
    for target, values in targets.items():
        for k, objective in enumerate(OBJECTIVES):
            forest = RandomForestRegressor(n_estimators=30, min_samples_leaf=2, max_features=0.5, random_state=seed)
            forest.fit(inputs, values[:, k])
            out[f"{target}_{objective}_queried"] = float(
                stats.kendalltau(forest.predict(queried), later_truth[:, k]).statistic
            )
            predicted = forest.predict(space)
            out[f"{target}_{objective}_space"] = float(stats.kendalltau(predicted, sample_truth[:, k]).statistic)
            out[f"{target}_{objective}_space_top25"] = float(
                stats.kendalltau(predicted[good], sample_truth[good, k]).statistic
            )
    return out


# --- reading the runs ---------------------------------------------------------------------------------------------


def run_files(runs: Path, method: str, epochs: int, seeds: Sequence[int]) -> dict[int, Path]:
    """Seed -> the ``consumed.csv`` of each finished run of (method, epochs) under ``runs`` (folders
    ``<method>_<epochs>/<problem>/<method>[@setting]/seed<N>``); seeds without one are left out."""
    files = {}
    for path in (runs / f"{method}_{epochs}").glob("*/*/seed*/consumed.csv"):
        label = path.parent.parent.name.split("@", 1)[0]
        seed = int(path.parent.name.removeprefix("seed"))
        if label == method and seed in set(seeds):
            files[seed] = path
    return dict(sorted(files.items()))


def summarise(per_run: pd.DataFrame, keys: Sequence[str] = ("method", "epochs")) -> pd.DataFrame:
    """Long table: per ``keys`` and metric (every other numeric column of ``per_run``), ``mean``, ``se``
    (:func:`fairnas.groups.mean_se` over the runs with a value) and ``n``."""
    metrics = [c for c in per_run.columns if c not in {*keys, "seed"} and pd.api.types.is_numeric_dtype(per_run[c])]
    rows = []
    for group, frame in per_run.groupby(list(keys), sort=False):
        for metric in metrics:
            values = frame[metric].dropna()
            mean, se = mean_se(values)
            rows.append(
                {**dict(zip(keys, group, strict=True)), "metric": metric, "mean": mean, "se": se, "n": len(values)}
            )
    return pd.DataFrame(rows)


def cell(summary: pd.DataFrame, method: str, epochs: int, metric: str, digits: int = 3, scale: float = 1.0) -> str:
    row = summary[(summary["method"] == method) & (summary["epochs"] == epochs) & (summary["metric"] == metric)]
    if row.empty or not np.isfinite(row["mean"].iloc[0]):
        return "–"
    mean, se = row["mean"].iloc[0] * scale, row["se"].iloc[0] * scale
    return f"{mean:.{digits}f} ± {se:.{digits}f}" if np.isfinite(se) else f"{mean:.{digits}f}"


def table(
    summary: pd.DataFrame,
    columns: Mapping[str, str],
    methods: Sequence[str],
    epochs: Sequence[int],
    digits: int = 3,
    scale: float = 1.0,
) -> str:
    """A markdown table: one row per (method, epochs) present, one column per metric (header -> metric)."""
    lines = ["| method | epochs | " + " | ".join(columns) + " |", "| --- | --- |" + " --- |" * len(columns)]
    for budget in epochs:
        for method in methods:
            if summary[(summary["method"] == method) & (summary["epochs"] == budget)].empty:
                continue
            cells = [cell(summary, method, budget, metric, digits, scale) for metric in columns.values()]
            lines.append(
                f"| {METHODS[method].label if method in METHODS else method} | {budget} | " + " | ".join(cells) + " |"
            )
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument(
        "--runs", type=Path, default=Path("outputs/search_comparison"), help="the comparison's work dirs"
    )
    parser.add_argument(
        "--quality",
        type=Path,
        nargs="+",
        default=[Path("results/search_comparison/quality.csv")],
        help="--quality-output CSVs naming the finished (method, budget, seed) runs",
    )
    parser.add_argument("--methods", nargs="+", default=list(METHOD_ORDER), choices=list(METHODS))
    parser.add_argument("--epochs", nargs="+", type=int, default=[120, 240], help="total budgets (consumed epochs)")
    parser.add_argument("--max-seeds", type=int, default=None, help="at most this many seeds per cell (first ones)")
    parser.add_argument("--model-seeds", type=int, default=30, help="runs per cell the model-quality check refits")
    parser.add_argument("--output", type=Path, help="summary CSV (method, epochs, metric, mean, se, n)")
    parser.add_argument("--runs-output", type=Path, help="per-run CSV")
    args = parser.parse_args(argv)
    started = time.perf_counter()
    from fairnas.benchmarks.design import sobol_design  # scipy's quasi-random sequences; only needed here

    problem = surrogate_problem()
    surrogate = problem.truth.surrogate  # type: ignore[union-attr]
    columns = [surrogate.objectives.index(name) for name in OBJECTIVES]

    def truth(configs: Sequence[Mapping[str, Any]]) -> np.ndarray:
        return surrogate.mean(configs)[:, :, columns]

    sample = sobol_design(problem.space, SAMPLE, seed=SAMPLE_SEED)
    sample_true = truth(sample)
    sample_values = pd.DataFrame({"error": sample_true[:, -1, 0], "rank_disparity": sample_true[:, -1, 1]})
    sample_values["hv"] = point_hypervolume(sample_true[:, -1], problem.reference_point)
    cuts = region_thresholds(sample_values)
    observed = np.stack([surrogate.sample(config, seed=0, world=0)[:, columns] for config in sample])
    noise = surrogate.noise_sd(sample)[:, :, columns]
    signal = fidelity_signal(sample_true, observed, noise, np.random.default_rng(0))
    print(
        f"Sobol sample of {len(sample)} configurations (seed {SAMPLE_SEED}); reference point "
        f"{tuple(round(v, 3) for v in problem.reference_point)}; region cuts "
        + ", ".join(f"{k} {v:.4g}" for k, v in cuts.items())
        + f"; outside the box: {float((sample_values['hv'] <= 0).mean()):.3f}\n"
    )

    quality = pd.concat([pd.read_csv(path) for path in args.quality], ignore_index=True)
    trials: dict[tuple[str, int, int], pd.DataFrame] = {}
    for epochs in args.epochs:
        for method in args.methods:
            seeds = sorted(quality.loc[(quality["method"] == method) & (quality["budget"] == epochs), "seed"])
            files = run_files(args.runs, method, epochs, seeds)
            for seed in list(files)[: args.max_seeds]:
                trials[method, epochs, seed] = pd.read_csv(files[seed])
    if not trials:
        parser.error(f"no finished runs of {args.methods} at {args.epochs} epochs under {args.runs}")
    configs = {
        c: text for frame in trials.values() for c, text in zip(frame["config_id"], frame["config"], strict=True)
    }
    ids = list(configs)
    true = np.concatenate(
        [truth([json.loads(configs[c]) for c in ids[i : i + 20000]]) for i in range(0, len(ids), 20000)]
    )
    values = pd.DataFrame({"error": true[:, -1, 0], "rank_disparity": true[:, -1, 1]}, index=ids)
    values["hv"] = point_hypervolume(true[:, -1], problem.reference_point)
    regions = in_regions(values, cuts, problem.reference_point)
    judged = pd.concat([values, regions], axis=1)
    print(f"{len(trials)} runs, {len(ids)} distinct configurations judged ({time.perf_counter() - started:.0f} s)\n")

    model_space = sample[:: max(1, len(sample) // 512)]
    model_space_truth = sample_true[:: max(1, len(sample) // 512), -1]
    coders = encodings(problem.space.configspace)
    refitted = {
        (m, e, s)
        for m, e in {(m, e) for m, e, _ in trials}
        for s in sorted(s for m2, e2, s in trials if (m2, e2) == (m, e))[: args.model_seeds]
    }
    rows, model_rows = [], []
    for (method, epochs, seed), frame in trials.items():
        row: dict[str, Any] = {"method": method, "epochs": epochs, "seed": seed}
        row |= budget_use(frame)
        row |= region_shares(frame, regions)
        row |= promotion_shares(frame, regions["top25_error"])
        row |= proposal_curve(frame, regions["top25_error"])
        row |= winners_curse(frame, judged)
        rows.append(row)
        if method in MODEL_METHODS and (method, epochs, seed) in refitted:
            for name, encode in coders.items():
                taus = model_taus(frame, truth, encode, model_space, model_space_truth, seed=seed)
                model_rows.append({"method": method, "epochs": epochs, "seed": seed, "encoding": name, **taus})
    per_run = pd.DataFrame(rows)
    summary = summarise(per_run)
    models = pd.DataFrame(model_rows)
    model_summary = summarise(models, keys=("method", "epochs", "encoding")) if len(models) else pd.DataFrame()

    methods = [m for m in METHOD_ORDER if m in args.methods]
    print("### Where the budget goes (share of consumed epochs; search trials)\n")
    print(
        table(
            summary,
            {
                "at 1": "epochs_at_1",
                "at 2": "epochs_at_2",
                "at 3": "epochs_at_3",
                "at 4": "epochs_at_4",
                "final stage": "final_share",
                "trials": "trials",
                "distinct configs": "configs",
                "repeats (any budget)": "repeat_share",
                "repeats (same budget)": "same_budget_repeat_share",
                "near-duplicates": "near_duplicate_share",
            },
            methods,
            args.epochs,
            digits=3,
        )
    )
    print("\n### Regions: configurations trained at the full budget (share in each region; first / second half)\n")
    print(
        table(
            summary,
            {
                "full configs": "full_configs",
                "top 25 % error": "full_top25_error",
                "first half": "full_top25_error_first",
                "second half": "full_top25_error_second",
                "top 10 % error": "full_top10_error",
                "in the box": "full_in_box",
                "box: first half": "full_in_box_first",
                "box: second half": "full_in_box_second",
                "top 10 % HV": "full_top10_hv",
                "top 1 % HV": "full_top01_hv",
                "error outside": "full_error_outside",
                "only rank disp. outside": "full_rank_disparity_outside",
            },
            methods,
            args.epochs,
        )
    )
    print("\n### Regions: how many configurations trained at the full budget lie in each region\n")
    print(
        table(
            summary,
            {
                "top 25 % error": "full_top25_error_count",
                "top 10 % error": "full_top10_error_count",
                "in the box": "full_in_box_count",
                "top 10 % HV": "full_top10_hv_count",
                "top 1 % HV": "full_top01_hv_count",
            },
            methods,
            args.epochs,
            digits=2,
        )
    )
    print("\n### Regions: every new configuration proposed, at any budget\n")
    print(
        table(
            summary,
            {
                "top 25 % error": "new_top25_error",
                "first half": "new_top25_error_first",
                "second half": "new_top25_error_second",
                "top 10 % error": "new_top10_error",
                "in the box": "new_in_box",
                "top 10 % HV": "new_top10_hv",
            },
            methods,
            args.epochs,
        )
    )
    print("\n### New configurations in the top 25 % by true error, by when they were proposed (10 at a time)\n")
    windows = sorted({int(m.rsplit("_", 1)[1]) for m in summary["metric"] if m.startswith("curve_top25_error_")})
    print(
        table(
            summary,
            {f"{10 * k}-{10 * k + 9}": f"curve_top25_error_{k}" for k in windows},
            methods,
            args.epochs,
            digits=2,
        )
    )
    print("\n### Promotions: share in the top 25 % by true error of the configurations that reached each budget\n")
    print(
        table(
            summary,
            {
                "reached 1": "reached_1_top25_error",
                "reached 2": "reached_2_top25_error",
                "reached 4": "reached_4_top25_error",
                "promoted to 4": "promoted_top25_error",
                "started at 4": "direct_top25_error",
                "promoted (count)": "promoted_count",
            },
            methods,
            args.epochs,
        )
    )
    print(
        "\n### The answer: true minus reported value (winner's curse), pick against every full-budget configuration\n"
    )
    print(
        table(
            summary,
            {
                "pick: error gap": "pick_error_gap",
                "trained: error gap": "trained_error_gap",
                "pick: rank disp. gap": "pick_rank_disparity_gap",
                "trained: rank disp. gap": "trained_rank_disparity_gap",
                "pick in top 10 % error": "pick_top10_error",
                "pick in top 10 % HV": "pick_top10_hv",
                "pick in the box": "pick_in_box",
                "pick: true error above the best trained": "pick_error_excess",
                "pick is the best trained": "pick_is_best",
            },
            methods,
            args.epochs,
        )
    )
    print("\n### The fidelity signal over the Sobol sample (Kendall tau with the true epoch-4 value; bootstrap s.e.)\n")
    print(signal.to_markdown(index=False, floatfmt=".3f"))
    if len(model_summary):
        print("\n### Model quality: a forest on a run's first half, Kendall tau with the truth (second half; space)\n")
        for budget in args.epochs:
            lines = [
                "| method | encoding | error: queried | error: space | error: space, top 25 % | rank disp.: queried "
                "| rank disp.: space | error, true targets: queried | error, true targets: space, top 25 % "
                "| rank disp., true targets: queried |",
                "| --- |" + " --- |" * 9,
            ]
            for method in [m for m in methods if m in MODEL_METHODS]:
                for name in coders:
                    part = model_summary[(model_summary["encoding"] == name)]
                    metrics = (
                        "observed_error_queried",
                        "observed_error_space",
                        "observed_error_space_top25",
                        "observed_rank_disparity_queried",
                        "observed_rank_disparity_space",
                        "true_error_queried",
                        "true_error_space_top25",
                        "true_rank_disparity_queried",
                    )
                    cells = [cell(part, method, budget, metric) for metric in metrics]
                    if all(c == "–" for c in cells):
                        continue
                    lines.append(f"| {METHODS[method].label} | {name} | " + " | ".join(cells) + " |")
            print(f"\n{budget} consumed epochs:\n\n" + "\n".join(lines))

    if args.output is not None:
        space_rows = signal.assign(
            method="(space)",
            epochs=np.nan,
            metric=signal["objective"] + "/" + signal["configs"] + "/" + signal["quantity"],
        )[["method", "epochs", "metric", "mean", "se", "n"]]
        cut_rows = pd.DataFrame(
            [
                {"method": "(space)", "epochs": np.nan, "metric": f"cut/{k}", "mean": v, "se": np.nan, "n": len(sample)}
                for k, v in cuts.items()
            ]
        )
        parts = [summary, space_rows, cut_rows]
        if len(model_summary):
            parts.append(
                model_summary.assign(metric="model/" + model_summary["encoding"] + "/" + model_summary["metric"]).drop(
                    columns="encoding"
                )
            )
        out = pd.concat(parts, ignore_index=True)
        args.output.parent.mkdir(parents=True, exist_ok=True)
        write_text_atomic(args.output, out.to_csv(index=False, float_format="%.6g"))
    if args.runs_output is not None:
        args.runs_output.parent.mkdir(parents=True, exist_ok=True)
        write_text_atomic(args.runs_output, per_run.to_csv(index=False, float_format="%.6g"))
    print(f"\n{time.perf_counter() - started:.0f} s")


if __name__ == "__main__":
    main()
