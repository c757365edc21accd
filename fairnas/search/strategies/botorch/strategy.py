"""``BotorchStrategy``: multi-objective Bayesian optimisation with a Gaussian process (BoTorch), through ask/tell.

A composition of small pieces, each in its own module of this package:

- :mod:`~fairnas.search.strategies.botorch.design`: the initial design, the first distinct configurations of a
  scrambled Sobol sequence (seeded by ``search.seed``), and further Sobol points while the model lacks data;
- :mod:`~fairnas.search.strategies.botorch.fidelity`: the fidelity policy of ``search.botorch.fidelity`` (``full``,
  ``early_stop``, ``momf``): the budgets, the model's columns, pending trials, and the pick of configuration and
  budget;
- :mod:`~fairnas.search.strategies.botorch.fitting`: the model's data (crashed trials, the cap) and its fit (the
  refit schedule);
- :mod:`~fairnas.search.strategies.botorch.acquisition`: the acquisition functions with the search's settings;
- :mod:`~fairnas.search.strategies.botorch.trials`: the told and pending trials.

The model takes over once the policy finds it enough data (two trials, one at the full budget; two at any budget for
``momf``); until then, the initial design, then started configurations a rung up (``early_stop``) or further Sobol
points. A configuration picked again at a higher budget is proposed as the same configuration, so a target that
continues lower-budget checkpoints (``TrainingTarget``) trains only the epochs between. The reported front is the
full-budget trials', as for every strategy.

Trials asked and not yet told are pending: they enter the acquisition as ``X_pending``, and no trial is proposed
twice. Every ask runs under a seed drawn from ``search.seed`` and the number of trials told and pending, so a search
repeats itself given the same results; a resumed search starts from the trials an earlier run finished
(``history``, read from trials.csv) and never proposes one of them again.
"""

from __future__ import annotations

import contextlib
import logging
import random
import warnings
import zlib
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING

import torch
from ConfigSpace import ConfigurationSpace

from fairnas.search.encoding import SpaceEncoding
from fairnas.search.records import TrialRecord
from fairnas.search.strategies.base import Proposal
from fairnas.search.strategies.botorch import model as gp
from fairnas.search.strategies.botorch.acquisition import Acquisition
from fairnas.search.strategies.botorch.design import SobolDesign, initial_design_size
from fairnas.search.strategies.botorch.fidelity import POLICIES, Fitted, rungs
from fairnas.search.strategies.botorch.fitting import ModelData, ModelFit
from fairnas.search.strategies.botorch.trials import Trials
from fairnas.search.trial import TrialOutcome

if TYPE_CHECKING:
    from fairnas.search.settings import SearchSettings

log = logging.getLogger("fairnas.search")


class BotorchStrategy:
    """A Gaussian-process search over ``configspace`` through ask/tell; ``history``: trials of an earlier run."""

    def __init__(
        self, configspace: ConfigurationSpace, settings: SearchSettings, *, history: Sequence[TrialRecord] = ()
    ):
        options = settings.options
        self._seed = settings.seed
        self._encoding = SpaceEncoding(configspace)
        self.rungs = rungs(settings.min_budget, settings.max_budget, settings.eta)
        self.fidelity = options.fidelity if len(self.rungs) > 1 else "full"
        self._trials = Trials(self._encoding, self.rungs, settings.objectives, settings.crash_costs)
        self._design = SobolDesign(self._encoding, initial_design_size(settings, self._encoding.dim), settings.seed)
        acquisition = Acquisition(self._encoding, options, settings.reference_point, len(settings.objectives))
        self._policy = POLICIES[self.fidelity](
            self.rungs, settings.max_budget, self._trials, acquisition, settings.seed
        )
        self._data = ModelData(self._policy, self._encoding, options.crashed, options.max_observations)
        self._fit = ModelFit(self._encoding, options.fit_maxiter, options.refit_every)
        for record in history:
            self.tell_record(record)

    def ask(self) -> Proposal | None:
        """The next trial; None when every configuration is known or running (the search is then exhausted)."""
        seed = self._ask_seed()
        with _seeded(seed), warnings.catch_warnings():
            warnings.simplefilter("ignore", gp.BotorchWarning)
            proposal = self._policy.initial_proposal(self._design.initial()) or self._model_proposal(seed)
        if proposal is not None:
            self._trials.ask(proposal)
        return proposal

    def tell(self, proposal: Proposal, outcome: TrialOutcome) -> None:
        self._trials.tell(proposal.config, proposal.budget, outcome)

    def tell_record(self, record: TrialRecord) -> None:
        """A trial an earlier run finished: it joins the model's data (once; it is never proposed again)."""
        self._trials.tell(record.config, record.budget, record.outcome)

    def _model_proposal(self, seed: int) -> Proposal | None:
        """The model's pick, or while it lacks data (or the space has no input) a climb or a Sobol point."""
        observations = self._data.observations(self._trials.observations.values())
        if self._encoding.dim == 0 or not self._policy.ready(observations):
            return self._policy.climb() or self._sobol_proposal()
        X, Y = self._data.inputs(observations), self._data.targets(observations)
        try:
            model = self._fit.fit(X, Y)
        except gp.ModelFittingError as error:
            log.warning("the Gaussian process did not fit (%s); a random configuration instead", error)
            return self._trials.random_proposal(self._policy.start_budget, seed)
        X_pending = self._data.pending(self._trials.pending.values())
        return self._policy.propose(Fitted(model, X, Y, observations, X_pending, seed))

    def _sobol_proposal(self) -> Proposal | None:
        """The next Sobol configuration no trial has, at the policy's initial budget for its index."""
        found = self._design.next_unknown(self._trials.known_configs())
        if found is None:
            return None
        index, config = found
        return Proposal(config, self._policy.initial_budget(index))

    def _ask_seed(self) -> int:
        """The seed of this ask: the search's seed and the number of trials told and pending."""
        return zlib.crc32(f"{self._seed}|{len(self._trials.observations)}|{len(self._trials.pending)}".encode())


@contextlib.contextmanager
def _seeded(seed: int) -> Iterator[None]:
    """torch's and Python's random generators seeded for a block (BoTorch's optimiser uses both), then restored."""
    state = random.getstate()
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        random.seed(seed)
        try:
            yield
        finally:
            random.setstate(state)
