"""``SmacStrategy``: SMAC3's MultiFidelityFacade behind the ask/tell contract (thesis Sec. 4.4.5-4.4.6); its options
are :class:`~fairnas.search.strategies.smac.SmacSettings`."""

from __future__ import annotations

import copy
import warnings
from pathlib import Path
from typing import TYPE_CHECKING

from ConfigSpace import Configuration, ConfigurationSpace
from smac import MultiFidelityFacade, Scenario
from smac.intensifier.abstract_intensifier import AbstractIntensifier
from smac.intensifier.hyperband import Hyperband
from smac.intensifier.intensifier import Intensifier
from smac.intensifier.successive_halving import SuccessiveHalving
from smac.main.exceptions import ConfigurationSpaceExhaustedException
from smac.model.random_forest import RandomForest
from smac.multi_objective.abstract_multi_objective_algorithm import AbstractMultiObjectiveAlgorithm
from smac.multi_objective.aggregation_strategy import MeanAggregationStrategy
from smac.multi_objective.parego import ParEGO
from smac.runhistory.dataclasses import TrialInfo, TrialValue
from smac.runhistory.enumerations import StatusType

from fairnas.search.records import TrialRecord
from fairnas.search.strategies.base import Proposal
from fairnas.search.strategies.smac import SmacSettings
from fairnas.search.trial import SUCCESS, TrialOutcome, native_config

if TYPE_CHECKING:
    from fairnas.search.settings import SearchSettings

INTENSIFIERS = {"hyperband": Hyperband, "successive_halving": SuccessiveHalving}


