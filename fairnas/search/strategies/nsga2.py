"""``search.strategy=nsga2``: NSGA-II (Deb et al. 2002, "A fast and elitist multiobjective genetic algorithm:
NSGA-II") through pymoo's ask/tell.

Every trial runs at ``max_budget``, like random search: NSGA-II has no multi-fidelity variant as principled as
successive halving (use MO-ASHA for that). A generation is ``search.nsga2.population_size`` offspring; the first is
drawn uniformly, each later one is bred from the survivors of the last (binary tournament on rank and crowding
distance, then crossover and mutation), and pymoo is told a generation once all its trials finished. Until then
``ask`` returns None, so with several workers the last trials of a generation run while the others wait.

Each hyperparameter is one gene: floats (log-scaled ones in log space) are reals, bred with simulated binary
crossover and polynomial mutation as in the paper; integers too (rounded; non-log ones as pymoo integers), ordinals
as the index into their sequence; categoricals and constants are choices, bred by uniform crossover and random
resetting (pymoo's mixed-variable operators). Inactive hyperparameters keep their genes, so a child can pass a value
on, but are absent from the configuration a trial gets (ConfigSpace's ``deactivate_inactive_hyperparameters``).
Duplicate genomes are not bred twice.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
from ConfigSpace import ConfigurationSpace
from ConfigSpace.hyperparameters import (
    CategoricalHyperparameter,
    Constant,
    FloatHyperparameter,
    Hyperparameter,
    IntegerHyperparameter,
    OrdinalHyperparameter,
)
from ConfigSpace.util import deactivate_inactive_hyperparameters
from pymoo.algorithms.moo.nsga2 import NSGA2, binary_tournament
from pymoo.core.mixed import MixedVariableDuplicateElimination, MixedVariableMating, MixedVariableSampling
from pymoo.core.population import Population
from pymoo.core.problem import Problem
from pymoo.core.termination import NoTermination
from pymoo.core.variable import Choice, Integer, Real, Variable
from pymoo.operators.selection.tournament import TournamentSelection

from fairnas.search.records import TrialKey, TrialRecord, trial_key
from fairnas.search.sections import Section, integer
from fairnas.search.strategies.base import BuildContext, Proposal, Registration, register
from fairnas.search.trial import TrialOutcome, native_config

if TYPE_CHECKING:
    from fairnas.search.settings import SearchSettings


@dataclass(frozen=True)
class Nsga2Settings(Section):
    """``search.nsga2``: ``population_size``, the trials of a generation (the first is drawn at random)."""

    population_size: int = 20
    section = "nsga2"

    @classmethod
    def checked(cls, values: dict[str, Any]) -> Nsga2Settings:
        return cls(population_size=integer("nsga2.population_size", values["population_size"], minimum=2))


@dataclass(frozen=True)
class Gene:
    """One hyperparameter as a pymoo variable: ``decode`` a gene to its value, ``encode`` a value to its gene."""

    variable: Variable
    decode: Callable[[Any], Any]
    encode: Callable[[Any], Any]


class Nsga2Strategy:
    """NSGA-II through ask/tell, one generation at a time, every trial at ``max_budget``."""

    def __init__(self, configspace: ConfigurationSpace, settings: SearchSettings):
        self._configspace = configspace
        self._objectives = settings.objectives
        self._budget = settings.max_budget
        self._genes = {name: gene(hyperparameter) for name, hyperparameter in configspace.items()}
        duplicates = MixedVariableDuplicateElimination()
        self._algorithm = NSGA2(
            pop_size=settings.options.population_size,
            sampling=MixedVariableSampling(),
            mating=MixedVariableMating(
                selection=TournamentSelection(func_comp=binary_tournament), eliminate_duplicates=duplicates
            ),
            eliminate_duplicates=duplicates,
        )
        problem = Problem(vars={name: g.variable for name, g in self._genes.items()}, n_obj=len(settings.objectives))
        self._algorithm.setup(problem, termination=NoTermination(), seed=settings.seed, verbose=False)
        self._generation = Population.empty()
        self._unasked: deque[int] = deque()  # indices into the generation
        self._values: dict[int, list[float]] = {}  # index -> objective values, once told
        self._replayed: dict[TrialKey, tuple[dict[str, Any], list[float]]] = {}  # key -> (genome, values)

    def ask(self) -> Proposal | None:
        """A trial of the current generation; None while the rest of it runs, or when no new genome can be bred."""
        if not self._unasked and len(self._values) == len(self._generation):
            self._breed()
        if not self._unasked:
            return None
        index = self._unasked.popleft()
        return Proposal(self._config(self._generation[index].X), self._budget, handle=index)

    def tell(self, proposal: Proposal, outcome: TrialOutcome) -> None:
        self._values[proposal.handle] = [outcome.values[name] for name in self._objectives]

    def tell_record(self, record: TrialRecord) -> None:
        """An earlier run's trial joins the next survival (unless it is one of the current generation)."""
        genome = {
            name: g.encode(record.config.get(name, self._configspace[name].default_value))
            for name, g in self._genes.items()
        }
        self._replayed[record.key] = (genome, [record.outcome.values[name] for name in self._objectives])

    def _breed(self) -> None:
        """Tell pymoo the finished generation (with the replayed trials not in it) and ask for the next one."""
        if len(self._generation):
            asked = {trial_key(self._config(individual.X), self._budget) for individual in self._generation}
            replayed = [entry for key, entry in self._replayed.items() if key not in asked]
            finished = Population.merge(self._generation, Population.new(X=[genome for genome, _ in replayed]))
            finished.set(
                "F",
                np.array(
                    [*(self._values[i] for i in range(len(self._generation))), *(values for _, values in replayed)],
                    dtype=float,
                ),
            )
            self._algorithm.tell(infills=finished)
            self._replayed.clear()
        offspring = self._algorithm.ask()  # None when no new genome could be bred
        self._generation = Population.empty() if offspring is None else offspring
        self._values = {}
        self._unasked = deque(range(len(self._generation)))

    def _config(self, genome: dict[str, Any]) -> dict[str, Any]:
        """The active hyperparameters' values of a genome."""
        values = {name: self._genes[name].decode(genome[name]) for name in self._genes}
        return native_config(deactivate_inactive_hyperparameters(values, self._configspace))


