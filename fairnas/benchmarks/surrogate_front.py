"""The best front of a surrogate benchmark's truth, searched for instead of only sampled: the reference a search's
answer is scored against (:func:`fairnas.benchmarks.problems.surrogate_problem`).

A sample of the space (the table's configurations and a Sobol design) misses the best configurations of a landscape
with 6,561 operation, head and optimiser combinations and two continuous hyperparameters: searches reached 1.03-1.04
of the front of such a sample (docs/search_benchmark.md, "Searching the surrogate"). :func:`search_front` climbs
from it: every configuration on the front is changed one hyperparameter at a time (each other choice of a
categorical one, a grid over a number's range), the front of all configurations so far is kept, and the rounds stop
when the front's hypervolume stops growing. The result is still a lower bound of the landscape's best front (it is a
local search), so it is a *reference*, and a search's share of it may exceed 1."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
from ConfigSpace import ConfigurationSpace

from fairnas.benchmarks.design import _active, _value
from fairnas.search import config_id
from fairnas.search.hypervolume import hypervolume
from fairnas.search.pareto import non_dominated_mask

GRID = 17
"""How many values across its range (on its log scale where it has one) a number takes in a neighbour."""
ROUNDS = 6
"""The most rounds :func:`search_front` climbs."""
TOLERANCE = 1e-4
"""The relative growth of the front's hypervolume below which :func:`search_front` stops."""


def unit_position(configspace: ConfigurationSpace, config: dict[str, Any]) -> dict[str, float]:
    """Each hyperparameter's place in [0, 1] (the inverse of the Sobol design's mapping: a choice the middle of its
    share, a number its position on its scale); an inactive one the middle, 0.5."""
    positions = {}
    for name, hyperparameter in configspace.items():
        value = config.get(name)
        options = getattr(hyperparameter, "choices", None) or getattr(hyperparameter, "sequence", None)
        if value is None or not hasattr(hyperparameter, "lower") and options is None:
            positions[name] = 0.5
        elif options is not None:
            positions[name] = (list(options).index(value) + 0.5) / len(options)
        else:
            lower, upper = float(hyperparameter.lower), float(hyperparameter.upper)
            scale = np.log if hyperparameter.log else float
            positions[name] = float((scale(value) - scale(lower)) / (scale(upper) - scale(lower)))
    return positions


def neighbours(configspace: ConfigurationSpace, config: dict[str, Any]) -> list[dict[str, Any]]:
    """The configurations that differ from ``config`` in one hyperparameter: each other choice of a categorical or
    ordinal one, :data:`GRID` values of a number (a hyperparameter that becomes active takes the middle of its
    range)."""
    positions = unit_position(configspace, config)
    found: dict[str, dict[str, Any]] = {}
    for name, hyperparameter in configspace.items():
        options = getattr(hyperparameter, "choices", None) or getattr(hyperparameter, "sequence", None)
        places = (np.arange(len(options)) + 0.5) / len(options) if options is not None else np.linspace(0, 1, GRID)
        for place in places:
            candidate = {
                key: config[key] if key in config else _at(configspace, key, u) for key, u in positions.items()
            }
            candidate[name] = _at(configspace, name, float(place))
            neighbour = _active(configspace, candidate)
            found.setdefault(config_id(neighbour), neighbour)
    found.pop(config_id(config), None)
    return list(found.values())


def _at(configspace: ConfigurationSpace, name: str, u: float) -> Any:
    """The value of ``name`` at ``u`` in [0, 1] (the Sobol design's mapping), a number kept inside its bounds."""
    hyperparameter = configspace[name]
    value = _value(hyperparameter, min(u, 1 - 1e-12))
    if hasattr(hyperparameter, "lower") and not isinstance(value, str):
        value = type(value)(min(max(value, hyperparameter.lower), hyperparameter.upper))
    return value


def search_front(
    truth: Callable[[Sequence[dict[str, Any]]], np.ndarray],
    configspace: ConfigurationSpace,
    start: Sequence[dict[str, Any]],
    reference_point: Sequence[float],
) -> tuple[float, list[dict[str, Any]], list[float]]:
    """Climb from ``start`` (the module docstring). ``truth(configs)`` is [configuration, objective], minimised.
    Returns the hypervolume of the best front found at ``reference_point``, its configurations, and the
    hypervolume after each round (the first: ``start``'s front)."""
    pool = {config_id(config): config for config in start}
    values = dict(zip(pool, truth(list(pool.values())), strict=True))
    history: list[float] = []
    front: list[str] = []
    for _ in range(ROUNDS + 1):
        ids = list(values)
        points = np.array([values[identifier] for identifier in ids])
        front = [ids[i] for i in np.flatnonzero(non_dominated_mask(points))]
        history.append(hypervolume(np.array([values[identifier] for identifier in front]), reference_point))
        if len(history) > 1 and history[-1] <= history[-2] * (1 + TOLERANCE):
            break
        new = {}
        for identifier in front:
            for neighbour in neighbours(configspace, pool[identifier]):
                key = config_id(neighbour)
                if key not in pool:
                    new[key] = neighbour
        if not new:
            break
        pool |= new
        values |= dict(zip(new, truth(list(new.values())), strict=True))
    return history[-1], [pool[identifier] for identifier in front], history
