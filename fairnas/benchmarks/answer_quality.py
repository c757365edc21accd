"""How good is a search's answer in truth? On a noisy tabular benchmark, the configurations a search returns are
judged at their true values, their means over the table's training seeds, not at the noisy values it observed (on a
surrogate benchmark, the surrogate's predicted means: :class:`~fairnas.benchmarks.surrogate_target.SurrogateTruth`).

- The answer: with the final stage, the front of the re-trained candidates' means (``final_front.csv``); without it,
  the front of the configurations' observed full-budget values (averaged per configuration when a method trained one
  with several seeds, as SMAC racing seeds does).
- ``true_share``: the hypervolume of the answer's configurations at their true values, as a share of the hypervolume
  of the table's own front of true values (the best any answer can be).
- The pick: the answer's configuration of lowest estimated error (what a user deploys); ``pick_<objective>`` its
  true values, ``pick_<objective>_gap`` its true value less the value the run reported for it (positive: the run
  promised better than the configuration is; the winner's curse of picking the best of noisy values).
- ``evaluated_true_share``: the true share of every configuration the run trained at the full budget, judged
  without the noisy selection: how much of the answer's shortfall is the search's (what it trained) and how much
  the selection's (what it returned from it).
- ``heldout_*``: the same, with each configuration's true values averaged only over table seeds the search never
  read. The seeds a search read also decided what it returned, so their mean flatters its answer; the held-out mean
  does not. On a real table this is the score every verdict is decided on
  (``HELD_OUT_SCORE`` of ``bench/comparison/plan.py``); the flattering ``true_share`` only stands beside it.
  The seeds that judge are fixed per table and search seed, whatever a search reads: the positions from
  ``Truth.readable`` on of each configuration's order. A search may read the positions before (its trials, the final
  stage's); one that reads more has no held-out value. Judging every method on the same number of seeds matters:
  the hypervolume of noisy values overstates that of their means, the more the noisier they are (on the 3-seed table,
  random search's answer scores 0.42 of share judged on two seeds and 0.70 on one), so answers judged on fewer seeds
  would be flattered by the judge's noise.

A table whose configurations hold different numbers of seeds (the 337-configuration table, whose best quarter got
more) is read in one order per search: the seeds every configuration has first, in an order drawn from the search's
seed, then the others (:meth:`Truth.seed_order`). The k-th training seed a search uses is each configuration's k-th
seed of that order, so configurations compared on the same training seed share its seed effect, as in a live search.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from fairnas.benchmarks.tables import true_values
from fairnas.search.hypervolume import hypervolume
from fairnas.search.pareto import non_dominated_mask
from fairnas.search.trial import SUCCESS

if TYPE_CHECKING:
    from fairnas.benchmarks.surrogate_target import SurrogateTruth


class Truth:
    """The true values of a noisy table and the order in which a search with a given seed reads its seeds."""

    def __init__(self, table: pd.DataFrame, objectives: Sequence[str], max_budget: float, readable: int | None = None):
        self.table, self.objectives, self.max_budget = table, tuple(objectives), int(max_budget)
        final = table[table["epoch"] == self.max_budget]
        by_config = final.groupby("config_id")["seed"]
        self.config_seeds = {identifier: frozenset(int(seed) for seed in seeds) for identifier, seeds in by_config}
        self.seeds = sorted(set().union(*self.config_seeds.values()))
        self.common_seeds = sorted(frozenset.intersection(*self.config_seeds.values()))
        """The seeds every configuration has."""
        self.readable = len(self.common_seeds) // 2 if readable is None else readable
        """How many training seeds a search may read and still be judged: every configuration's seeds from this
        position of its order on judge the answer (default: half the seeds every configuration has)."""
        if not 0 < self.readable < len(self.common_seeds):
            raise ValueError(
                f"readable={self.readable}: a search must read at least one seed and leave one of the "
                f"{len(self.common_seeds)} every configuration has to judge it"
            )
        columns = [f"val/{name}" for name in self.objectives]
        self._runs = final.set_index(["config_id", "seed"])[columns].sort_index()

    def seed_order(self, search_seed: int) -> list[int]:
        """The table seeds in the order a search with ``search_seed`` reads them: a seeded permutation of the
        :attr:`common_seeds`, then one of the others (those only some configurations have)."""
        rng = np.random.default_rng(search_seed)
        others = [seed for seed in self.seeds if seed not in set(self.common_seeds)]
        return [int(seed) for seed in [*rng.permutation(self.common_seeds), *rng.permutation(others)]]

    def config_order(self, identifier: str, order: Sequence[int]) -> list[int]:
        """The seeds of configuration ``identifier`` in a search's ``order``: its k-th is what the search's k-th
        training seed reads of it."""
        seeds = self.config_seeds[identifier]
        return [seed for seed in order if seed in seeds]

    def values(self, seeds: Sequence[int] | None = None) -> pd.DataFrame:
        """True values per configuration (index ``config_id``) over ``seeds`` (default: all)."""
        return true_values(self.table, self.objectives, self.max_budget, seeds=seeds)

    def judge(self, returned: pd.DataFrame, seeds: Sequence[int] | None = None) -> pd.DataFrame:
        """The true values over ``seeds`` of the configurations ``returned`` (indexed by ``config_id``)."""
        return self.values(seeds).loc[returned.index, list(self.objectives)]

    def judge_held_out(self, returned: pd.DataFrame, search_seed: int) -> pd.DataFrame:
        """The true values of the configurations ``returned`` over the seeds that judge a search with
        ``search_seed``: each configuration's seeds from position :attr:`readable` of its :meth:`config_order`."""
        order = self.seed_order(search_seed)
        rows = []
        for identifier in returned.index:
            judges = [(identifier, seed) for seed in self.config_order(identifier, order)[self.readable :]]
            rows.append(self._runs.loc[judges].to_numpy(dtype=float).mean(axis=0))
        return pd.DataFrame(rows, index=returned.index, columns=list(self.objectives))


