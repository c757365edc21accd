"""SearchSettings: the face-agnostic settings of the search loop, checked once when they are built."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Collection, Mapping
from typing import Any

from fairnas.search.final import ANSWERS
from fairnas.search.parallel import checked_pool
from fairnas.search.records import RESERVED_COLUMNS
from fairnas.search.sections import (
    SEARCH,
    Section,
    as_tuple,
    check_choice,
    integer,
    number,
    number_list,
    number_or_numbers,
    optional,
)
from fairnas.search.strategies import REGISTRY, registration

RESUME_INVARIANT_FIELDS = ("strategy", "objectives", "min_budget", "max_budget", "eta", "crash_cost", "seed")
"""Settings a resumed search must share with the run that started it (the rest may change between runs), beside the
strategy's own (``Registration.resume_invariant``)."""
MOVED = {
    "scheduler": "smac.scheduler",
    "multi_objective": "smac.multi_objective",
    "rho": "smac.rho",
    "objective_weights": "smac.objective_weights",
    "n_seeds": "smac.n_seeds",
    "population_size": "nsga2.population_size",
}
"""Keys that moved into a strategy's section: ``from_mapping`` names the new key when one is set."""


@dataclasses.dataclass(frozen=True)
class FinalSettings(Section):
    """The final-selection stage (thesis Sec. 4.5.1): after the search, the ``top_k`` best full-budget
    configurations (non-dominated sorting of their observed objectives) are re-trained at the maximum budget with
    ``seeds`` training seeds the search did not use, and the search's answer is the non-dominated set of their
    means (``answer``: the thesis'; ``conf/search/local.yaml`` ships ``observed``). ``seeds=0``: no final stage, the
    answer is the observed front. The defaults were chosen on the noisy
    tabular benchmark (docs/search_benchmark.md): of the settings giving a standard error, 3 x 2 kept the most of the
    answer's true hypervolume, and it removes the optimism of the reported values."""

    top_k: int = 3
    seeds: int = 2
    answer: str = "means"
    """``means``: the answer is the front of the candidates' means (the thesis'); ``observed``: every candidate on
    the observed front, each with its fresh seeds' mean and standard error (re-measured, not re-selected, so the answer
    keeps the configurations the search found: :data:`~fairnas.search.final.ANSWERS`)."""
    section = "final"

    @classmethod
    def checked(cls, values: dict[str, Any]) -> FinalSettings:
        return cls(
            top_k=integer("final.top_k", values["top_k"], minimum=1),
            seeds=integer("final.seeds", values["seeds"], minimum=0),
            answer=check_choice("final.answer", values["answer"], ANSWERS),
        )


