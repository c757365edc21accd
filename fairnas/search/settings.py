"""SearchSettings: the face-agnostic settings of the search loop, checked once when they are built."""

from __future__ import annotations

import dataclasses
import math
import numbers
from collections.abc import Callable, Collection, Iterable, Mapping
from typing import Any

from fairnas.search.records import RESERVED_COLUMNS

STRATEGIES = ("smac", "random", "moasha", "nsga2", "botorch")
SCHEDULERS = ("hyperband", "successive_halving")
MULTI_OBJECTIVE_ALGORITHMS = ("parego", "mean")
BOTORCH_FIDELITIES = ("full", "early_stop", "momf")
BOTORCH_CRASHED = ("worst", "exclude")

RESUME_INVARIANT_FIELDS = (
    "strategy",
    "objectives",
    "min_budget",
    "max_budget",
    "eta",
    "scheduler",
    "multi_objective",
    "rho",
    "objective_weights",
    "crash_cost",
    "seed",
    "population_size",
    "n_seeds",
)
"""Settings a resumed search must share with the run that started it (the rest may change between runs)."""


@dataclasses.dataclass(frozen=True)
class FinalSettings:
    """The final-selection stage (thesis Sec. 4.5.1): after the search, the ``top_k`` best full-budget
    configurations (non-dominated sorting of their observed objectives) are re-trained at the maximum budget with
    ``seeds`` training seeds the search did not use, and the search's answer is the non-dominated set of their
    means. ``seeds=0``: no final stage, the answer is the observed front. The defaults were chosen on the noisy
    tabular benchmark (docs/search_benchmark.md): of the settings giving a standard error, 3 x 2 kept the most of the
    answer's true hypervolume, and it removes the optimism of the reported values."""

    top_k: int = 3
    seeds: int = 2

    @classmethod
    def from_mapping(cls, mapping: FinalSettings | Mapping[str, Any] | None) -> FinalSettings:
        """Settings from ``search.final`` (a dict or an OmegaConf node); unknown keys and bad values are named."""
        if isinstance(mapping, FinalSettings):
            return mapping
        values = _section_values(cls, mapping, "final")
        return cls(
            top_k=_integer("final.top_k", values["top_k"], minimum=1),
            seeds=_integer("final.seeds", values["seeds"], minimum=0),
        )


@dataclasses.dataclass(frozen=True)
class BotorchSettings:
    """``search.strategy=botorch``'s own settings (:mod:`fairnas.search.botorch`, docs/search_strategies.md).

    ``fidelity``: ``full`` (every trial at the maximum budget), ``early_stop`` (a configuration climbs the rungs one
    at a time while its hypervolume improvement at the full budget per epoch still left to train beats a new
    configuration's) or ``momf`` (BoTorch's MOMF acquisition picks configuration and rung, cost-weighted).
    ``max_observations``: the most trials the Gaussian process is fitted on (half the best by non-dominated sorting,
    half the most recent of the rest; null: all); ``fit_maxiter``: L-BFGS-B iterations of its fit (null: BoTorch's
    limit, 15000); ``refit_every``: the hyperparameters are fitted at every this many suggestions of the model (and
    at the first after a start or resume), kept in between while the model takes in the new trials. ``raw_samples``,
    ``num_restarts``: the acquisition optimiser's random starts and how many of them it refines; ``mc_samples``:
    quasi-Monte Carlo samples of the acquisition.
    ``crashed``: a crashed trial enters the model with the worst value observed per objective (``worst``) or not at
    all (``exclude``)."""

    fidelity: str = "full"
    max_observations: int | None = 100
    fit_maxiter: int | None = 200
    refit_every: int = 1
    raw_samples: int = 512
    num_restarts: int = 10
    mc_samples: int = 128
    crashed: str = "worst"

    @classmethod
    def from_mapping(cls, mapping: BotorchSettings | Mapping[str, Any] | None) -> BotorchSettings:
        """Settings from ``search.botorch`` (a dict or an OmegaConf node); unknown keys and bad values are named."""
        if isinstance(mapping, BotorchSettings):
            return mapping
        values = _section_values(cls, mapping, "botorch")
        _check_choice("botorch.fidelity", values["fidelity"], BOTORCH_FIDELITIES)
        _check_choice("botorch.crashed", values["crashed"], BOTORCH_CRASHED)
        settings = cls(
            fidelity=values["fidelity"],
            max_observations=_optional(_integer, "botorch.max_observations", values["max_observations"], minimum=2),
            fit_maxiter=_optional(_integer, "botorch.fit_maxiter", values["fit_maxiter"], minimum=1),
            refit_every=_integer("botorch.refit_every", values["refit_every"], minimum=1),
            raw_samples=_integer("botorch.raw_samples", values["raw_samples"], minimum=1),
            num_restarts=_integer("botorch.num_restarts", values["num_restarts"], minimum=1),
            mc_samples=_integer("botorch.mc_samples", values["mc_samples"], minimum=1),
            crashed=values["crashed"],
        )
        if settings.num_restarts > settings.raw_samples:
            raise ValueError(
                f"search.botorch.num_restarts ({settings.num_restarts}) must be <= search.botorch.raw_samples "
                f"({settings.raw_samples}): the restarts are picked among the raw samples"
            )
        return settings