def gene(hyperparameter: Hyperparameter) -> Gene:
    """The gene of a ConfigSpace hyperparameter (numbers are searched uniformly within their bounds)."""
    if isinstance(hyperparameter, Constant):
        return Gene(Choice(options=[hyperparameter.value]), _native, _native)
    if isinstance(hyperparameter, CategoricalHyperparameter):
        return Gene(Choice(options=list(hyperparameter.choices)), _native, _native)
    if isinstance(hyperparameter, OrdinalHyperparameter):
        sequence = list(hyperparameter.sequence)
        return Gene(Integer(bounds=(0, len(sequence) - 1)), lambda index: sequence[int(index)], sequence.index)
    if isinstance(hyperparameter, (FloatHyperparameter, IntegerHyperparameter)):
        return _numeric_gene(hyperparameter)
    raise ValueError(
        f"search.strategy=nsga2 cannot search hyperparameter '{hyperparameter.name}' "
        f"of type {type(hyperparameter).__name__}"
    )


def _numeric_gene(hyperparameter: FloatHyperparameter | IntegerHyperparameter) -> Gene:
    lower, upper = hyperparameter.lower, hyperparameter.upper
    is_integer = isinstance(hyperparameter, IntegerHyperparameter)
    if is_integer and not hyperparameter.log:
        return Gene(Integer(bounds=(lower, upper)), int, int)
    to_gene, from_gene = (math.log, math.exp) if hyperparameter.log else (float, float)

    def decode(value: float) -> float | int:
        clipped = min(max(from_gene(value), lower), upper)
        return round(clipped) if is_integer else clipped

    return Gene(Real(bounds=(to_gene(lower), to_gene(upper))), decode, to_gene)


def _native(value: Any) -> Any:
    return value.item() if hasattr(value, "item") else value


def build(configspace: ConfigurationSpace, settings: SearchSettings, context: BuildContext) -> Nsga2Strategy:
    return Nsga2Strategy(configspace, settings)


register(
    Registration(
        "nsga2",
        build,
        options=Nsga2Settings,
        resume_invariant=("population_size",),
        full_budget_only=True,
        title="NSGA-II",
    )
)
