"""Metering the compute a search consumes, and stopping it at a consumed-compute limit.

The unit is the epoch. ``run_search``'s ``total_budget`` sums the *nominal* budgets of trials, which is what
a search pays when every promoted configuration retrains from scratch; a search that continues promoted
configurations from their lower-budget checkpoints pays less. ``MeteredTarget`` wraps a target, charges each
call what it really trained, and refuses to start a call once the charges reach the limit, so that every
method of the benchmark is stopped by one rule on *consumed* compute.
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from fairnas.search import config_id
from fairnas.search.trial import Target

CostMeter = Callable[[dict[str, Any], int, float], float]
"""``meter(config, seed, budget)``, called right after the target ran: the epochs that call trained."""


class ComputeBudgetReached(BaseException):
    """Raised instead of starting a target call once the consumed compute has reached the limit.

    A ``BaseException``: ``fairnas.search.trial.evaluate_trial`` records any ``Exception`` as a crashed trial
    and goes on, whereas this must end the search (the finished trials stay in its trials.csv).
    """


@dataclass(frozen=True)
class Charge:
    """One target call and the epochs it trained."""

    config_id: str
    budget: float
    cost: float


class MeteredTarget:
    """``target`` that records a ``Charge`` per call and starts calls only while ``consumed < limit``.

    The last call may end past the limit by less than one call's cost (the rule of ``run_search``'s
    ``total_budget``, applied to consumed instead of nominal budget).
    """

    def __init__(self, target: Target, meter: CostMeter, limit: float):
        self._target = target
        self._meter = meter
        self.limit = float(limit)
        self.charges: list[Charge] = []

    @property
    def consumed(self) -> float:
        return sum(charge.cost for charge in self.charges)

    def __call__(self, config: dict[str, Any], seed: int, budget: float) -> Mapping[str, float]:
        if self.consumed >= self.limit:
            raise ComputeBudgetReached(f"consumed {self.consumed:g} of {self.limit:g} epochs")
        try:
            return self._target(config, seed, budget)
        finally:
            self._charge(config, seed, budget)

    def replay(self, trials: pd.DataFrame) -> None:
        """Charge the calls an interrupted invocation recorded (``trials`` in call order), before a resumed search
        makes more: the meter then sees them as if it had made them, and ``consumed`` counts them."""
        for config, seed, budget in zip(trials["config"], trials["seed"], trials["budget"], strict=True):
            self._charge(json.loads(config), int(seed), budget)

    def _charge(self, config: dict[str, Any], seed: int, budget: float) -> None:
        self.charges.append(Charge(config_id(config), float(budget), float(self._meter(config, seed, budget))))

    def costs_of(self, trials: pd.DataFrame) -> np.ndarray:
        """The charge of each row of ``trials`` (one row per call, in call order, as trials.csv keeps them)."""
        calls = [(charge.config_id, round(charge.budget, 9)) for charge in self.charges]
        rows = [(cid, round(float(b), 9)) for cid, b in zip(trials["config_id"], trials["budget"], strict=True)]
        if rows != calls:
            raise RuntimeError(f"{len(rows)} trials do not match the {len(calls)} target calls in order")
        return np.array([charge.cost for charge in self.charges], dtype=float)


class RetrainingCost:
    """Epochs a call trains under ``TrainingTarget``'s rule, for targets that do not train (analytic ones).

    Continuing, a configuration evaluated before at lower budgets for the same seed trains only from the
    highest of them; from scratch, every call trains its whole budget.
    """

    def __init__(self, continue_across_fidelities: bool):
        self.continue_across_fidelities = continue_across_fidelities
        self._evaluated: defaultdict[tuple[str, int], list[float]] = defaultdict(list)

    def __call__(self, config: dict[str, Any], seed: int, budget: float) -> float:
        evaluated = self._evaluated[config_id(config), seed]
        start = max((done for done in evaluated if done < budget), default=0.0)
        evaluated.append(float(budget))
        return float(budget) - (start if self.continue_across_fidelities else 0.0)
