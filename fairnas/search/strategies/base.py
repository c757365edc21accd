"""The strategies' one contract: ``Proposal`` and ``Strategy`` (ask/tell), what a strategy is built from
(``build(configspace, settings, context)``), and the registry that maps ``search.strategy``'s names to strategies.

Imports no optimisation library: a strategy's module registers it, and a library the strategy needs is imported
when the search builds it (:meth:`Registration.load`).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from ConfigSpace import ConfigurationSpace

from fairnas.search.records import TrialRecord
from fairnas.search.sections import SEARCH
from fairnas.search.trial import TrialOutcome


@dataclass(frozen=True)
class Proposal:
    """A trial a strategy wants evaluated; ``handle`` is the strategy's own trial object; ``seed`` the training
    seed it asks for (None: the search's seed)."""

    config: dict[str, Any]
    budget: float
    handle: Any = None
    seed: int | None = None


class Strategy(Protocol):
    """What the search loop drives: ``ask`` for a trial, ``tell`` its outcome, replay earlier runs' records."""

    def ask(self) -> Proposal | None:
        """The next trial; None when there is none until a running trial is told (or none at all)."""
        ...

    def tell(self, proposal: Proposal, outcome: TrialOutcome) -> None: ...

    def tell_record(self, record: TrialRecord) -> None:
        """A trial an earlier (interrupted) run finished and this run has not asked for (it may still ask for it
        later and be told it again)."""
        ...


@dataclass(frozen=True)
class BuildContext:
    """What a strategy is built from beside its space and settings: the search's output folder (a strategy keeps
    its own files in a subfolder of it, e.g. SMAC's smac3/) and the trials an earlier run finished (trials.csv)."""

    output_dir: Path
    history: Sequence[TrialRecord] = ()


Build = Callable[[ConfigurationSpace, Any, BuildContext], Strategy]
"""``build(configspace, settings, context)``: ``settings`` is the search's ``SearchSettings``, typed ``Any`` here
because ``fairnas.search.settings`` reads this registry (each strategy's ``build`` names the type)."""


class Options(Protocol):
    """A strategy's settings section ``search.<name>``: a frozen dataclass that checks itself."""

    @classmethod
    def from_mapping(cls, mapping: Any) -> Any:
        """The section from a dict, an OmegaConf node, None (the defaults) or itself; a bad value is named in one
        line (``search.<name>.<key>``)."""
        ...


@dataclass(frozen=True)
class Registration:
    """A registered strategy: ``build`` makes it; ``options`` is its settings section's class (None: it has no
    options), ``check(settings)`` checks the section against the loop's settings, and ``resume_invariant`` names the
    options a resumed search must share (search.json records them by name); ``resume_unrecorded`` gives the value
    an option had in searches whose search.json predates it, so such a search resumes only with that value.
    Traits: ``full_budget_only``, every trial at max_budget whatever the options; ``multi_fidelity``, trials at
    budgets from min_budget to max_budget (given its options). ``requires``: the module ``build`` imports that needs
    an optional extra; it stops with one line naming the extra when it is missing. ``title``: how tables and
    benchmarks call it (default: its name)."""

    name: str
    build: Build
    options: type[Options] | None = None
    check: Callable[[Any], None] | None = None  # given the SearchSettings, as build is
    resume_invariant: tuple[str, ...] = ()
    resume_unrecorded: Mapping[str, Any] = field(default_factory=dict)
    full_budget_only: bool = False
    multi_fidelity: bool = False
    requires: str | None = None
    title: str = ""

    def __post_init__(self) -> None:
        if not self.title:
            object.__setattr__(self, "title", self.name)

    def load(self) -> Build:
        """``build``, once the module it requires imports (a missing extra raises its one-line ValueError)."""
        if self.requires is not None:
            importlib.import_module(self.requires)
        return self.build

    def available(self) -> bool:
        """Whether the strategy can be built here (its optional extra, if any, is installed)."""
        try:
            self.load()
        except ValueError:
            return False
        return True


REGISTRY: dict[str, Registration] = {}
"""Strategies by name, in the order their modules registered them."""


def register(registration: Registration) -> Registration:
    """Add a strategy to the registry (a strategy's module does so when it is imported)."""
    if registration.name in REGISTRY:
        raise ValueError(f"search strategy {registration.name!r} is registered twice")
    REGISTRY[registration.name] = registration
    return registration


def registration(name: str) -> Registration:
    """The registered strategy ``name``; an unknown one is named in one line with the registered ones."""
    return REGISTRY[SEARCH.choice("strategy", name, REGISTRY)]
