"""``search.strategy=botorch``: a Gaussian-process search with BoTorch (multi-objective, noisy, multi-fidelity).

- :mod:`~fairnas.search.encoding`: configurations as model inputs (conditions, imputation) and back, and unit-cube
  points as configurations (shared with the surrogate benchmark and any strategy);
- :mod:`~fairnas.search.strategies.botorch.model`: the Gaussian process, qLogNEHVI and MOMF, the acquisition
  optimiser;
- :mod:`~fairnas.search.strategies.botorch.strategy`: ``BotorchStrategy``, the ask/tell strategy, composed of the
  initial design (``design``), one fidelity policy per variant (``fidelity``), the model's data and fit
  (``fitting``), the acquisitions with the search's settings (``acquisition``) and the told and pending trials
  (``trials``).

This module holds its options (``search.botorch``: :class:`BotorchSettings`, conf/search/strategy/botorch.yaml) and
registers it. BoTorch is an optional extra (``pip install -e '.[botorch]'``), imported when a search builds the
strategy; without it, that stops with one line naming the extra.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ConfigSpace import ConfigurationSpace

from fairnas.search.sections import Section, check_choice, integer, optional
from fairnas.search.strategies.base import BuildContext, Registration, Strategy, register

if TYPE_CHECKING:
    from fairnas.search.settings import SearchSettings

FIDELITIES = ("full", "early_stop", "momf")
CRASHED = ("worst", "exclude")


@dataclass(frozen=True)
class BotorchSettings(Section):
    """``search.botorch``: the Gaussian-process search's own settings (docs/search_strategies.md).

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
    section = "botorch"

    @classmethod
    def checked(cls, values: dict[str, Any]) -> BotorchSettings:
        check_choice("botorch.fidelity", values["fidelity"], FIDELITIES)
        check_choice("botorch.crashed", values["crashed"], CRASHED)
        settings = cls(
            fidelity=values["fidelity"],
            max_observations=optional(integer, "botorch.max_observations", values["max_observations"], minimum=2),
            fit_maxiter=optional(integer, "botorch.fit_maxiter", values["fit_maxiter"], minimum=1),
            refit_every=integer("botorch.refit_every", values["refit_every"], minimum=1),
            raw_samples=integer("botorch.raw_samples", values["raw_samples"], minimum=1),
            num_restarts=integer("botorch.num_restarts", values["num_restarts"], minimum=1),
            mc_samples=integer("botorch.mc_samples", values["mc_samples"], minimum=1),
            crashed=values["crashed"],
        )
        if settings.num_restarts > settings.raw_samples:
            raise ValueError(
                f"search.botorch.num_restarts ({settings.num_restarts}) must be <= search.botorch.raw_samples "
                f"({settings.raw_samples}): the restarts are picked among the raw samples"
            )
        return settings


def check(settings: SearchSettings) -> None:
    """The lower rungs of ``early_stop`` and ``momf`` need budgets below max_budget."""
    fidelity = settings.options.fidelity
    if fidelity != "full" and settings.min_budget == settings.max_budget:
        raise ValueError(f"search.botorch.fidelity={fidelity} needs search.min_budget < search.max_budget")


def build(configspace: ConfigurationSpace, settings: SearchSettings, context: BuildContext) -> Strategy:
    """The strategy, starting from every trial an earlier run finished (not from the first one asked for again)."""
    from fairnas.search.strategies.botorch.strategy import BotorchStrategy  # BoTorch is an optional extra

    return BotorchStrategy(configspace, settings, history=context.history)


register(
    Registration(
        "botorch",
        build,
        options=BotorchSettings,
        check=check,
        multi_fidelity=True,
        requires=f"{__name__}.model",
        title="BoTorch GP",
    )
)
