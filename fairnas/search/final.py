"""The final-selection stage (thesis Sec. 4.5.1): the search's answer re-trained with seeds before it is trusted.

A search sees one training run per configuration (or ``n_seeds`` with SMAC), and among good configurations the
training seed's effect is as large as the gaps between them: the observed front is picked partly by noise. After the
search proper, :func:`select_candidates` takes the ``top_k`` best full-budget configurations by non-dominated sorting
of their observed objectives (the front, then the next layers; in the layer that does not fit whole, the most
isolated ones by crowding distance, NSGA-II's rule). Each is re-trained at the maximum budget with ``seeds`` training
seeds the search never used (:func:`fresh_seeds`), and the answer is the non-dominated set of the per-configuration
means over those seeds (the search's own runs are left out of the means: they are what selected the candidates).

``final_trials.csv`` records every re-training run as ``trials.csv`` records trials (appended atomically as each
finishes; the source of truth on resume: a finished run is read back, never repeated; a crash is recorded with the
crash cost and left out of the means). ``final_candidates.csv`` holds every candidate's ``<metric>_mean``,
``<metric>_se`` (standard error over seeds; empty with one seed) and ``n_seeds``, ``final_front.csv`` the candidates
on the front of means.
"""

from __future__ import annotations

import itertools
import json
import logging
import math
from collections import deque
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
from pymoo.operators.survival.rank_and_crowding.metrics import calc_crowding_distance
from pymoo.util.nds.non_dominated_sorting import NonDominatedSorting

from fairnas.groups import mean_se
from fairnas.io import write_csv_atomic
from fairnas.search.parallel import TrialPool
from fairnas.search.pareto import final_trials, non_dominated_mask
from fairnas.search.records import TrialRecord, TrialStore, run_key
from fairnas.search.trial import SUCCESS, Target, crashed_outcome, evaluate_trial, is_out_of_space

log = logging.getLogger("fairnas.search")

FINAL_TRIALS_FILE = "final_trials.csv"
FINAL_CANDIDATES_FILE = "final_candidates.csv"
FINAL_FRONT_FILE = "final_front.csv"
ANSWERS = ("means", "observed")
"""What the stage returns (``final.answer``): the front of the candidates' means, or the observed front's candidates,
re-measured. The front of means re-selects on the fresh seeds and keeps about two of three candidates; on the 6-seed
noisy table that costs 0.12-0.16 of held-out true share at 24 full trials (docs/search_strategies.md, pilot 7)."""


@dataclass(frozen=True)
class FinalResult:
    """The re-training runs (``final_trials.csv``), every candidate's summary and the front of means."""

    trials: pd.DataFrame
    candidates: pd.DataFrame
    front: pd.DataFrame

    @property
    def epochs(self) -> float:
        """Epochs the stage charged: the budgets of its runs."""
        return float(self.trials["budget"].sum()) if len(self.trials) else 0.0


def fresh_seeds(used: Iterable[int], n: int) -> list[int]:
    """The ``n`` smallest non-negative seeds not in ``used`` (the seeds the search trained with)."""
    used = {int(seed) for seed in used}
    return list(itertools.islice((seed for seed in itertools.count() if seed not in used), n))


def select_candidates(trials: pd.DataFrame, objectives: Sequence[str], max_budget: float, top_k: int) -> pd.DataFrame:
    """The ``top_k`` best successful full-budget configurations of ``trials`` (one row each: ``config_id``,
    ``config``, the observed objectives, averaged over seeds where a configuration has several, and its ``layer`` in
    the non-dominated sorting, 0 = the observed front), best layers first."""
    full = final_trials(trials, max_budget)
    if full.empty:
        return pd.DataFrame(columns=["config_id", "config", *objectives, "layer"])
    per_config = full.groupby("config_id", sort=False).agg(
        config=("config", "first"), **{name: (name, "mean") for name in objectives}
    )
    points = per_config[list(objectives)].to_numpy(dtype=float)
    chosen: list[int] = []
    layers: list[int] = []
    for layer, front in enumerate(NonDominatedSorting().do(points)):
        room = top_k - len(chosen)
        if len(front) > room:
            crowding = calc_crowding_distance(points[front]) if len(objectives) > 1 else -points[front, 0]
            front = front[np.argsort(-crowding, kind="stable")[:room]]
        chosen.extend(int(i) for i in front)
        layers.extend([layer] * len(front))
        if len(chosen) == top_k:
            break
    return per_config.iloc[chosen].assign(layer=layers).reset_index()


