"""The fidelity policies of ``search.strategy=botorch`` (``search.botorch.fidelity``), one class per mode behind
:class:`FidelityPolicy`, :data:`POLICIES` naming them: the budget a trial gets, which trials the model is fitted on
and with which input and target columns, how pending trials enter the acquisition, and how configuration and budget
are picked. The rungs are MO-ASHA's: min_budget * eta^k below max_budget, then max_budget.

- ``full`` (:class:`FullBudget`): every trial at the maximum budget; the model sees the configuration only.
- ``early_stop`` (:class:`EarlyStop`): the model also sees the budget (a column in [0, 1], log scale), and the lower
  rungs serve to stop configurations early. The initial design climbs every rung. After it, each ask compares two
  ways to spend epochs towards one more full-budget result: start the configuration maximising qLogNEHVI at the
  full budget (at min_budget; max_budget epochs to go), or take a started configuration one rung up (max_budget
  minus its budget to go, continuing its checkpoint), scored by its own qLogNEHVI at the full budget given what its
  lower rungs showed. The higher log improvement per epoch still to train wins. Pending trials enter the
  acquisition at the full budget, where they head.
- ``momf`` (:class:`Momf`): BoTorch's MOMF acquisition picks configuration and rung together (a trust objective
  budget / max_budget beside the objectives, cost = the rung's epochs), as in BoTorch's tutorial; its initial
  design draws each configuration's rung with probability inversely proportional to its cost.
"""

from __future__ import annotations

import abc
import dataclasses
import math
from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np
import torch

from fairnas.search.strategies.base import Proposal
from fairnas.search.strategies.botorch import model as gp
from fairnas.search.strategies.botorch.acquisition import Acquisition
from fairnas.search.strategies.botorch.trials import Observation, Trials
from fairnas.search.trial import config_id


@dataclasses.dataclass(frozen=True)
class Fitted:
    """What a suggestion of the model works with: the Gaussian process fitted on ``observations`` (inputs ``X``,
    targets ``Y``), the pending trials' inputs ``X_pending`` (None: none) and the ask's ``seed``."""

    model: gp.SingleTaskGP
    X: torch.Tensor
    Y: torch.Tensor
    observations: Sequence[Observation]
    X_pending: torch.Tensor | None
    seed: int


def rungs(min_budget: float, max_budget: float, eta: int) -> list[float]:
    """The budgets a trial may get: min_budget * eta^k below max_budget, then max_budget (MO-ASHA's rungs)."""
    budgets = []
    budget = float(min_budget)
    while budget < max_budget and not math.isclose(budget, max_budget):
        budgets.append(budget)
        budget *= eta
    return [*budgets, float(max_budget)]


class FidelityPolicy(abc.ABC):
    """How one fidelity mode spends budgets, over ``rungs`` (the last: ``max_budget``), the search's ``trials`` and
    ``acquisition``; ``seed`` is the search's. The defaults are the multi-fidelity modes': a budget column after
    the configuration's, new configurations at the first rung."""

    def __init__(self, rungs: Sequence[float], max_budget: float, trials: Trials, acquisition: Acquisition, seed: int):
        self.rungs = list(rungs)
        self.max_budget = max_budget
        self._trials = trials
        self._acquisition = acquisition
        self._seed = seed

    # ------------------------------------------------------------------------------------------ initial design

    @property
    def start_budget(self) -> float:
        """The budget a new configuration starts at (also after a failed fit)."""
        return self.rungs[0]

    def initial_budget(self, index: int) -> float:
        """The budget of the ``index``-th configuration of the initial design (or of the Sobol sequence)."""
        return self.start_budget

    def initial_proposal(self, design: Sequence[dict[str, Any]]) -> Proposal | None:
        """The initial design's next trial: its first configuration no trial has; None once all are asked."""
        known = self._trials.known_configs()
        for index, config in enumerate(design):
            if config_id(config) not in known:
                return Proposal(config, self.initial_budget(index))
        return None

    def climb(self) -> Proposal | None:
        """While the model lacks data: a started configuration's next trial (None: a new configuration instead)."""
        return None

    # ----------------------------------------------------------------------------------------- the model's data

    def ready(self, observations: Sequence[Observation]) -> bool:
        """Whether the model can be fitted on ``observations``: two trials, one of them at the full budget."""
        return len(observations) >= 2 and any(o.budget == self.max_budget for o in observations)

    def model_observations(self, observations: Iterable[Observation]) -> list[Observation]:
        """The told trials the model may be fitted on."""
        return list(observations)

    def input_row(self, x: np.ndarray, budget: float) -> list[float]:
        """A told trial's model inputs: the configuration's columns, then the budget's."""
        return [*x, self.fidelity_input(budget)]

    def pending_row(self, x: np.ndarray, budget: float) -> list[float]:
        """A pending trial's inputs in the acquisition (``X_pending``)."""
        return self.input_row(x, budget)

    def target_row(self, values: Sequence[float], budget: float) -> list[float]:
        """A told trial's model targets: the objectives negated (maximised)."""
        return [-value for value in values]

    def fidelity_input(self, budget: float) -> float:
        """A budget as a model input: 0 at min_budget, 1 at max_budget, linear in log budget."""
        return math.log(budget / self.rungs[0]) / math.log(self.max_budget / self.rungs[0])

    # ---------------------------------------------------------------------------------------------- the pick

    @abc.abstractmethod
    def propose(self, fitted: Fitted) -> Proposal | None:
        """The model's next trial (a random configuration where the acquisition lands on a taken one)."""


