"""The search methods of the benchmark, by name (``bench/search_efficiency.py --methods``).

Every method minimises all objectives through ``run_search``, on the same space, budgets and target per problem:

- ``smac``: ``SearchSettings(strategy="smac")`` with every Hyperband bracket (``search.smac.brackets=null``, the
  paper's SMAC), eta and ParEGO, promoted configurations continue from their lower-budget checkpoints (beyond the
  paper); every SMAC variant below runs every bracket unless it names its own;
- ``smac_ends``: SMAC with Hyperband's first and last brackets only (``search.smac.brackets=[0, -1]``);
- ``smac_scratch``: the same SMAC search, every promoted configuration retrained from scratch (the paper);
- ``random``: ``strategy="random"``, every configuration trained to the maximum budget;
- ``moasha``: ``strategy="moasha"``, Syne Tune's MO-ASHA (the closest peer: multi-fidelity, multi-objective;
  ``fairnas/search/strategies/moasha/``), promoted configurations continue;
- ``nsga2``: ``strategy="nsga2"``, pymoo's NSGA-II (``fairnas/search/strategies/nsga2.py``), generations of
  ``population_size`` trials at the maximum budget;
- ``botorch``: ``strategy="botorch"``, BoTorch's GP with qLogNEHVI, every trial at the maximum budget;
- ``<strategy>+final``: the strategy, then the final-selection stage re-trains its best configurations;
- every strategy of the registry gets both (:func:`strategy_methods`); :data:`VARIANTS` adds other set-ups of SMAC
  and BoTorch, and BoTorch's own loop outside fairnas (``reference_*``).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from fairnas.search.strategies import REGISTRY


@dataclass(frozen=True)
class Method:
    """A search method of the benchmark: a strategy, whether promoted configurations continue their checkpoints,
    ``SearchSettings`` overrides, and whether the final-selection stage re-trains its best configurations."""

    label: str
    strategy: str
    continuing: bool = True
    settings: Mapping[str, Any] = dataclasses.field(default_factory=dict)
    final: bool = False
    min_budget_share: float | None = None  # min_budget as a share of the problem's max_budget (None: the problem's)


BENCHMARK_OPTIONS = {"botorch": {"fidelity": "full"}, "smac": {"brackets": None}}
"""Options of a strategy's own method where they differ from its defaults: BoTorch's multi-fidelity set-ups are
variants below, its method runs every trial at the full budget; SMAC's method runs every Hyperband bracket (the
paper's set-up, whatever ``search.smac.brackets`` defaults to)."""


def strategy_methods() -> dict[str, Method]:
    """Every registered strategy (:data:`fairnas.search.strategies.REGISTRY`) under its name, with its benchmark
    options, and ``<name>+final``: the same search followed by the final stage."""
    methods = {}
    for name, registration in REGISTRY.items():
        settings = {"options": BENCHMARK_OPTIONS[name]} if name in BENCHMARK_OPTIONS else {}
        methods[name] = Method(registration.title, name, settings=settings)
        methods[f"{name}+final"] = Method(f"{registration.title} + final stage", name, settings=settings, final=True)
    return methods


def smac_options(**options: Any) -> dict[str, Any]:
    """A SMAC variant's settings: SMAC's benchmark options (every bracket) with ``options`` changed."""
    return {"options": {**BENCHMARK_OPTIONS["smac"], **options}}


BOTORCH_REFIT5 = {"options": {"fidelity": "full", "refit_every": 5}}
SMAC = smac_options()
SMAC_ENDS = smac_options(brackets=(0, -1))
VARIANTS = {
    "smac_scratch": Method("SMAC, from scratch", "smac", continuing=False, settings=SMAC),
    "smac_full": Method(
        "SMAC, every trial at the full budget (no Hyperband)", "smac", settings=SMAC, min_budget_share=1.0
    ),
    "smac_half": Method("SMAC, Hyperband from half the full budget", "smac", settings=SMAC, min_budget_share=0.5),
    "smac_ends": Method("SMAC, Hyperband's first and last brackets only", "smac", settings=SMAC_ENDS),
    "smac_ends+final": Method(
        "SMAC, Hyperband's first and last brackets + final stage", "smac", settings=SMAC_ENDS, final=True
    ),
    "smac_seeds2": Method("SMAC racing 2 seeds (full budget)", "smac", settings=smac_options(n_seeds=2)),
    "smac_seeds3": Method("SMAC racing 3 seeds (full budget)", "smac", settings=smac_options(n_seeds=3)),
    "botorch_early_stop": Method(
        "BoTorch GP, early stopping", "botorch", settings={"options": {"fidelity": "early_stop"}}
    ),
    "botorch_momf": Method("BoTorch GP, MOMF", "botorch", settings={"options": {"fidelity": "momf"}}),
    "botorch_refit5": Method(
        "BoTorch GP, hyperparameters fitted every 5th suggestion", "botorch", settings=BOTORCH_REFIT5
    ),
    "botorch_refit5+final": Method(
        "BoTorch GP, fitted every 5th + final stage", "botorch", settings=BOTORCH_REFIT5, final=True
    ),
    **{
        f"smac_design{size}{suffix}": Method(
            f"SMAC, initial design of {size}{label}",
            "smac",
            settings={**SMAC, "initial_design_size": size},
            final=final,
        )
        for size in (8, 24)
        for suffix, label, final in (("", "", False), ("+final", " + final stage", True))
    },
    "reference_full": Method("plain BoTorch loop, full budget", "reference"),
    "reference_momf": Method("plain BoTorch loop, MOMF", "reference"),
}
"""Methods beyond a strategy with its benchmark options. ``reference_*``: BoTorch's own loop outside fairnas
(:mod:`fairnas.benchmarks.botorch_reference`), on the BoTorch problems only."""
METHODS = {**strategy_methods(), **VARIANTS}
DEFAULT_METHODS = ("smac", "smac_scratch", "random", "moasha", "nsga2")
