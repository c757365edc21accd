"""MO-ASHA (Schmucker et al. 2021, "Multi-objective multi-fidelity hyperparameter optimization with application to
fairness"): asynchronous successive halving whose rungs rank results by non-dominated sorting.

Syne Tune's ``MOASHA`` scheduler decides, driven through the calls its ``Tuner`` makes (``on_trial_add``,
``on_trial_result``). A new configuration starts at ``min_budget``; its rungs are min_budget * eta^k below
``max_budget``, then ``max_budget``. At each rung it continues if it ranks in the top 1/eta of the results recorded
there so far (the first result at a rung always continues), else it stops. A continued configuration is proposed
as a trial of the same configuration at the next rung, which a target may train from its lower-rung checkpoint
(the face target does). A crashed trial is ranked with its crash cost and never continued. New configurations come
from random search's seeded sampler (conditions respected, the same draws as random search with the same seed)
instead of ``MOASHA.suggest``, which samples Syne Tune domains.

Syne Tune is an optional extra (it pulls in xgboost): ``pip install -e '.[moasha]'``.
"""

from __future__ import annotations

import datetime
import math
from typing import TYPE_CHECKING

from ConfigSpace import ConfigurationSpace

from fairnas.search.records import TrialKey, TrialRecord, trial_key
from fairnas.search.strategies.base import Proposal
from fairnas.search.strategies.random import RandomStrategy
from fairnas.search.trial import SUCCESS, TrialOutcome, config_id

try:
    from syne_tune.backend.trial_status import Trial
    from syne_tune.optimizer.scheduler import SchedulerDecision
    from syne_tune.optimizer.schedulers.multiobjective.moasha import MOASHA
except ImportError as error:
    raise ValueError("search.strategy=moasha needs Syne Tune: pip install -e '.[moasha]'") from error

if TYPE_CHECKING:
    from fairnas.search.settings import SearchSettings

BUDGET = "budget"
"""The scheduler's ``time_attr``: the budget a reported result was trained to."""
MAX_DRAWS = 100
"""Draws of the sampler that may all hit known configurations before the space counts as exhausted."""


class MoashaStrategy:
    """MO-ASHA through ask/tell: continued configurations first, else a new one at ``min_budget``."""

    def __init__(self, configspace: ConfigurationSpace, settings: SearchSettings):
        self._scheduler = MOASHA(
            config_space={},
            metrics=list(settings.objectives),
            do_minimize=True,
            time_attr=BUDGET,
            max_t=settings.max_budget,
            grace_period=settings.min_budget,
            reduction_factor=settings.eta,
            random_seed=settings.seed,
        )
        (bracket,) = self._scheduler.brackets
        self.rungs = sorted({float(milestone) for milestone, _ in bracket.rungs} | {settings.max_budget})
        self._sampler = RandomStrategy(configspace, budget=settings.min_budget, seed=settings.seed)
        self._trials: dict[str, Trial] = {}  # config id -> the scheduler's trial
        self._continued: dict[TrialKey, Proposal] = {}  # next rungs to run, oldest first
        self._reported: set[TrialKey] = set()

    def ask(self) -> Proposal | None:
        if self._continued:
            return self._continued.pop(next(iter(self._continued)))
        for _ in range(MAX_DRAWS):
            proposal = self._sampler.ask()
            if config_id(proposal.config) not in self._trials:
                self._trial(proposal.config)
                return proposal
        return None

    def tell(self, proposal: Proposal, outcome: TrialOutcome) -> None:
        self._report(proposal.config, proposal.budget, outcome)

    def tell_record(self, record: TrialRecord) -> None:
        self._report(record.config, record.budget, record.outcome)

    def _report(self, config: dict, budget: float, outcome: TrialOutcome) -> None:
        """Record a result at its rung and queue the next rung if the scheduler continues the configuration."""
        key = trial_key(config, budget)
        if key in self._reported:
            return
        self._reported.add(key)
        self._continued.pop(key, None)  # replayed from an earlier run: no longer to run
        decision = self._scheduler.on_trial_result(self._trial(config), {BUDGET: budget, **outcome.values})
        higher = [rung for rung in self.rungs if rung > budget and not math.isclose(rung, budget)]
        if decision == SchedulerDecision.CONTINUE and outcome.status == SUCCESS and higher:
            self._continued[trial_key(config, higher[0])] = Proposal(config, higher[0])

    def _trial(self, config: dict) -> Trial:
        """The scheduler's trial of ``config``, added on first sight."""
        cid = config_id(config)
        if cid not in self._trials:
            self._trials[cid] = Trial(trial_id=len(self._trials), config=config, creation_time=datetime.datetime.now())
            self._scheduler.on_trial_add(self._trials[cid])
        return self._trials[cid]