class FullBudget(FidelityPolicy):
    """``full``: every trial at the maximum budget; the model sees the configuration only."""

    @property
    def start_budget(self) -> float:
        return self.max_budget

    def model_observations(self, observations: Iterable[Observation]) -> list[Observation]:
        """The full-budget trials only."""
        return [o for o in observations if o.budget == self.max_budget]

    def input_row(self, x: np.ndarray, budget: float) -> list[float]:
        return list(x)

    def propose(self, fitted: Fitted) -> Proposal | None:
        """The configuration maximising qLogNEHVI over the trials."""
        acquisition = self._acquisition.improvement(fitted.model, fitted.X, fitted.Y, fitted.X_pending, fitted.seed)
        x, _ = self._acquisition.maximize(acquisition)
        config = self._acquisition.encoding.decode(x)
        return self._trials.fresh(config, self.max_budget) or self._trials.random_proposal(self.max_budget, fitted.seed)


class EarlyStop(FidelityPolicy):
    """``early_stop``: a configuration climbs the rungs one at a time while its improvement per epoch still to train
    beats a new configuration's."""

    def initial_proposal(self, design: Sequence[dict[str, Any]]) -> Proposal | None:
        """The initial design's next trial: its first configuration's next rung (every configuration climbs every
        rung)."""
        for config in design:
            budget = self._trials.next_rung(config)
            if budget is not None:
                return Proposal(config, budget)
        return None

    def climb(self) -> Proposal | None:
        """While no trial reached the maximum budget (the initial design crashed): the earliest started
        configuration that may go one rung up."""
        for observation in sorted(self._trials.latest_per_config(), key=lambda o: o.order):
            budget = self._trials.next_rung(observation.config)
            if budget is not None:
                return Proposal(observation.config, budget)
        return None

    def pending_row(self, x: np.ndarray, budget: float) -> list[float]:
        """At the full budget, where a pending trial heads."""
        return [*x, 1.0]

    def propose(self, fitted: Fitted) -> Proposal | None:
        """A new configuration at the first rung or a started one a rung up: the higher qLogNEHVI at the full
        budget (over the full-budget trials) less the log of the epochs still to train."""
        encoding, trials = self._acquisition.encoding, self._trials
        at_max = torch.tensor([o.budget == self.max_budget for o in fitted.observations])
        X, Y = fitted.X[at_max], fitted.Y[at_max]
        acquisition = self._acquisition.improvement(fitted.model, X, Y, fitted.X_pending, fitted.seed)
        x, value = self._acquisition.maximize(acquisition, fixed={encoding.dim: 1.0}, n_extra=1)
        score = value - math.log(self.max_budget)
        choice: tuple[dict[str, Any], float | None] = (encoding.decode(x[: encoding.dim]), None)
        started = [
            (o.config, o.x, budget)
            for o in trials.latest_per_config()
            if (budget := trials.next_rung(o.config)) is not None
        ]
        if started:
            inputs = torch.tensor(np.array([[*x, 1.0] for _, x, _ in started]), dtype=gp.DTYPE)
            with torch.no_grad():
                values = acquisition(inputs.unsqueeze(-2)).tolist()
            for (config, _, budget), log_improvement in zip(started, values, strict=True):
                to_go = self.max_budget - trials.highest_budget(config)
                if log_improvement - math.log(to_go) > score:
                    score, choice = log_improvement - math.log(to_go), (config, budget)
        config, budget = choice
        if budget is None:  # a new configuration, unless the optimiser landed on a started one
            budget = trials.next_rung(config) if config_id(config) in trials.known_configs() else self.rungs[0]
        if budget is None:
            return trials.random_proposal(self.rungs[0], fitted.seed)
        return trials.fresh(config, budget) or trials.random_proposal(self.rungs[0], fitted.seed)


class Momf(FidelityPolicy):
    """``momf``: BoTorch's MOMF acquisition picks configuration and rung together."""

    def initial_budget(self, index: int) -> float:
        """A rung drawn with probability inversely proportional to its cost (BoTorch's MOMF tutorial), seeded by the
        search's seed and ``index``."""
        weights = 1 / np.array(self.rungs)
        return float(np.random.default_rng([self._seed, index]).choice(self.rungs, p=weights / weights.sum()))

    def ready(self, observations: Sequence[Observation]) -> bool:
        """Two trials at any budgets."""
        return len(observations) >= 2

    def target_row(self, values: Sequence[float], budget: float) -> list[float]:
        """The objectives negated, then the trust objective budget / max_budget."""
        return [*super().target_row(values, budget), budget / self.max_budget]

    def propose(self, fitted: Fitted) -> Proposal | None:
        """The configuration and rung maximising MOMF (at the first rung when no improvement is expected)."""
        low, high = math.log(self.rungs[0]), math.log(self.max_budget)

        def cost(X: torch.Tensor) -> torch.Tensor:
            """The rung's epochs."""
            return torch.exp(low + X[..., -1:] * (high - low))

        acquisition = self._acquisition.momf(fitted.model, fitted.Y, fitted.X_pending, cost, fitted.seed)
        codes = [self.fidelity_input(budget) for budget in self.rungs]
        dim = self._acquisition.encoding.dim
        x, value = self._acquisition.maximize(acquisition, extra_discrete={dim: codes}, n_extra=1)
        budget = self.rungs[int(np.argmin([abs(code - x[-1]) for code in codes]))] if value > 0 else self.rungs[0]
        config = self._acquisition.encoding.decode(x[:dim])
        return self._trials.fresh(config, budget) or self._trials.random_proposal(budget, fitted.seed)


POLICIES: dict[str, type[FidelityPolicy]] = {"full": FullBudget, "early_stop": EarlyStop, "momf": Momf}
"""``search.botorch.fidelity`` -> its policy."""
