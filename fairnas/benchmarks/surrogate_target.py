"""A search target over a surrogate benchmark (:mod:`fairnas.benchmarks.surrogate`): a simulated training run instead
of a look-up, for any configuration of the space, and the surrogate's means as the truth a search's answer is judged
at."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd

from fairnas.benchmarks.surrogate import Surrogate


class SurrogateTarget:
    """``target(config, seed, budget)``: the objectives of ``config``'s simulated run with training ``seed`` after
    ``budget`` epochs (:meth:`Surrogate.sample`), in ``world`` (searches of the same world, e.g. of the same benchmark
    seed, see the same runs). Deterministic, so a re-asked trial gets the same values, and one run's epochs are
    correlated as a learning curve's are. A budget must be one of the surrogate's epochs."""

    def __init__(self, surrogate: Surrogate, objectives: Sequence[str], world: int = 0):
        unknown = sorted(set(objectives) - set(surrogate.objectives))
        if unknown:
            raise ValueError(f"the surrogate models {list(surrogate.objectives)}, not {unknown}")
        self.surrogate, self.world = surrogate, world
        self._columns = [surrogate.objectives.index(name) for name in objectives]
        self.objectives = tuple(objectives)

    def __call__(self, config: dict[str, Any], seed: int, budget: float) -> dict[str, float]:
        epoch = int(round(budget))
        if epoch not in self.surrogate.epochs or not np.isclose(epoch, budget):
            raise ValueError(f"budget {budget:g} is not one of the surrogate's epochs {self.surrogate.epochs}")
        run = self.surrogate.sample(config, seed, self.world)[self.surrogate.epochs.index(epoch)]
        return {name: float(run[column]) for name, column in zip(self.objectives, self._columns, strict=True)}


class SurrogateTruth:
    """The true values of a surrogate benchmark's configurations: the predicted means over training seeds at the
    last epoch (what infinitely many seeds would average to). It has no table seeds, so no answer is judged on
    held-out seeds (:func:`fairnas.benchmarks.answer_quality.quality` reports NaN for those)."""

    seeds: Sequence[int] = ()

    def __init__(self, surrogate: Surrogate, objectives: Sequence[str]):
        self.surrogate, self.objectives = surrogate, tuple(objectives)
        self._columns = [surrogate.objectives.index(name) for name in objectives]

    def seed_order(self, search_seed: int) -> list[int]:
        return []

    def judge(self, returned: pd.DataFrame, seeds: Sequence[int] | None = None) -> pd.DataFrame:
        """The true values of the configurations ``returned`` (a ``config`` column of JSON), indexed as it is."""
        configs = [json.loads(text) for text in returned["config"]]
        means = self.surrogate.mean(configs)[:, -1][:, self._columns]
        return pd.DataFrame(means, index=returned.index, columns=list(self.objectives))
