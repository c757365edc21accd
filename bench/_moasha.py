"""Syne Tune's MO-ASHA (Schmucker et al., "Multi-objective multi-fidelity hyperparameter optimization with
application to fairness") on a fairnas search target, one trial at a time.

The scheduler is Syne Tune's own ``MOASHA`` (asynchronous successive halving, rungs ranked by non-dominated
sorting). It is driven through the calls Syne Tune's ``Tuner`` makes with one worker (``suggest``,
``on_trial_add``, ``on_trial_result`` per report, ``on_trial_remove`` on STOP) instead of through its
``LocalBackend``, which starts a process per trial and stops on wall-clock time. A trial reports at the rung
milestones only, where ASHA decides, so one target call trains it from one rung to the next (continuing).
Configurations are drawn by ``fairnas``'s random-search sampler over the ConfigSpace space (conditions
respected; the same uniform draws as random search with the same seed) instead of by ``MOASHA.suggest``, which
samples Syne Tune domains and ignores ``random_seed``.

Install with ``pip install syne-tune`` (the ``bench`` extra).
"""

from __future__ import annotations

import datetime
import itertools
from collections.abc import Sequence

import pandas as pd
from ConfigSpace import ConfigurationSpace

from fairnas.search import config_id
from fairnas.search.strategies import RandomStrategy
from fairnas.search.trial import Target, evaluate_trial

try:
    from syne_tune.backend.trial_status import Trial
    from syne_tune.optimizer.scheduler import SchedulerDecision, TrialSuggestion
    from syne_tune.optimizer.schedulers.multiobjective.moasha import MOASHA
except ImportError as error:  # an optional extra
    raise ImportError("Syne Tune is not installed: pip install syne-tune (the 'bench' extra)") from error

from _compute_meter import ComputeBudgetReached

PROGRESS = "epoch"
"""The scheduler's ``time_attr``: the budget a reported result was trained to."""


class ConfigSpaceMOASHA(MOASHA):
    """``MOASHA`` whose ``suggest`` draws from a ConfigSpace space with a seeded random-search sampler."""

    def __init__(self, configspace: ConfigurationSpace, *, max_budget: float, random_seed: int, **kwargs):
        super().__init__(config_space={}, max_t=max_budget, random_seed=random_seed, **kwargs)
        self._sampler = RandomStrategy(configspace, max_budget=max_budget, seed=random_seed)

    def suggest(self) -> TrialSuggestion:
        return TrialSuggestion.start_suggestion(self._sampler.ask().config)

    def milestones(self) -> list[float]:
        """The budgets at which a trial reports: its bracket's rungs and the maximum budget."""
        return sorted({float(milestone) for bracket in self.brackets for milestone, _ in bracket.rungs} | {self.max_t})


def run_moasha(
    target: Target,
    configspace: ConfigurationSpace,
    *,
    objectives: Sequence[str],
    min_budget: float,
    max_budget: float,
    eta: int,
    seed: int,
    crash_cost: float = 1000.0,
) -> pd.DataFrame:
    """Run MO-ASHA until ``target`` raises ``ComputeBudgetReached``; one row per target call, in call order.

    Columns as in trials.csv where they apply: trial_id, config_id, budget, seed, status, the objectives,
    wall_time_s. A crashed call reports ``crash_cost`` for every objective (as ``run_search`` does).
    """
    scheduler = ConfigSpaceMOASHA(
        configspace,
        max_budget=max_budget,
        random_seed=seed,
        metrics=list(objectives),
        do_minimize=True,
        time_attr=PROGRESS,
        grace_period=min_budget,
        reduction_factor=eta,
    )
    crash_costs = [float(crash_cost)] * len(objectives)
    rows = []
    try:
        for trial_id in itertools.count():
            config = scheduler.suggest().config
            trial = Trial(trial_id=trial_id, config=config, creation_time=datetime.datetime.now())
            scheduler.on_trial_add(trial)
            for budget in scheduler.milestones():
                outcome = evaluate_trial(target, config, seed, budget, objectives, crash_costs)
                rows.append({
                    "trial_id": trial_id, "config_id": config_id(config), "budget": budget, "seed": seed,
                    "status": outcome.status, **outcome.values, "wall_time_s": outcome.wall_time_s,
                })
                if scheduler.on_trial_result(trial, {PROGRESS: budget, **outcome.values}) == SchedulerDecision.STOP:
                    scheduler.on_trial_remove(trial)
                    break
    except ComputeBudgetReached:
        pass
    return pd.DataFrame(rows)
