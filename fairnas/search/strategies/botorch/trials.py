"""The trials ``search.strategy=botorch`` knows: those told (observations, each counted once, replayed ones too) and
those asked and not yet told (pending), and what follows from them: which configurations are taken, the budget each
reached and the rung it would run next. A configuration only ever climbs, and a crashed one is never continued.
"""

from __future__ import annotations

import copy
import dataclasses
import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from fairnas.search.encoding import SpaceEncoding
from fairnas.search.records import TrialKey, trial_key
from fairnas.search.strategies.base import Proposal
from fairnas.search.strategies.botorch.design import MAX_DRAWS
from fairnas.search.trial import SUCCESS, TrialOutcome, config_id, native_config


@dataclasses.dataclass(frozen=True)
class Observation:
    """A told trial: its configuration (and id), the configuration's inputs ``x``, budget, objective values (None: no
    measurement, crashed) and the order it was told in."""

    config: dict[str, Any]
    cid: str
    x: np.ndarray
    budget: float
    values: tuple[float, ...] | None
    order: int


class Trials:
    """The told and pending trials of a search over ``encoding``'s space with budgets ``rungs``. A trial counts as
    crashed (values None) unless it succeeded with no objective at its crash cost (``crash_costs``)."""

    def __init__(
        self, encoding: SpaceEncoding, rungs: Sequence[float], objectives: Sequence[str], crash_costs: Sequence[float]
    ):
        self._encoding = encoding
        self._rungs = list(rungs)
        self._objectives = tuple(objectives)
        self._crash_costs = tuple(crash_costs)
        self.observations: dict[TrialKey, Observation] = {}
        self.pending: dict[TrialKey, Proposal] = {}
        self._by_config: dict[str, list[Observation]] = {}

    def ask(self, proposal: Proposal) -> None:
        """``proposal`` is running."""
        self.pending[trial_key(proposal.config, proposal.budget)] = proposal

    def tell(self, config: dict[str, Any], budget: float, outcome: TrialOutcome) -> None:
        """A trial finished: it is pending no more, and it is observed (once: a replayed trial is not counted again)."""
        key = trial_key(config, budget)
        self.pending.pop(key, None)
        if key in self.observations:
            return
        values = tuple(outcome.values[name] for name in self._objectives)
        measured = outcome.status == SUCCESS and all(
            value != cost for value, cost in zip(values, self._crash_costs, strict=True)
        )
        observation = Observation(
            native_config(config),
            key[0],
            self._encoding.encode(config),
            float(budget),
            values if measured else None,
            len(self.observations),
        )
        self.observations[key] = observation
        self._by_config.setdefault(observation.cid, []).append(observation)

    def known_configs(self) -> set[str]:
        """Ids of the configurations with a told or a pending trial."""
        return set(self._by_config) | self._pending_configs()

    def highest_budget(self, config: dict[str, Any]) -> float:
        """The highest budget a configuration was told or is running at (0: none)."""
        cid = config_id(config)
        told = [o.budget for o in self._by_config.get(cid, [])]
        return max([*told, *(key[1] for key in self.pending if key[0] == cid)], default=0.0)

    def latest_per_config(self) -> list[Observation]:
        """Each configuration's highest-budget observation, in the order the configurations were first told."""
        return [max(told, key=lambda o: o.budget) for told in self._by_config.values()]

    def next_rung(self, config: dict[str, Any]) -> float | None:
        """The rung a configuration would run next: the first for a new one, the one above its highest budget for a
        started one; None when it reached the maximum, crashed, or has a trial running."""
        cid = config_id(config)
        told = self._by_config.get(cid, [])
        if cid in self._pending_configs() or any(o.values is None for o in told):
            return None
        highest = max((o.budget for o in told), default=0.0)
        higher = [budget for budget in self._rungs if budget > highest and not math.isclose(budget, highest)]
        return higher[0] if higher else None

    def fresh(self, config: dict[str, Any], budget: float) -> Proposal | None:
        """A proposal of ``config`` at ``budget``, unless the configuration was told or is running at that budget or
        a higher one."""
        if budget <= self.highest_budget(config):
            return None
        return Proposal(config, budget)

    def random_proposal(self, budget: float, seed: int) -> Proposal | None:
        """A configuration no trial has, sampled by ConfigSpace (seeded by ``seed``), at ``budget``; None when
        ``MAX_DRAWS`` samples are all taken."""
        space = copy.deepcopy(self._encoding.configspace)
        space.seed(seed)
        known = self.known_configs()
        for _ in range(MAX_DRAWS):
            config = native_config(space.sample_configuration())
            if config_id(config) not in known:
                return Proposal(config, budget)
        return None

    def _pending_configs(self) -> set[str]:
        return {key[0] for key in self.pending}