@dataclasses.dataclass(frozen=True)
class SearchSettings:
    """The search loop's settings; the defaults are the paper's (thesis Sec. 4.4): SMAC's MultiFidelityFacade
    with Hyperband (eta = 2) over budgets in epochs, and ParEGO (rho = 0.05) over the objectives. ``strategy``
    may also be ``random``, ``moasha`` (rungs from min_budget by eta), ``nsga2`` (generations of
    ``population_size``) or ``botorch`` (a Gaussian process, its settings in ``botorch``: :class:`BotorchSettings`);
    docs/search_strategies.md describes them.

    Objectives are all minimised. The search stops after ``n_trials`` trials or once the finished trials'
    budgets sum to ``total_budget`` (give one or both); the ``final`` stage (:class:`FinalSettings`) then re-trains
    the best configurations with fresh seeds, its epochs on top of ``total_budget``. ``n_seeds`` > 1 lets SMAC's
    intensifier evaluate configurations with that many training seeds (its own answer to noise). ``crash_cost`` is
    every objective's value for a crashed trial, or one value per objective. ``reference_point`` fixes the
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
    scheduler: str = "hyperband"
    multi_objective: str = "parego"
    rho: float = 0.05
    objective_weights: tuple[float, ...] | None = None
    seed: int = 0
    crash_cost: float | tuple[float, ...] = 1000.0
    reference_point: tuple[float, ...] | None = None
    n_workers: int = 1
    dask_address: str | None = None
    dask_scheduler_file: str | None = None
    dask_timeout: float = 60.0
    dask_tls: str | None = None
    dask_insecure: bool = False
    initial_design_size: int | None = None
    population_size: int = 20
    n_seeds: int = 1
    final: FinalSettings = dataclasses.field(default_factory=FinalSettings)
    botorch: BotorchSettings = dataclasses.field(default_factory=BotorchSettings)

    def __post_init__(self) -> None:
        for name, value in self._normalised().items():
            object.__setattr__(self, name, value)
        self._validate()

    @classmethod
    def field_names(cls) -> tuple[str, ...]:
        """Every setting, in declaration order (the keys ``from_mapping`` accepts)."""
        return tuple(field.name for field in dataclasses.fields(cls))

    @classmethod
    def from_mapping(cls, mapping: Mapping[str, Any]) -> SearchSettings:
        """Settings from a dict or an OmegaConf node; unknown or missing keys are named in the error."""
        allowed = cls.field_names()
        unknown = [str(key) for key in mapping if key not in allowed]
        if unknown:
            raise ValueError(f"unknown search settings {unknown}; allowed: {list(allowed)}")
        required = [
            field.name
            for field in dataclasses.fields(cls)
            if field.default is dataclasses.MISSING and field.default_factory is dataclasses.MISSING
        ]
        missing = [name for name in required if name not in mapping]
        if missing:
            raise ValueError(f"search settings lack {missing}")
        return cls(**{key: mapping[key] for key in mapping})

    @property
    def crash_costs(self) -> tuple[float, ...]:
        """The value each objective of a crashed trial records."""
        if isinstance(self.crash_cost, float):
            return (self.crash_cost,) * len(self.objectives)
        return self.crash_cost

    def resume_invariant(self) -> dict[str, Any]:
        """The settings a resumed search must share with the run that started it, as search.json holds them."""
        values = {name: getattr(self, name) for name in RESUME_INVARIANT_FIELDS} | {"crash_cost": self.crash_costs}
        return {name: list(value) if isinstance(value, tuple) else value for name, value in values.items()}

    def _normalised(self) -> dict[str, Any]:
        """Lists (OmegaConf list nodes included) as tuples, numbers as floats or ints; a wrong type is named."""
        return {
            "objectives": _as_tuple("objectives", self.objectives),
            "min_budget": _number("min_budget", self.min_budget),
            "max_budget": _number("max_budget", self.max_budget),
            "eta": _integer("eta", self.eta, minimum=2),
            "total_budget": _optional(_number, "total_budget", self.total_budget),
            "n_trials": _optional(_integer, "n_trials", self.n_trials, minimum=1),
            "rho": _number("rho", self.rho),
            "objective_weights": _optional(_numbers, "objective_weights", self.objective_weights),
            "seed": _integer("seed", self.seed),
            "crash_cost": _number_or_numbers("crash_cost", self.crash_cost),
            "reference_point": _optional(_numbers, "reference_point", self.reference_point),
            "n_workers": _integer("n_workers", self.n_workers, minimum=1),
            "dask_timeout": _number("dask_timeout", self.dask_timeout),
            "initial_design_size": _optional(_integer, "initial_design_size", self.initial_design_size, minimum=0),
            "population_size": _integer("population_size", self.population_size, minimum=2),
            "n_seeds": _integer("n_seeds", self.n_seeds, minimum=1),
            "final": FinalSettings.from_mapping(self.final),
            "botorch": BotorchSettings.from_mapping(self.botorch),
        }

    def _validate(self) -> None:
        objectives = self.objectives
        all_strings = all(isinstance(name, str) for name in objectives)
        if not objectives or not all_strings or len(set(objectives)) != len(objectives):
            raise ValueError(
                f"search.objectives must be a non-empty list of distinct metric names, got {list(objectives)}"
            )
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
        if self.total_budget is not None and self.total_budget <= 0:
            raise ValueError(f"search.total_budget must be > 0, got {self.total_budget}")
        _check_choice("strategy", self.strategy, STRATEGIES)
        _check_choice("scheduler", self.scheduler, SCHEDULERS)
        if self.n_seeds > 1 and self.strategy != "smac":
            raise ValueError(f"search.n_seeds={self.n_seeds} needs search.strategy=smac (its intensifier's seeds)")
        _check_choice("multi_objective", self.multi_objective, MULTI_OBJECTIVE_ALGORITHMS)
        if self.strategy == "botorch" and self.botorch.fidelity != "full" and self.min_budget == self.max_budget:
            raise ValueError(
                f"search.botorch.fidelity={self.botorch.fidelity} needs search.min_budget < search.max_budget"
            )
        if self.dask_address is not None and self.dask_scheduler_file is not None:
            raise ValueError("give search.dask_address or search.dask_scheduler_file, not both")
        if self.dask_timeout <= 0:
            raise ValueError(f"search.dask_timeout must be > 0 seconds, got {self.dask_timeout}")
        if not isinstance(self.dask_insecure, bool):
            raise ValueError(f"search.dask_insecure must be true or false, got {self.dask_insecure!r}")
        if self.dask_tls is not None and not isinstance(self.dask_tls, str):
            raise ValueError(f"search.dask_tls must be a folder path or null, got {self.dask_tls!r}")
        if self.rho < 0:
            raise ValueError(f"search.rho must be >= 0, got {self.rho}")
        self._validate_per_objective()

    def _validate_per_objective(self) -> None:
        """The settings holding one value per objective."""
        weights, n_objectives = self.objective_weights, len(self.objectives)
        if weights is not None:
            if self.multi_objective != "mean":
                raise ValueError(
                    "search.objective_weights need search.multi_objective='mean' (ParEGO draws its own weights)"
                )
            if len(weights) != n_objectives or min(weights) < 0:
                raise ValueError(
                    f"search.objective_weights must be {n_objectives} non-negative numbers, got {list(weights)}"
                )
        if self.reference_point is not None and len(self.reference_point) != n_objectives:
            raise ValueError(
                f"search.reference_point has {len(self.reference_point)} values "
                f"for search.objectives {list(self.objectives)}"
            )
        if len(self.crash_costs) != n_objectives or not all(map(math.isfinite, self.crash_costs)):
            raise ValueError(f"search.crash_cost must be one finite number or one per objective, got {self.crash_cost}")


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


def _section_values(cls: type, mapping: Mapping[str, Any] | None, section: str) -> dict[str, Any]:
    """A settings section (``search.<section>``) over its dataclass's defaults; an unknown key is named."""
    mapping = dict(mapping or {})
    allowed = [field.name for field in dataclasses.fields(cls)]
    unknown = [str(key) for key in mapping if key not in allowed]
    if unknown:
        raise ValueError(f"unknown search.{section} settings {unknown}; allowed: {allowed}")
    return {field.name: field.default for field in dataclasses.fields(cls)} | mapping


