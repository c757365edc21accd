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
  and BoTorch, and BoTorch's own loop outside fairnas (``reference_*``);
- ``default``: whatever ``search.py`` runs when given no strategy settings, read from the composed search config
  (its strategy, that strategy's options, its initial design and its final stage, :func:`shipped`), so it follows
  the default when the config changes; ``default_search``: the same search without its final stage;
  ``default_observed``: its final stage returning the observed front re-measured (``final.answer=observed``).
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from fairnas.search.settings import FinalSettings
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
    final_settings: FinalSettings | None = None
    """The method's own final stage (the shipped default's); None: the run's (``--final-top-k``, ``--final-seeds``)."""


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
    return with_final_stage(methods)


def smac_options(**options: Any) -> dict[str, Any]:
    """A SMAC variant's settings: SMAC's benchmark options (every bracket) with ``options`` changed."""
    return {"options": {**BENCHMARK_OPTIONS["smac"], **options}}


BOTORCH_REFIT5 = {"options": {"fidelity": "full", "refit_every": 5}}
SMAC = smac_options()
SMAC_ENDS = smac_options(brackets=(0, -1))


def with_final_stage(methods: Mapping[str, Method]) -> dict[str, Method]:
    """``methods`` and, for each, ``<name>+final``: the same search followed by the final stage."""
    staged = {
        f"{name}+final": dataclasses.replace(spec, label=f"{spec.label} + final stage", final=True)
        for name, spec in methods.items()
    }
    return {**methods, **staged}


VARIANTS = {
    **with_final_stage(
        {
            "smac_scratch": Method("SMAC, from scratch", "smac", continuing=False, settings=SMAC),
            "smac_full": Method(
                "SMAC, every trial at the full budget (no Hyperband)", "smac", settings=SMAC, min_budget_share=1.0
            ),
            "smac_half": Method(
                "SMAC, Hyperband from half the full budget", "smac", settings=SMAC, min_budget_share=0.5
            ),
            "smac_ends": Method("SMAC, Hyperband's first and last brackets only", "smac", settings=SMAC_ENDS),
            "smac_seeds2": Method("SMAC racing 2 seeds (full budget)", "smac", settings=smac_options(n_seeds=2)),
            "smac_seeds3": Method("SMAC racing 3 seeds (full budget)", "smac", settings=smac_options(n_seeds=3)),
            "botorch_early_stop": Method(
                "BoTorch GP, early stopping", "botorch", settings={"options": {"fidelity": "early_stop"}}
            ),
            "botorch_momf": Method("BoTorch GP, MOMF", "botorch", settings={"options": {"fidelity": "momf"}}),
            "botorch_refit5": Method(
                "BoTorch GP, hyperparameters fitted every 5th suggestion", "botorch", settings=BOTORCH_REFIT5
            ),
            **{
                f"smac_design{size}": Method(
                    f"SMAC, initial design of {size}", "smac", settings={**SMAC, "initial_design_size": size}
                )
                for size in (8, 24)
            },
        }
    ),
    "reference_full": Method("plain BoTorch loop, full budget", "reference"),
    "reference_momf": Method("plain BoTorch loop, MOMF", "reference"),
}
"""Methods beyond a strategy with its benchmark options, each also with the final stage (``+final``).
``reference_*``: BoTorch's own loop outside fairnas (:mod:`bench.comparison.reference_loop`), on the BoTorch
problems only."""
SHIPPED = "shipped"
"""The strategy of the ``default`` methods until :func:`method` reads it from the composed config."""
SHIPPED_METHODS = {
    "default": Method("the default, as search.py ships it", SHIPPED, final=True),
    "default_search": Method("the default without its final stage", SHIPPED),
    "default_observed": Method(
        "the default, its final stage re-measuring the observed front",
        SHIPPED,
        final=True,
        final_settings=FinalSettings(answer="observed"),
    ),
}
"""``default_observed``: the shipped final stage's candidates and seeds with ``final.answer=observed``."""
METHODS = {**strategy_methods(), **VARIANTS, **SHIPPED_METHODS}
DEFAULT_METHODS = ("smac", "smac_scratch", "random", "moasha", "nsga2")


@functools.cache
def shipped() -> Method:
    """What ``search.py`` runs given no strategy settings (``conf/search.yaml`` composed as shipped): its strategy,
    the strategy-choosing settings (that strategy's options, the initial design), whether promoted configurations
    continue their checkpoints, and its final stage (none where ``final.seeds`` is 0)."""
    from fairnas.config import compose_config  # Hydra: composed on first use only
    from fairnas.search.settings import SearchSettings

    search = compose_config("search", []).search
    settings = SearchSettings.from_section(search)
    chosen: dict[str, Any] = {"options": dataclasses.asdict(settings.options)} if settings.options is not None else {}
    if settings.initial_design_size is not None:
        chosen["initial_design_size"] = settings.initial_design_size
    final = settings.final if settings.final.seeds > 0 else None
    return Method(
        "search.py's default",
        settings.strategy,
        continuing=bool(search["continue_across_fidelities"]),
        settings=chosen,
        final=final is not None,
        final_settings=final,
    )


def method(name: str) -> Method:
    """The method ``name`` of :data:`METHODS`, the ``default`` ones resolved from the composed config (:func:`shipped`):
    ``default`` with the shipped final stage, ``default_search`` without it."""
    spec = METHODS[name]
    if spec.strategy != SHIPPED:
        return spec
    default = shipped()
    if not spec.final:
        default = dataclasses.replace(default, final=False, final_settings=None)
    elif spec.final_settings is not None and default.final_settings is not None:
        answer = dataclasses.replace(default.final_settings, answer=spec.final_settings.answer)
        default = dataclasses.replace(default, final_settings=answer)
    return dataclasses.replace(default, label=spec.label)