def run_final_stage(
    target: Target,
    candidates: pd.DataFrame,
    *,
    seeds: Sequence[int],
    budget: float,
    objectives: Sequence[str],
    metrics: Sequence[str],
    crash_costs: Sequence[float],
    hyperparameters: Sequence[str],
    pool: Callable[[], TrialPool],
    output_dir: Path,
    answer: str = "means",
) -> FinalResult:
    """Re-train every candidate with every seed at ``budget`` (the runs ``final_trials.csv`` lacks) through the
    pool ``pool()`` gives (asked for only when a run is left); summarise; the ``answer`` (:data:`ANSWERS`) is
    ``final_front.csv``. ``metrics`` are what the target returns
    and the stage records: the ``objectives``, then any others (e.g. test-split values); the front is built from
    the objectives."""
    crash = [*crash_costs, *[math.nan] * (len(metrics) - len(objectives))]
    store = TrialStore(
        output_dir / FINAL_TRIALS_FILE,
        metrics,
        hyperparameters,
        budgets=(budget, budget),
        nan_when_crashed=metrics[len(objectives) :],
    )
    done = {record.run_key for record in store.records}
    pending = deque(
        (json.loads(config), seed)
        for config in candidates["config"]
        for seed in seeds
        if run_key(json.loads(config), budget, seed) not in done
    )
    if pending:
        log.info("final stage: %d of %d re-training runs to go", len(pending), len(candidates) * len(seeds))
        workers, next_id = pool(), len(store.records)
        while pending or len(workers):
            while pending and len(workers) < workers.capacity:
                config, seed = pending.popleft()
                workers.submit((config, seed, next_id), evaluate_trial, target, config, seed, budget, metrics, crash)
                next_id += 1
            finished = workers.next_finished()
            if finished is None:  # nothing finished yet: fill the workers that joined
                continue
            (config, seed, trial_id), outcome, error = finished
            if error is not None and is_out_of_space(error):  # not the run's fault: stop, retry it on the next run
                raise error
            if error is not None:  # the worker itself failed (e.g. killed)
                outcome = crashed_outcome(metrics, crash, error, wall_time_s=math.nan)
            store.append(TrialRecord(trial_id, config, budget, seed, outcome))
            values = " ".join(f"{name}={outcome.values[name]:.4g}" for name in objectives)
            log.info(
                "final stage: %d runs done | seed %d of %s: %s %s",
                len(store.records),
                seed,
                run_key(config, budget, seed)[0],
                outcome.status,
                values,
            )
    trials = store.frame()
    summary = summarize_candidates(trials, candidates, seeds, objectives, metrics, hyperparameters)
    write_csv_atomic(summary, output_dir / FINAL_CANDIDATES_FILE)
    front = summary[in_answer(summary, answer)].drop(columns="on_front").reset_index(drop=True)
    write_csv_atomic(front, output_dir / FINAL_FRONT_FILE)
    return FinalResult(trials, summary, front)


def summarize_candidates(
    trials: pd.DataFrame,
    candidates: pd.DataFrame,
    seeds: Sequence[int],
    objectives: Sequence[str],
    metrics: Sequence[str],
    hyperparameters: Sequence[str] = (),
) -> pd.DataFrame:
    """One row per candidate: ``config_id``, ``config``, its ``hyperparameters``, ``layer``, ``<metric>_mean``,
    ``<metric>_se``, ``n_seeds`` (successful runs of ``seeds``), ``on_front`` (non-dominated among the candidates'
    means), sorted by the first objective's mean."""
    successes = trials[(trials["status"] == SUCCESS) & trials["seed"].isin(list(seeds))]
    rows = []
    for candidate in candidates.to_dict("records"):
        runs = successes[successes["config_id"] == candidate["config_id"]]
        config = json.loads(candidate["config"])
        row = {"config_id": candidate["config_id"], "config": candidate["config"], "layer": candidate["layer"]}
        row |= {name: config.get(name) for name in hyperparameters}
        for name in metrics:
            values = runs[name].astype(float)
            row[f"{name}_mean"], row[f"{name}_se"] = mean_se(values.dropna())
        row["n_seeds"] = len(runs)
        rows.append(row)
    summary = pd.DataFrame(rows)
    if summary.empty:
        return summary.assign(on_front=pd.Series(dtype=bool))
    means = summary[[f"{name}_mean" for name in objectives]].to_numpy(dtype=float)
    measured = summary["n_seeds"].to_numpy() > 0
    on_front = np.zeros(len(summary), dtype=bool)
    on_front[np.flatnonzero(measured)[non_dominated_mask(means[measured])]] = True
    summary["on_front"] = on_front
    return summary.sort_values(f"{objectives[0]}_mean", kind="stable").reset_index(drop=True)


def in_answer(summary: pd.DataFrame, answer: str) -> pd.Series:
    """Which candidates of :func:`summarize_candidates` the search returns: those on the front of their means
    (``means``) or, re-measured, those on the observed front with a successful fresh run (``observed``)."""
    if answer == "means" or summary.empty:
        return summary["on_front"].astype(bool)
    return (summary["layer"] == 0) & (summary["n_seeds"] > 0)
