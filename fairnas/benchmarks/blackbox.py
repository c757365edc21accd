"""The surrogate benchmark of the paper's whole DPN space as a blackbox for anyone's optimiser, shipped the way YAHPO
Gym (Pfisterer et al. 2022) and NAS-Bench-301 (Zela et al. 2022) ship theirs: a configuration space, fidelities and
named objectives, and a query that answers in milliseconds instead of a training run (docs/blackbox.md).

:func:`load_blackbox` fits one :class:`~fairnas.benchmarks.surrogate.Surrogate` (the family of the search benchmark,
:data:`~fairnas.benchmarks.problems.SURROGATE_FAMILY`) to a shipped table's runs (default ``dpn_paper_sampled``)
on every objective of both splits at once: validation and test error, rank disparity, accuracy disparity and each
group's error. Each objective has its own mean and noise models, so they are those of a fit per split; fitting the
splits together adds the correlation of one run's validation and test deviations (0.84-0.97 in the table's seed
contrasts), which separate fits would lose.

:meth:`FairnessBlackbox.query` is one simulated training run
(:meth:`~fairnas.benchmarks.surrogate.Surrogate.sample`): deterministic per (configuration, training seed), its
epochs correlated as a learning curve's are; :meth:`FairnessBlackbox.mean` is the noise-free truth, the predicted
mean over training seeds. Fitting took 10-13 s on one thread of a busy 2-core machine, so the loader keeps one fitted
blackbox per process and arguments (``functools.lru_cache``); a query then took about 30 ms for a new configuration
and 0.2 ms for one seen before. On busy cores set ``OMP_NUM_THREADS=1``: scikit-learn's gradient boosting otherwise
spreads every one-row prediction over all cores, and the fit took 186 s there.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from ConfigSpace import Configuration, ConfigurationSpace
from ConfigSpace.hyperparameters import (
    CategoricalHyperparameter,
    Constant,
    NumericalHyperparameter,
    OrdinalHyperparameter,
)

from fairnas.benchmarks.problems import SURROGATE_FAMILY, SURROGATE_TABLE
from fairnas.benchmarks.surrogate import RunsTable, Surrogate
from fairnas.benchmarks.tables import TABLES, load_table, names
from fairnas.config import SPACES_DIR
from fairnas.search import load_space
from fairnas.search.trial import native_config
from fairnas.validation import Settings, is_integer, is_number

METRICS = ("error", "rank_disparity", "disparity", "error/g0", "error/g1")
"""The modelled metrics of each split (docs/metrics.md): the share of misidentified probes, the gap in mean rank
between the two groups (thesis Eq. 4.1), the gap in accuracy, and each group's error."""
SPLITS = ("val", "test")
SHARES = frozenset({"error", "disparity", "error/g0", "error/g1"})
"""Metrics that are shares of probes, so a value lies in [0, 1]; rank disparity only has a lower bound, 0."""
FIDELITY = "epoch"
WORLD = 0
"""The surrogate's world (:meth:`Surrogate.sample`) every query is drawn in: a seed names a run on its own."""


@dataclass(frozen=True, eq=False)
class FairnessBlackbox:
    """A fitted surrogate benchmark (the module docstring). Every objective is minimised."""

    name: str
    configspace: ConfigurationSpace
    """The table's space (ConfigSpace, with its conditions): a configuration holds its active hyperparameters only."""
    fidelities: tuple[int, ...]
    """The epochs a run reports after."""
    objectives: tuple[str, ...]
    """``<split>/<metric>`` for each split of :data:`SPLITS` and metric of :data:`METRICS`, e.g. ``val/error``."""
    epoch_seconds: float
    """The median training seconds of one epoch in the table (its median run over the epochs; setup included)."""
    surrogate: Surrogate
    fidelity_name: str = FIDELITY

    def query(self, config: Mapping[str, Any], epoch: int, seed: int = 0) -> dict[str, float]:
        """Every objective of ``config`` after ``epoch`` in its simulated run with training ``seed``: the same values
        for the same (configuration, seed), the epochs of one run correlated."""
        index, run = self._epoch(epoch), self.surrogate.sample(self.checked(config), _seed(seed), WORLD)
        return self._named(run[index])

    def mean(self, config: Mapping[str, Any], epoch: int) -> dict[str, float]:
        """Every objective of ``config`` after ``epoch``, averaged over training seeds: the noise-free truth."""
        index = self._epoch(epoch)
        return self._named(self.surrogate.mean([self.checked(config)])[0, index])

    def checked(self, config: Mapping[str, Any], drop_inactive: bool = False) -> dict[str, Any]:
        """``config`` (a dict or a ConfigSpace ``Configuration``) as the plain dict the surrogate reads, or a one-line
        ValueError naming the first unknown, missing, inactive or out-of-range hyperparameter and what is allowed.
        ``drop_inactive``: leave out inactive hyperparameters instead (a sampler without conditions sets them all)."""
        values = dict(config)
        unknown = sorted(set(values) - set(self.configspace))
        if unknown:
            raise ValueError(f"unknown hyperparameter '{unknown[0]}'; {self.name} has {sorted(self.configspace)}")
        conditions = {condition.child.name: condition for condition in self.configspace.conditions}
        active: dict[str, Any] = {}
        for name, hyperparameter in self.configspace.items():  # parents before children
            condition = conditions.get(name)
            if condition is None or _holds(condition, active):
                if name not in values:
                    raise ValueError(f"the configuration lacks '{name}' ({_allowed(hyperparameter)})")
                if not _legal(hyperparameter, values[name]):
                    raise ValueError(f"{name}={values[name]!r} is outside the space: {_allowed(hyperparameter)}")
                active[name] = values[name]
            elif name in values and not drop_inactive:
                raise ValueError(f"'{name}' is inactive in this configuration ({condition}); leave it out")
        return native_config(Configuration(self.configspace, values=active))

    def _epoch(self, epoch: int) -> int:
        for index, fidelity in enumerate(self.fidelities):
            if is_number(epoch) and epoch == fidelity:
                return index
        raise ValueError(f"epoch {epoch!r} is not a fidelity of {self.name}; allowed: {list(self.fidelities)}")

    def _named(self, values: np.ndarray) -> dict[str, float]:
        """One epoch's values by objective name, shares clipped to [0, 1] and rank disparity at 0."""
        named = {}
        for name, value in zip(self.objectives, values, strict=True):
            upper = 1.0 if name.split("/", 1)[1] in SHARES else math.inf
            named[name] = min(max(float(value), 0.0), upper)
        return named