def _check_choice(name: str, value: Any, allowed: Collection[str]) -> None:
    if value not in allowed:
        raise ValueError(f"unknown search.{name} {value!r}; allowed: {list(allowed)}")


def _as_tuple(name: str, value: Any, expected: str = "a list") -> tuple[Any, ...]:
    if isinstance(value, (str, bytes)) or not isinstance(value, Iterable):
        raise ValueError(f"search.{name} must be {expected}, got {value!r}")
    return tuple(value)


def _optional(convert: Callable[..., Any], name: str, value: Any, **bounds: int) -> Any:
    return None if value is None else convert(name, value, **bounds)


def _is_number(value: Any) -> bool:
    return isinstance(value, numbers.Real) and not isinstance(value, bool)


def _number(name: str, value: Any) -> float:
    if not _is_number(value):
        raise ValueError(f"search.{name} must be a number, got {value!r}")
    return float(value)


def _numbers(name: str, values: Any, expected: str = "a list of numbers") -> tuple[float, ...]:
    return tuple(_number(name, value) for value in _as_tuple(name, values, expected))


def _number_or_numbers(name: str, value: Any) -> float | tuple[float, ...]:
    return float(value) if _is_number(value) else _numbers(name, value, "a number or a list of numbers")


def _integer(name: str, value: Any, minimum: int | None = None) -> int:
    bound = "" if minimum is None else f" >= {minimum}"
    is_integer = _is_number(value) and math.isfinite(value) and int(value) == value
    if not is_integer or (minimum is not None and value < minimum):
        raise ValueError(f"search.{name} must be an integer{bound}, got {value!r}")
    return int(value)
