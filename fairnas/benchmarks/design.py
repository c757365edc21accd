"""Which configurations a benchmark holds: every one of a discrete space (:func:`grid`, a table's) or, for a space
too large for a grid, a space-filling design over the whole space (a scrambled Sobol sequence, as surrogate
benchmarks such as NAS-Bench-301 sample theirs), plus anchors, the configurations of a smaller table expressed in the
whole space's names.

A configuration is the dict a search's trial gets: active hyperparameters only (conditions respected), Python
scalars, so :func:`fairnas.search.config_id` names it as a search would.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterator, Mapping
from typing import Any

import numpy as np
from ConfigSpace import Configuration, ConfigurationSpace, UniformIntegerHyperparameter
from scipy.stats import qmc

from fairnas.search import SearchSpace, config_id
from fairnas.search.trial import native_config
from fairnas.validation import Settings


def grid(space: SearchSpace) -> Iterator[dict[str, Any]]:
    """Every configuration of a space of categorical / ordinal / constant hyperparameters, conditions respected
    (an inactive hyperparameter is absent), each once, in a fixed order."""
    configspace: ConfigurationSpace = space.configspace
    seen = set()
    names = list(configspace)
    choices = [_values(configspace[name]) for name in names]
    for values in itertools.product(*choices):
        candidate = dict(zip(names, values, strict=False))
        active = {name: value for name, value in candidate.items() if is_active(configspace, name, candidate)}
        key = config_id(active)
        if key not in seen:
            seen.add(key)
            yield native_config(active)


def _values(hyperparameter) -> list[Any]:
    for attribute in ("choices", "sequence"):
        if hasattr(hyperparameter, attribute):
            return list(getattr(hyperparameter, attribute))
    if hasattr(hyperparameter, "value"):
        return [hyperparameter.value]
    raise ValueError(f"hyperparameter '{hyperparameter.name}' is not discrete; a table needs a grid")


def is_active(configspace: ConfigurationSpace, name: str, values: dict[str, Any]) -> bool:
    """Whether hyperparameter ``name`` is active given the other ``values`` (every condition up its parents)."""
    for condition in configspace.parent_conditions_of[name]:
        parent = condition.parent.name
        if not is_active(configspace, parent, values) or not condition.satisfied_by_value(values):
            return False
    return True


def sobol_design(space: SearchSpace, n: int, seed: int = 0) -> list[dict[str, Any]]:
    """The first ``n`` points of a scrambled Sobol sequence over the space's unit cube, one dimension per
    hyperparameter (in the space's order), as configurations: a categorical or ordinal one takes the choice
    ``floor(u * k)``, a number ``lower + u * (upper - lower)`` (on the log scale when ``log``; integers rounded), a
    constant its value; inactive ones are dropped. Points that collapse onto the same configuration count once."""
    Settings().integer("design size n", n, minimum=1)
    configspace: ConfigurationSpace = space.configspace
    names = list(configspace)
    points = qmc.Sobol(d=len(names), scramble=True, seed=seed).random_base2(max(0, math.ceil(math.log2(n))))[:n]
    configs: dict[str, dict[str, Any]] = {}
    for point in points:
        candidate = {name: _value(configspace[name], u) for name, u in zip(names, point, strict=True)}
        config = _active(configspace, candidate)
        configs.setdefault(config_id(config), config)
    return list(configs.values())


def anchors(table_space: SearchSpace, space: SearchSpace, fixed: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Every configuration of the discrete ``table_space`` named as in ``space``: each of ``space``'s hyperparameters
    takes the value the table's configuration sets for the same training key, or its value in ``fixed`` (what the
    table holds fixed outside its space, e.g. the preset's optimizer). Each must be a legal configuration of
    ``space`` (a ValueError names the first that is not)."""
    unknown = sorted(set(fixed) - set(space.keys))
    if unknown:
        raise ValueError(f"anchors: fixed values {unknown} name no hyperparameter of {sorted(space.keys)}")
    return [renamed(config, table_space, space, fixed) for config in grid(table_space)]


def renamed(
    config: Mapping[str, Any], table_space: SearchSpace, space: SearchSpace, fixed: Mapping[str, Any]
) -> dict[str, Any]:
    """``config``, a configuration of ``table_space``, named as in ``space`` (:func:`anchors`)."""
    by_key = {table_space.keys[name]: value for name, value in config.items()}
    candidate = {name: by_key[key] for name, key in space.keys.items() if key in by_key} | dict(fixed)
    anchor = _active(space.configspace, candidate)
    try:
        Configuration(space.configspace, values=anchor)
    except (ValueError, KeyError) as error:
        raise ValueError(f"anchors: {dict(config)} is not a configuration of the space ({error})") from error
    return anchor


def _active(configspace: ConfigurationSpace, candidate: dict[str, Any]) -> dict[str, Any]:
    return native_config({name: value for name, value in candidate.items() if is_active(configspace, name, candidate)})


def _value(hyperparameter: Any, u: float) -> Any:
    """``hyperparameter``'s value at ``u`` in [0, 1)."""
    for attribute in ("choices", "sequence"):
        if hasattr(hyperparameter, attribute):
            options = list(getattr(hyperparameter, attribute))
            return options[min(int(u * len(options)), len(options) - 1)]
    if hasattr(hyperparameter, "value"):
        return hyperparameter.value
    lower, upper = float(hyperparameter.lower), float(hyperparameter.upper)
    if hyperparameter.log:
        value = float(np.exp(np.log(lower) + u * (np.log(upper) - np.log(lower))))
    else:
        value = lower + u * (upper - lower)
    return int(round(value)) if isinstance(hyperparameter, UniformIntegerHyperparameter) else value