def answer(trials: pd.DataFrame, objectives: Sequence[str], max_budget: float) -> pd.DataFrame:
    """The configurations a run returns with the values it estimated for them, sorted by the first objective, with
    their ``config`` when the trials have one: with a final stage (``stage`` ``final`` rows), the configurations its
    answer holds (``in_answer``; records without it: the front of its means), at their re-training runs' means; else
    the front of the search's full-budget trials."""
    final = trials[trials["stage"] == "final"] if "stage" in trials else trials.iloc[:0]
    if len(final) and "in_answer" in final:
        returned = _estimates(final[final["in_answer"].astype(bool)], objectives, max_budget)
        return returned.sort_values(list(objectives))
    estimates = _estimates(final if len(final) else trials, objectives, max_budget)
    if estimates.empty:
        return estimates
    front = estimates[non_dominated_mask(estimates[list(objectives)].to_numpy(dtype=float))]
    return front.sort_values(list(objectives))


def evaluated(trials: pd.DataFrame, objectives: Sequence[str], max_budget: float) -> pd.DataFrame:
    """Every configuration a run trained at the full budget (search or final stage), with its mean observed values:
    what a selection without noise could have returned from the same trials."""
    return _estimates(trials, objectives, max_budget)


def _estimates(trials: pd.DataFrame, objectives: Sequence[str], max_budget: float) -> pd.DataFrame:
    """Per configuration (index ``config_id``): the mean of its successful full-budget trials' ``objectives``, and its
    ``config`` when the trials have one."""
    rows = trials[np.isclose(trials["budget"].to_numpy(dtype=float), max_budget) & (trials["status"] == SUCCESS)]
    columns = {name: (name, "mean") for name in objectives}
    if "config" in rows:
        columns["config"] = ("config", "first")
    return rows.groupby("config_id").agg(**columns)


def quality(
    returned: pd.DataFrame,
    truth: Truth | SurrogateTruth,
    reference_point: Sequence[float],
    max_hypervolume: float,
    search_seed: int = 0,
    read: int = 0,
    trained: pd.DataFrame | None = None,
) -> dict[str, float]:
    """``true_share``, ``pick_<objective>`` and their ``heldout_`` versions of an answer (see the module docstring)
    of a search with ``search_seed`` that used ``read`` training seeds, and, given the configurations the run
    ``trained`` at the full budget (:func:`evaluated`), ``evaluated_true_share``: the true share of the best of them,
    the answer a selection without noise would return; NaN where the run returned nothing (for the held-out values
    also where it read more seeds than :attr:`Truth.readable`, or the truth has no seeds)."""
    result: dict[str, float] = {"answer_size": float(len(returned))}
    judged = isinstance(truth, Truth) and read <= truth.readable
    for prefix in ("", "heldout_"):
        values = None
        if not returned.empty and (judged or not prefix):
            values = truth.judge_held_out(returned, search_seed) if prefix else truth.judge(returned)
        if values is None:
            result |= {f"{prefix}true_share": np.nan}
            result |= {f"{prefix}pick_{name}{gap}": np.nan for name in truth.objectives for gap in ("", "_gap")}
            continue
        result[f"{prefix}true_share"] = hypervolume(values.to_numpy(dtype=float), reference_point) / max_hypervolume
        pick = values.iloc[0]  # ``returned`` is sorted by its estimated first objective
        result |= {f"{prefix}pick_{name}": float(pick[name]) for name in truth.objectives}
        estimated = returned.iloc[0]
        result |= {f"{prefix}pick_{name}_gap": float(pick[name] - estimated[name]) for name in truth.objectives}
    if trained is not None:
        volume = hypervolume(truth.judge(trained).to_numpy(dtype=float), reference_point) if len(trained) else np.nan
        result["evaluated_true_share"] = volume / max_hypervolume
    return result
