"""ConfigSpace configurations as model inputs and back: the Gaussian process of ``search.strategy=botorch`` and,
with categorical columns one-hot, the surrogate benchmark's models (:class:`fairnas.benchmarks.surrogate.Encoding`).

Every searched hyperparameter is one input column, read from ConfigSpace's own vector form
(``Configuration.get_array``): floats and integers in [0, 1] (log-scaled ones in log space), ordinals as their index
scaled to [0, 1], categoricals as their choice index (a categorical column: BoTorch's mixed kernel compares them by
Hamming distance, see :mod:`fairnas.search.strategies.botorch.model`). Constants and hyperparameters with one value
are no column. An inactive hyperparameter is imputed as SMAC imputes it (SMAC3's ``AbstractGaussianProcess`` and
``AbstractRandomForest``): a numeric column at -1, outside the [0, 1] of active values; a categorical column as one
category more. :meth:`SpaceEncoding.active` evaluates the space's conditions on a batch of inputs, so the model can
impute the inputs an acquisition optimiser tries, not only the observed ones; :meth:`SpaceEncoding.decode` turns a
candidate into a valid configuration through ConfigSpace (``deactivate_inactive_hyperparameters`` drops the inactive
values), and :meth:`SpaceEncoding.from_unit_cube` a point of the unit cube (a Sobol or random point, as a design
draws it) into one.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
from ConfigSpace import Configuration, ConfigurationSpace
from ConfigSpace.conditions import AndConjunction, OrConjunction
from ConfigSpace.hyperparameters import (
    CategoricalHyperparameter,
    Constant,
    FloatHyperparameter,
    Hyperparameter,
    IntegerHyperparameter,
    OrdinalHyperparameter,
)
from ConfigSpace.util import deactivate_inactive_hyperparameters

from fairnas.search.trial import native_config

CATEGORICAL = "categorical"
DISCRETE = "discrete"
CONTINUOUS = "continuous"
INACTIVE_NUMBER = -1.0
"""The imputed value of an inactive numeric column (SMAC's, outside [0, 1])."""
MAX_DISCRETE_VALUES = 20
"""Integers with more values are searched as continuous columns and rounded (BoTorch's own limit for local search)."""


@dataclass(frozen=True)
class Column:
    """One model input: the hyperparameter ``name`` at ``vector_index`` of ConfigSpace's vector form, whose value
    there is ``scale`` times the column's; ``values`` lists the column values a discrete or categorical column
    takes; ``inactive`` is the value imputed when the hyperparameter is inactive."""

    name: str
    kind: str
    vector_index: int
    scale: float = 1.0
    values: tuple[float, ...] = ()
    inactive: float = INACTIVE_NUMBER


class SpaceEncoding:
    """The columns of a ConfigSpace space, its conditions evaluated on batches of inputs, and the way back."""

    def __init__(self, configspace: ConfigurationSpace):
        self.configspace = configspace
        self._hyperparameters = list(configspace.values())
        self._fixed_vector = np.array(
            [hp.to_vector(np.array([hp.default_value]))[0] for hp in self._hyperparameters], dtype=float
        )
        self.columns = [column for hp in self._hyperparameters if (column := _column(hp, configspace)) is not None]
        by_child = {condition.child.name: condition for condition in configspace.conditions}
        self._conditions = [(configspace.index_of[name], by_child[name]) for name in configspace if name in by_child]

    @property
    def dim(self) -> int:
        """The number of input columns."""
        return len(self.columns)

    @property
    def conditional(self) -> bool:
        """Whether some column can be inactive (the model then imputes the inputs it is given)."""
        return bool(self._conditions)

    @property
    def categorical_columns(self) -> dict[int, list[float]]:
        """Column index -> the choice indices of a categorical column."""
        return {i: list(c.values) for i, c in enumerate(self.columns) if c.kind == CATEGORICAL}

    @property
    def discrete_columns(self) -> dict[int, list[float]]:
        """Column index -> the values of a discrete column (ordinals, integers with few values)."""
        return {i: list(c.values) for i, c in enumerate(self.columns) if c.kind == DISCRETE}

    def bounds(self) -> np.ndarray:
        """``2 x dim`` lower and upper bounds of the active values."""
        upper = [max(c.values) if c.kind == CATEGORICAL else 1.0 for c in self.columns]
        return np.array([[0.0] * self.dim, upper], dtype=float)

    def encode(self, config: Mapping[str, Any]) -> np.ndarray:
        """The inputs of a configuration (its active hyperparameters), inactive columns imputed."""
        vector = Configuration(self.configspace, values=dict(config)).get_array()
        x = np.array([vector[c.vector_index] / c.scale for c in self.columns], dtype=float)
        inactive = np.isnan(x)
        x[inactive] = [c.inactive for c, off in zip(self.columns, inactive, strict=True) if off]
        return x

    def active(self, x: np.ndarray) -> np.ndarray:
        """``n x dim`` mask of the active columns of ``n x dim`` inputs under the space's conditions (a parent that
        is inactive, imputed or not, deactivates its children)."""
        vectors = np.tile(self._fixed_vector[:, None], (1, len(x)))  # ConfigSpace's layout: hyperparameter x point
        for j, column in enumerate(self.columns):
            values = x[:, j] * column.scale
            if column.kind == CATEGORICAL:
                values = np.where(np.rint(x[:, j]) >= len(column.values), np.nan, np.rint(values))
            else:
                values = np.where(x[:, j] < INACTIVE_NUMBER / 2, np.nan, values)
                if column.kind == DISCRETE and column.scale != 1.0:
                    values = np.rint(values)
            vectors[column.vector_index] = values
        for index, condition in self._conditions:  # parents first: ConfigSpace keeps its keys in topological order
            vectors[index, ~_satisfied(condition, vectors)] = np.nan
        return ~np.isnan(vectors[[c.vector_index for c in self.columns]].T)

    def impute(self, x: np.ndarray) -> np.ndarray:
        """``x`` with every inactive column at its imputed value."""
        inactive_values = np.array([c.inactive for c in self.columns], dtype=float)
        return np.where(self.active(x), x, inactive_values)

    def decode(self, x: np.ndarray) -> dict[str, Any]:
        """The configuration of inputs ``x`` (values rounded and clipped into the space; inactive ones dropped)."""
        vector = self._fixed_vector.copy()
        for value, column in zip(x, self.columns, strict=True):
            if column.kind == CONTINUOUS:
                vector[column.vector_index] = min(max(float(value), 0.0), 1.0)
            else:
                nearest = min(column.values, key=lambda allowed: abs(allowed - float(value)))
                vector[column.vector_index] = nearest * column.scale
        values = {hp.name: hp.to_value(np.array([vector[i]]))[0] for i, hp in enumerate(self._hyperparameters)}
        return native_config(deactivate_inactive_hyperparameters(values, self.configspace))

    def from_unit_cube(self, u: np.ndarray) -> dict[str, Any]:
        """The configuration at ``u``, a point of the unit cube ``[0, 1]^dim`` (e.g. a scrambled Sobol point of
        ``scipy.stats.qmc`` or ``torch.quasirandom``), for any strategy that draws its own design: a categorical
        column of k choices takes choice ``floor(u * k)`` (equal shares of its axis), any other column the value
        nearest ``u`` (:meth:`decode`: a number in ConfigSpace's vector form, log-scaled ones in log space; an
        ordinal or a small integer its nearest vector value). The space's conditions hold: inactive values are
        dropped, constants keep their value."""
        x = [
            min(math.floor(value * len(column.values)), len(column.values) - 1) if column.kind == CATEGORICAL else value
            for value, column in zip(u, self.columns, strict=True)
        ]
        return self.decode(np.array(x, dtype=float))


def _column(hp: Hyperparameter, configspace: ConfigurationSpace) -> Column | None:
    """The column of a hyperparameter; None for one with a single value."""
    index = configspace.index_of[hp.name]
    if isinstance(hp, Constant) or hp.size == 1:
        return None
    if isinstance(hp, CategoricalHyperparameter):
        choices = tuple(float(i) for i in range(len(hp.choices)))
        return Column(hp.name, CATEGORICAL, index, values=choices, inactive=float(len(hp.choices)))
    if isinstance(hp, OrdinalHyperparameter):
        last = len(hp.sequence) - 1
        return Column(hp.name, DISCRETE, index, scale=float(last), values=tuple(i / last for i in range(last + 1)))
    if isinstance(hp, IntegerHyperparameter) and hp.size <= MAX_DISCRETE_VALUES:
        vector = hp.to_vector(np.arange(hp.lower, hp.upper + 1))
        return Column(hp.name, DISCRETE, index, values=tuple(float(v) for v in vector))
    if isinstance(hp, (IntegerHyperparameter, FloatHyperparameter)):
        return Column(hp.name, CONTINUOUS, index)
    raise ValueError(f"search.strategy=botorch cannot search hyperparameter '{hp.name}' of type {type(hp).__name__}")


def _satisfied(condition: Any, vectors: np.ndarray) -> np.ndarray:
    """Where ``condition`` holds for ``vectors`` (hyperparameter x point; NaN: inactive), an inactive parent
    failing it (ConfigSpace's vector test alone lets NaN pass a not-equals condition)."""
    if isinstance(condition, AndConjunction):
        return np.logical_and.reduce([_satisfied(part, vectors) for part in condition.components])
    if isinstance(condition, OrConjunction):
        return np.logical_or.reduce([_satisfied(part, vectors) for part in condition.components])
    parent = vectors[condition.parent_vector_id]
    with np.errstate(invalid="ignore"):
        return condition.satisfied_by_vector_array(vectors) & ~np.isnan(parent)
