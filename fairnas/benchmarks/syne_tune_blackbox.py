"""The fairness blackbox (:mod:`fairnas.benchmarks.blackbox`) as a Syne Tune ``Blackbox``, so Syne Tune's simulator
runs its own schedulers (ASHA, MO-ASHA, ...) on it, as it runs NAS-Bench-201 or YAHPO: wrap it in
``UserBlackboxBackend`` (``syne_tune.blackbox_repository``) and give the ``Tuner`` a ``SimulatorCallback`` and
``sleep_time=0`` (Syne Tune's ``examples/launch_simulated_benchmark.py``). docs/blackbox.md has the whole example.

- **Space.** Each ConfigSpace hyperparameter becomes the Syne Tune domain of the same range (``choice``,
  ``ordinal``, ``uniform``/``loguniform``, ``randint``/``lograndint``). Syne Tune has no conditions, so a scheduler
  samples every hyperparameter; a configuration's inactive ones (``lr_sgd`` under Adam) are dropped before the query.
- **Fidelity.** ``epoch``, the blackbox's epochs: a scheduler's ``time_attr``/``resource_attr`` and ``max_t``.
- **Objectives.** Every objective of the blackbox (``val/error``, ``val/rank_disparity``, ...) plus
  :data:`ELAPSED_TIME`, the simulated seconds since the run started: the configuration's own training seconds up to
  that epoch (:meth:`FairnessBlackbox.cost`, modelled from the table's runs, which took 31-155 s with the
  operations), so the simulator's clock orders events as real training would; pass ``elapsed_time_attr=ELAPSED_TIME``
  to the backend.
- **Seed.** The training seed of every run is the backend's ``seed`` where given, else this blackbox's ``seed``
  (default 0): one run per configuration, the same for every scheduler, so schedulers compare paired.

Syne Tune is an optional extra: ``pip install -e '.[moasha]'``.
"""

from __future__ import annotations

import math
from numbers import Real
from typing import Any

import numpy as np
from ConfigSpace import ConfigurationSpace
from ConfigSpace.hyperparameters import (
    CategoricalHyperparameter,
    Constant,
    FloatHyperparameter,
    IntegerHyperparameter,
    OrdinalHyperparameter,
)

from fairnas.benchmarks.blackbox import FairnessBlackbox, load_blackbox

try:
    import syne_tune.config_space as sp
    from syne_tune.blackbox_repository.blackbox import Blackbox
except ImportError as error:
    raise ImportError("fairnas.benchmarks.syne_tune_blackbox needs Syne Tune: pip install -e '.[moasha]'") from error

ELAPSED_TIME = "elapsed_time"
"""The objective holding a run's simulated seconds since its start (the backend's ``elapsed_time_attr``)."""


class SyneTuneBlackbox(Blackbox):
    """``blackbox`` (default :func:`~fairnas.benchmarks.blackbox.load_blackbox`) in Syne Tune's ``Blackbox``
    interface (the module docstring)."""

    def __init__(self, blackbox: FairnessBlackbox | None = None, seed: int = 0):
        self.fairness = blackbox if blackbox is not None else load_blackbox()
        self.seed = seed
        epochs = self.fairness.fidelities
        super().__init__(
            configuration_space=syne_tune_space(self.fairness.configspace),
            fidelity_space={self.fairness.fidelity_name: sp.randint(min(epochs), max(epochs))},
            objectives_names=[*self.fairness.objectives, ELAPSED_TIME],
        )

    @property
    def fidelity_values(self) -> np.ndarray:
        return np.asarray(self.fairness.fidelities)

    def _objective_function(
        self,
        configuration: dict[str, Any],
        fidelity: dict | None = None,
        seed: int | None = None,
    ) -> dict[str, float] | np.ndarray:
        """The objectives after ``fidelity`` (a dict), or after every epoch as a [epoch, objective] array (``None``),
        of the run of ``configuration`` with training ``seed`` (``None``: this blackbox's)."""
        config = self.fairness.checked(in_range(configuration, self.fairness.configspace), drop_inactive=True)
        seed = self.seed if seed is None else seed
        if fidelity is not None:
            epoch = fidelity[self.fairness.fidelity_name]
            return {**self.fairness.query(config, epoch, seed), ELAPSED_TIME: self.fairness.cost(config, epoch, seed)}
        return np.array(
            [
                [*self.fairness.query(config, epoch, seed).values(), self.fairness.cost(config, epoch, seed)]
                for epoch in self.fidelity_values
            ]
        )


def syne_tune_space(configspace: ConfigurationSpace) -> dict[str, Any]:
    """A ConfigSpace space's hyperparameters as Syne Tune domains of the same ranges (its conditions dropped)."""
    domains: dict[str, Any] = {}
    for name, hyperparameter in configspace.items():
        log = bool(getattr(hyperparameter, "log", False))
        if isinstance(hyperparameter, Constant):
            domains[name] = hyperparameter.value
        elif isinstance(hyperparameter, CategoricalHyperparameter):
            domains[name] = sp.choice(list(hyperparameter.choices))
        elif isinstance(hyperparameter, OrdinalHyperparameter):
            domains[name] = sp.ordinal(list(hyperparameter.sequence), kind="equal")
        elif isinstance(hyperparameter, IntegerHyperparameter):
            lower, upper = int(hyperparameter.lower), int(hyperparameter.upper)
            domains[name] = sp.lograndint(lower, upper) if log else sp.randint(lower, upper)
        elif isinstance(hyperparameter, FloatHyperparameter):
            low, high = float(hyperparameter.lower), float(hyperparameter.upper)
            domains[name] = sp.loguniform(low, high) if log else sp.uniform(low, high)
        else:
            raise ValueError(f"hyperparameter '{name}' of type {type(hyperparameter).__name__} has no Syne Tune domain")
    return domains


def in_range(configuration: dict[str, Any], configspace: ConfigurationSpace) -> dict[str, Any]:
    """The values of ``configuration`` that name a hyperparameter of ``configspace``, a number within a rounding error
    of a bound set to it (a log-uniform draw of Syne Tune's can overshoot by one); a value further out stays as it is,
    for :meth:`~fairnas.benchmarks.blackbox.FairnessBlackbox.checked` to refuse."""
    values = {}
    for name, value in configuration.items():
        if name in configspace:
            hyperparameter = configspace[name]
            if isinstance(hyperparameter, (IntegerHyperparameter, FloatHyperparameter)) and isinstance(value, Real):
                for bound in (hyperparameter.lower, hyperparameter.upper):
                    value = bound if math.isclose(value, bound, rel_tol=1e-9) else value
            values[name] = value
    return values
