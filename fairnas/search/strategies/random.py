"""``search.strategy=random``: random search, the baseline. It samples configurations uniformly
(seeded, reproducible) and runs each at max_budget."""

from __future__ import annotations

import copy
from typing import TYPE_CHECKING

from ConfigSpace import ConfigurationSpace

from fairnas.search.records import TrialRecord
from fairnas.search.strategies.base import BuildContext, Proposal, Registration, register
from fairnas.search.trial import TrialOutcome, native_config

if TYPE_CHECKING:
    from fairnas.search.settings import SearchSettings


class RandomStrategy:
    """Samples configurations uniformly (seeded, reproducible) and runs each at ``budget`` (search: max_budget)."""

    def __init__(self, configspace: ConfigurationSpace, *, budget: float, seed: int):
        self._space = copy.deepcopy(configspace)
        self._space.seed(seed)
        self._budget = float(budget)

    def ask(self) -> Proposal:
        return Proposal(native_config(self._space.sample_configuration()), self._budget)

    def tell(self, proposal: Proposal, outcome: TrialOutcome) -> None:
        """Random search ignores results."""

    def tell_record(self, record: TrialRecord) -> None:
        """Random search ignores results."""


def build(configspace: ConfigurationSpace, settings: SearchSettings, context: BuildContext) -> RandomStrategy:
    return RandomStrategy(configspace, budget=settings.max_budget, seed=settings.seed)


register(Registration("random", build, full_budget_only=True, title="random search"))