class SmacStrategy:
    """SMAC3 MultiFidelityFacade driven through ask/tell.

    Uses ``incumbent_selection="highest_budget"``: with SMAC 2.4, multi-objective Hyperband and the
    default selection fail in ``update_incumbents`` (SMAC3 issue #1050). Every trial trains with the search's seed.

    ``search.smac.n_seeds`` > 1 is SMAC's own answer to noise: the scenario is not deterministic and a configuration is
    raced against the incumbents on up to ``n_seeds`` training seeds of SMAC's choosing (every proposal carries its
    seed). SMAC 2.x's Hyperband and successive halving take one seed when they use budgets, so this runs SMAC's
    plain intensifier instead, every trial at ``max_budget``: no multi-fidelity.
    """

    def __init__(self, configspace: ConfigurationSpace, settings: SearchSettings, *, output_directory: Path):
        options: SmacSettings = settings.options
        self._objectives = settings.objectives
        self._seeded = options.n_seeds > 1
        # SMAC sizes its initial design from the expected number of trials.
        if settings.n_trials is not None:
            n_trials_hint = settings.n_trials
        else:
            assert settings.total_budget is not None  # SearchSettings requires n_trials or total_budget
            n_trials_hint = max(1, int(settings.total_budget // settings.min_budget))
        self._max_budget = settings.max_budget
        scenario = Scenario(
            copy.deepcopy(configspace),
            name="smac",
            output_directory=output_directory,
            deterministic=not self._seeded,
            objectives=list(settings.objectives),
            crash_cost=list(settings.crash_costs),
            n_trials=n_trials_hint,
            seed=settings.seed,
            min_budget=None if self._seeded else settings.min_budget,  # budgets: multi-fidelity intensifiers only
            max_budget=None if self._seeded else settings.max_budget,
        )
        intensifier: AbstractIntensifier
        if self._seeded:
            intensifier = Intensifier(scenario, max_config_calls=options.n_seeds, seed=settings.seed)
        elif options.runs_hyperband and options.brackets is not None:
            intensifier = BracketCycle(
                scenario, options.brackets, eta=settings.eta, incumbent_selection="highest_budget"
            )
        else:
            intensifier = INTENSIFIERS[options.scheduler](
                scenario, eta=settings.eta, incumbent_selection="highest_budget"
            )
        aggregation: AbstractMultiObjectiveAlgorithm | None
        if len(settings.objectives) == 1:
            aggregation = None
        elif options.multi_objective == "parego":
            aggregation = ParEGO(scenario, rho=options.rho)
        else:
            weights = None if options.objective_weights is None else list(options.objective_weights)
            aggregation = MeanAggregationStrategy(scenario, objective_weights=weights)
        initial_design = MultiFidelityFacade.get_initial_design(scenario, n_configs=settings.initial_design_size)
        self._smac = MultiFidelityFacade(
            scenario,
            model=_single_threaded_forest(scenario),
            intensifier=intensifier,
            multi_objective_algorithm=aggregation,
            initial_design=initial_design,
            logging_level=False,  # leave the application's (e.g. Hydra's) logging configuration alone
            overwrite=True,  # trials.csv, not SMAC's files, is replayed on resume
        )

    def ask(self) -> Proposal | None:
        """Next trial, or None once SMAC finds no new configuration (space exhausted)."""
        try:
            with warnings.catch_warnings():
                # SMAC's local search logs the mean step time of an empty list when nothing improves
                warnings.filterwarnings(
                    "ignore", "Mean of empty slice|invalid value encountered in scalar divide", RuntimeWarning
                )
                info = self._smac.ask()
        except ConfigurationSpaceExhaustedException:
            return None
        if self._seeded:  # SMAC's plain intensifier: every trial at the maximum budget, with SMAC's seed
            return Proposal(native_config(info.config), self._max_budget, info, seed=info.seed)
        assert info.budget is not None  # the multi-fidelity intensifiers give every trial a budget
        return Proposal(native_config(info.config), float(info.budget), info)

    def tell(self, proposal: Proposal, outcome: TrialOutcome) -> None:
        self._smac.tell(proposal.handle, self._trial_value(outcome))

    def tell_record(self, record: TrialRecord) -> None:
        """Feed a trial finished in an earlier (interrupted) run back to SMAC (after a first ``ask``)."""
        config = Configuration(self._smac.scenario.configspace, values=record.config)
        # deterministic scenario: one instance seed, the one SMAC gives every trial it asks for
        if self._seeded:
            info = TrialInfo(config=config, seed=record.seed)
        else:
            seed = self._smac.intensifier.get_instance_seed_keys_of_interest()[0].seed
            info = TrialInfo(config=config, seed=seed, budget=record.budget)
        self._smac.tell(info, self._trial_value(record.outcome))

    def _trial_value(self, outcome: TrialOutcome) -> TrialValue:
        cost = [outcome.values[name] for name in self._objectives]
        status = StatusType.SUCCESS if outcome.status == SUCCESS else StatusType.CRASHED
        return TrialValue(cost=cost if len(cost) > 1 else cost[0], time=outcome.wall_time_s, status=status)


class BracketCycle(Hyperband):
    """Hyperband that cycles through ``cycle``, its chosen brackets (``search.smac.brackets``), instead of all of
    them in order: e.g. (0, 2) over budgets 1-4 at eta 2 keeps the bracket that starts at 1 epoch and the one that
    trains every configuration at 4, and drops the one that starts at 2; a negative index counts from the last of
    SMAC's brackets. Its bracket state is the position in the cycle."""

    def __init__(self, scenario: Scenario, cycle: tuple[int, ...], **kwargs: object):
        self._cycle = cycle
        super().__init__(scenario, **kwargs)  # type: ignore[arg-type]

    def _get_next_bracket(self) -> int:
        position = self._next_bracket % len(self._cycle)
        self._next_bracket = position + 1
        return self._cycle[position] % (self._s_max + 1)


def _single_threaded_forest(scenario: Scenario) -> RandomForest:
    """The facade's random-forest surrogate (same settings) fitted on one thread.

    SMAC's default (n_jobs=-1) spends more time in joblib scheduling than in fitting the few
    hundred points of a search, and competes for cores with the trials themselves.
    """
    return RandomForest(
        scenario.configspace,
        log_y=True,
        n_trees=10,
        bootstrapping=True,
        ratio_features=1.0,
        min_samples_split=2,
        min_samples_leaf=1,
        max_depth=2**20,
        instance_features=scenario.instance_features,
        seed=scenario.seed,
        n_jobs=1,
    )
