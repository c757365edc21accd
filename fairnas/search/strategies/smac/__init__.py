"""``search.strategy=smac`` (the default): SMAC3 multi-fidelity Bayesian optimisation (thesis Sec. 4.4.5-4.4.6).

MultiFidelityFacade with Hyperband or successive halving over budgets [min_budget, max_budget] with ``eta``, and
ParEGO(rho) or a weighted mean aggregation of the objectives. This module holds its options (``search.smac``:
:class:`SmacSettings`, conf/search/strategy/smac.yaml) and registers it;
:mod:`~fairnas.search.strategies.smac.strategy` holds ``SmacStrategy`` and imports SMAC3, which happens only when a
search builds the strategy (a training run or a search worker does not pay its 0.6 s import).
"""

from __future__ import annotations

import dataclasses
import math
from typing import TYPE_CHECKING, Any

from ConfigSpace import ConfigurationSpace

from fairnas.search.sections import SEARCH, Section, as_tuple, check_choice, integer, number, number_list, optional
from fairnas.search.strategies.base import BuildContext, Registration, Strategy, register

if TYPE_CHECKING:
    from fairnas.search.settings import SearchSettings

SCHEDULERS = ("hyperband", "successive_halving")
MULTI_OBJECTIVE_ALGORITHMS = ("parego", "mean")
DEFAULT_BRACKETS = (0, -1)


@dataclasses.dataclass(frozen=True)
class SmacSettings(Section):
    """``search.smac``: the intensifier (``scheduler``: Hyperband or successive halving, thesis Sec. 4.4.5), the
    aggregation of several objectives (``multi_objective``: ParEGO with ``rho``, thesis Sec. 4.4.6, or their mean
    with ``objective_weights``), ``n_seeds``: with more than 1, SMAC's intensifier races a configuration on up
    to that many training seeds (its own answer to noise), every trial at max_budget, and ``brackets``: which of
    Hyperband's brackets it cycles through, in that order (0 starts at min_budget, -1 trains every configuration
    at max_budget; None: every bracket, as SMAC and the paper do). The default (0, -1) is the set-up that leads
    random search on the surrogate and SMAC's full Hyperband on the noisy table (docs/search_strategies.md); it
    has no effect where Hyperband does not run (successive halving, ``n_seeds`` > 1), other values are refused
    there."""

    scheduler: str = "hyperband"
    multi_objective: str = "parego"
    rho: float = 0.05
    objective_weights: tuple[float, ...] | None = None
    n_seeds: int = 1
    brackets: tuple[int, ...] | None = DEFAULT_BRACKETS
    section = "smac"

    @property
    def runs_hyperband(self) -> bool:
        """Whether SMAC's intensifier is Hyperband, the only one with brackets."""
        return self.scheduler == "hyperband" and self.n_seeds == 1

    @classmethod
    def checked(cls, values: dict[str, Any]) -> SmacSettings:
        check_choice("smac.scheduler", values["scheduler"], SCHEDULERS)
        check_choice("smac.multi_objective", values["multi_objective"], MULTI_OBJECTIVE_ALGORITHMS)
        settings = cls(
            scheduler=values["scheduler"],
            multi_objective=values["multi_objective"],
            rho=number("smac.rho", values["rho"], minimum=0),
            objective_weights=optional(number_list, "smac.objective_weights", values["objective_weights"]),
            n_seeds=integer("smac.n_seeds", values["n_seeds"], minimum=1),
            brackets=optional(bracket_list, "smac.brackets", values["brackets"]),
        )
        if settings.objective_weights is not None and settings.multi_objective != "mean":
            raise ValueError(
                "search.smac.objective_weights need search.smac.multi_objective='mean' (ParEGO draws its own weights)"
            )
        return settings


def bracket_list(name: str, values: Any) -> tuple[int, ...]:
    """``search.smac.brackets``: a non-empty list of bracket indices."""
    brackets = tuple(integer(name, value) for value in as_tuple(name, values, "a list of bracket indices"))
    if not brackets:
        SEARCH.fail(name, [], "a non-empty list of bracket indices")
    return brackets


def n_brackets(settings: SearchSettings) -> int:
    """Hyperband's brackets over the search's budgets, 1 + floor(log(max_budget / min_budget) / log(eta)), computed
    as SMAC 2.x computes them (so a rounding at an exact power of eta agrees with SMAC's)."""
    return 1 + math.floor(math.log(settings.max_budget / settings.min_budget) / math.log(settings.eta))


def check(settings: SearchSettings) -> None:
    """One non-negative objective weight per objective; brackets other than the default only where Hyperband runs,
    each one it has."""
    options: SmacSettings = settings.options
    weights, n_objectives = options.objective_weights, len(settings.objectives)
    if weights is not None and (len(weights) != n_objectives or min(weights) < 0):
        SEARCH.fail("smac.objective_weights", list(weights), f"{n_objectives} non-negative numbers")
    if options.brackets is None or (not options.runs_hyperband and options.brackets == DEFAULT_BRACKETS):
        return
    if not options.runs_hyperband:
        allowed = f"null or {list(DEFAULT_BRACKETS)} unless smac.scheduler=hyperband and smac.n_seeds=1"
        SEARCH.fail("smac.brackets", list(options.brackets), allowed)
    count = n_brackets(settings)
    if any(not -count <= bracket < count for bracket in options.brackets):
        SEARCH.fail(
            "smac.brackets",
            list(options.brackets),
            f"indices from {-count} to {count - 1} (Hyperband has {count} brackets over budgets "
            f"{settings.min_budget:g}-{settings.max_budget:g} at eta {settings.eta})",
        )


def build(configspace: ConfigurationSpace, settings: SearchSettings, context: BuildContext) -> Strategy:
    from fairnas.search.strategies.smac.strategy import SmacStrategy  # SMAC3 takes 0.6 s to import

    return SmacStrategy(configspace, settings, output_directory=context.output_dir / "smac3")


register(
    Registration(
        "smac",
        build,
        options=SmacSettings,
        check=check,
        resume_invariant=("scheduler", "multi_objective", "rho", "objective_weights", "n_seeds", "brackets"),
        resume_unrecorded={"brackets": None},  # a search.json without brackets: SMAC ran every bracket
        multi_fidelity=True,
        title="SMAC",
    )
)