@dataclasses.dataclass(frozen=True)
class SearchSettings:
    """The search loop's settings; the defaults are the paper's (thesis Sec. 4.4): SMAC's MultiFidelityFacade
    with Hyperband (eta = 2) over budgets in epochs, and ParEGO (rho = 0.05) over the objectives. ``strategy`` names
    a registered strategy (:mod:`fairnas.search.strategies`, docs/search_strategies.md); ``options`` are its own
    settings, the section ``search.<strategy>`` (a mapping or None: its defaults; the strategy's class checks them).

    Objectives are all minimised. The search stops after ``n_trials`` trials or once the finished trials'
    budgets sum to ``total_budget`` (give one or both); the ``final`` stage (:class:`FinalSettings`) then re-trains
    the best configurations with fresh seeds, its epochs on top of ``total_budget``. ``initial_design_size``: the
    configurations a model-based strategy (SMAC, BoTorch) starts from (null: the strategy's default). ``crash_cost``
    is every objective's value for a crashed trial, or one value per objective. ``fail_fast``: the search stops
    when the first that many trials of a run all crash with the same error (0: never). ``reference_point`` fixes the
    hypervolume reference (default: the worst max-budget value per objective plus 10% of its range). Building the
    settings checks every value, with a one-line ValueError naming the ``search.<key>``; ``check_compatible`` adds
    the checks that need the space and the target. Lists (OmegaConf list nodes included) become tuples, numbers
    floats or ints.
    """

    objectives: tuple[str, ...]
    min_budget: float
    max_budget: float
    eta: int = 2
    total_budget: float | None = None
    n_trials: int | None = None
    strategy: str = "smac"
    seed: int = 0
    crash_cost: float | tuple[float, ...] = 1000.0
    fail_fast: int = 5
    reference_point: tuple[float, ...] | None = None
    n_workers: int = 1
    trials_per_gpu: int | None = None
    dask_address: str | None = None
    dask_scheduler_file: str | None = None
    dask_timeout: float = 60.0
    dask_tls: str | None = None
    dask_insecure: bool = False
    initial_design_size: int | None = None
    final: FinalSettings = dataclasses.field(default_factory=FinalSettings)
    options: Any = None

    def __post_init__(self) -> None:
        for name, value in self._normalised().items():
            object.__setattr__(self, name, value)
        self._validate()

    @classmethod
    def field_names(cls) -> tuple[str, ...]:
        """The keys ``from_mapping`` accepts: every loop setting, in declaration order, each registered strategy's
        section, and the keys that moved into one."""
        loop = tuple(field.name for field in dataclasses.fields(cls) if field.name != "options")
        return (*loop, *(name for name, entry in REGISTRY.items() if entry.options is not None), *MOVED)

    @classmethod
    def from_section(cls, section: Mapping[str, Any]) -> SearchSettings:
        """The loop's settings among the keys of a whole ``search`` config section (which also holds the space, the
        training overrides and other keys of the command's), checked by :meth:`from_mapping`."""
        return cls.from_mapping({name: section[name] for name in cls.field_names() if name in section})

    @classmethod
    def from_mapping(cls, mapping: Mapping[str, Any]) -> SearchSettings:
        """Settings from a dict or an OmegaConf node (``search``); unknown, moved or missing keys are named in the
        error. ``search.<strategy>`` becomes ``options``; every other strategy's section present is checked too."""
        allowed = cls.field_names()
        unknown = [str(key) for key in mapping if key not in allowed]
        if unknown:
            raise ValueError(f"unknown search settings {unknown}; allowed: {list(allowed)}")
        moved = [key for key in MOVED if mapping.get(key) is not None]
        if moved:
            raise ValueError(f"search.{moved[0]} is now search.{MOVED[moved[0]]}")
        required = [
            field.name
            for field in dataclasses.fields(cls)
            if field.default is dataclasses.MISSING and field.default_factory is dataclasses.MISSING
        ]
        missing = [name for name in required if name not in mapping]
        if missing:
            raise ValueError(f"search settings lack {missing}")
        loop = {key: mapping[key] for key in mapping if key not in REGISTRY and key not in MOVED}
        settings = cls(**loop, options=mapping.get(loop.get("strategy", cls.strategy)))
        for name in REGISTRY:
            options = REGISTRY[name].options
            if name != settings.strategy and name in mapping and options is not None:
                options.from_mapping(mapping[name])
        return settings

    @property
    def crash_costs(self) -> tuple[float, ...]:
        """The value each objective of a crashed trial records."""
        if isinstance(self.crash_cost, float):
            return (self.crash_cost,) * len(self.objectives)
        return self.crash_cost

    def resume_invariant(self) -> dict[str, Any]:
        """The settings a resumed search must share with the run that started it, as search.json holds them (the
        strategy's options by their names)."""
        values = {name: getattr(self, name) for name in RESUME_INVARIANT_FIELDS} | {"crash_cost": self.crash_costs}
        values |= {name: getattr(self.options, name) for name in registration(self.strategy).resume_invariant}
        return {name: list(value) if isinstance(value, tuple) else value for name, value in values.items()}

    def resume_unrecorded(self) -> Mapping[str, Any]:
        """What a search whose search.json predates a resume-invariant option ran with (the strategy's
        ``Registration.resume_unrecorded``)."""
        return registration(self.strategy).resume_unrecorded

    def _normalised(self) -> dict[str, Any]:
        """Lists (OmegaConf list nodes included) as tuples, numbers as floats or ints; a wrong type is named."""
        return {
            "objectives": as_tuple("objectives", self.objectives),
            "min_budget": number("min_budget", self.min_budget),
            "max_budget": number("max_budget", self.max_budget),
            "eta": integer("eta", self.eta, minimum=2),
            "total_budget": optional(SEARCH.positive, "total_budget", self.total_budget),
            "n_trials": optional(integer, "n_trials", self.n_trials, minimum=1),
            "seed": integer("seed", self.seed),
            "crash_cost": number_or_numbers("crash_cost", self.crash_cost),
            "fail_fast": integer("fail_fast", self.fail_fast, minimum=0),
            "reference_point": optional(number_list, "reference_point", self.reference_point),
            **checked_pool(SEARCH, self),
            "initial_design_size": optional(integer, "initial_design_size", self.initial_design_size, minimum=0),
            "final": FinalSettings.from_mapping(self.final),
        }

    def _validate(self) -> None:
        objectives = self.objectives
        all_strings = all(isinstance(name, str) for name in objectives)
        if not objectives or not all_strings or len(set(objectives)) != len(objectives):
            SEARCH.fail("objectives", list(objectives), "a non-empty list of distinct metric names")
        reserved = sorted(RESERVED_COLUMNS & set(objectives))
        if reserved:
            raise ValueError(f"search.objectives {reserved} are reserved trials.csv columns")
        if not 0 < self.min_budget <= self.max_budget:
            raise ValueError(
                "search budgets need 0 < min_budget <= max_budget, "
                f"got search.min_budget={self.min_budget}, search.max_budget={self.max_budget}"
            )
        if self.n_trials is None and self.total_budget is None:
            raise ValueError("give search.n_trials or search.total_budget (or both) to bound the search")
        if self.reference_point is not None and len(self.reference_point) != len(objectives):
            raise ValueError(
                f"search.reference_point has {len(self.reference_point)} values "
                f"for search.objectives {list(self.objectives)}"
            )
        if self.reference_point is not None and not all(map(math.isfinite, self.reference_point)):
            SEARCH.fail("reference_point", list(self.reference_point), "finite numbers, one per objective")
        if len(self.crash_costs) != len(objectives) or not all(map(math.isfinite, self.crash_costs)):
            given = self.crash_cost if isinstance(self.crash_cost, float) else list(self.crash_cost)
            SEARCH.fail("crash_cost", given, "one finite number or one per objective")
        self._strategy_options()

    def _strategy_options(self) -> None:
        """The strategy's options from ``search.<strategy>``, checked by the strategy."""
        entry = registration(self.strategy)
        if entry.options is None:
            if self.options:
                raise ValueError(f"search.strategy={self.strategy} takes no options, got {self.options!r}")
            return
        object.__setattr__(self, "options", entry.options.from_mapping(self.options))
        if entry.check is not None:
            entry.check(self)


def check_compatible(
    settings: SearchSettings, *, hyperparameters: Collection[str], known_objectives: Collection[str] | None = None
) -> None:
    """The checks that need the space's ``hyperparameters`` and the objectives the target reports (if known)."""
    if known_objectives is not None:
        unknown = [name for name in settings.objectives if name not in known_objectives]
        if unknown:
            raise ValueError(f"unknown search.objectives {unknown}; the target reports {sorted(known_objectives)}")
    clashes = sorted(set(hyperparameters) & (RESERVED_COLUMNS | set(settings.objectives)))
    if clashes:
        raise ValueError(f"hyperparameter names {clashes} clash with trials.csv columns; rename them in the space")