@functools.lru_cache(maxsize=4)
def load_blackbox(name: str = SURROGATE_TABLE, tables: Path | None = None) -> FairnessBlackbox:
    """The blackbox of the table ``<tables>/<name>`` (default: the shipped ``dpn_paper_sampled``), fitted on first
    use (about 9 s) and the same object for every later call with the same arguments in this process."""
    folder = Path(tables) if tables is not None else TABLES
    if not (folder / f"{name}.json").is_file():
        raise ValueError(f"no table '{name}' in {folder}; the tables there: {names(folder)}")
    table, spec = load_table(name, folder)
    space = load_space(SPACES_DIR.parent / spec["space"])
    val, test = (RunsTable.of(table, METRICS, split) for split in SPLITS)
    assert val.configs == test.configs and val.seeds == test.seeds and val.epochs == test.epochs
    objectives = tuple(f"{split}/{metric}" for split in SPLITS for metric in METRICS)
    runs = RunsTable(val.configs, np.concatenate([val.values, test.values], axis=3), val.seeds, val.epochs, objectives)
    if "run_seconds" in table:
        run_seconds = float(table.groupby(["config_id", "seed"])["run_seconds"].first().median())
    else:  # a table built before runs kept their seconds
        run_seconds = float(spec.get("train_seconds", {}).get("median", math.nan))
    return FairnessBlackbox(
        name=name,
        configspace=space.configspace,
        fidelities=tuple(int(epoch) for epoch in runs.epochs),
        objectives=objectives,
        epoch_seconds=run_seconds / len(runs.epochs),
        surrogate=Surrogate.fit(space, runs, SURROGATE_FAMILY),
    )


def _seed(seed: int) -> int:
    if not is_integer(seed) or seed < 0:
        Settings().fail("seed", seed, "a non-negative integer (a training seed)")
    return int(seed)


def _holds(condition: Any, active: Mapping[str, Any]) -> bool:
    """Whether ``condition`` holds for the active values so far (an inactive parent fails it)."""
    try:
        return bool(condition.satisfied_by_value(active))
    except KeyError:  # ConfigSpace's answer when a parent has no value
        return False


def _legal(hyperparameter: Any, value: Any) -> bool:
    if isinstance(value, bool) or (isinstance(hyperparameter, NumericalHyperparameter) and not is_number(value)):
        return False
    try:
        return bool(hyperparameter.legal_value(value))
    except (TypeError, ValueError):
        return False


def _allowed(hyperparameter: Any) -> str:
    """What a hyperparameter may take, in words."""
    if isinstance(hyperparameter, CategoricalHyperparameter):
        return f"allowed: {', '.join(map(str, hyperparameter.choices))}"
    if isinstance(hyperparameter, OrdinalHyperparameter):
        return f"allowed: {', '.join(map(str, hyperparameter.sequence))}"
    if isinstance(hyperparameter, Constant):
        return f"allowed: {hyperparameter.value}"
    scale = " (log scale)" if getattr(hyperparameter, "log", False) else ""
    return f"allowed: {hyperparameter.lower:g} to {hyperparameter.upper:g}{scale}"
