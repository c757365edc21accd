"""The paper's DPN space as a blackbox for anyone's optimiser, shipped the way YAHPO Gym (Pfisterer et al. 2022) and
NAS-Bench-301 (Zela et al. 2022) ship theirs: a configuration space, fidelities and named objectives, and a query
that answers in milliseconds instead of a training run (docs/blackbox.md). It comes in two modes of one API:

- ``surrogate`` (the default): one :class:`~fairnas.benchmarks.surrogate.Surrogate` (the family of the search
  benchmark, :data:`~fairnas.benchmarks.problems.SURROGATE_FAMILY`) fitted to a shipped table's runs (default
  ``dpn_paper_sampled``) on every objective of both splits at once: validation and test error, rank disparity,
  accuracy disparity and each group's error, all derived from the modelled channels (so error is the mean of the
  groups' errors and disparity their gap in every run). :meth:`FairnessBlackbox.query` is one simulated training run
  of any configuration (:meth:`~fairnas.benchmarks.surrogate.Surrogate.sample`: deterministic per configuration and
  training seed, its epochs correlated as a learning curve's, and the runs of one seed sharing that seed's effect, as
  real runs do); :meth:`FairnessBlackbox.mean` is the truth, the exact expectation of a run's values;
- ``table``: the table's own runs (:data:`COLUMNS` is their schema): a query answers a configuration and seed the
  table trained with its recorded values, :meth:`FairnessBlackbox.mean` with the mean over the seeds it has, and
  anything else with one line naming what the table holds. Results on it are results on real training runs.

A configuration is checked and made canonical (:meth:`FairnessBlackbox.checked`: ``op0=5.0`` is the operation 5), so
the same configuration is always the same run. Every blackbox records its :attr:`~FairnessBlackbox.version` (the
table's hash, the surrogate's version and the fitted model's library versions and fingerprint), which results cite
(:attr:`~FairnessBlackbox.citation`). Fitting took 6-9 s of one thread on a busy 2-core machine (docs/blackbox.md,
with the other timings), so the loader keeps one blackbox per process and arguments (``functools.lru_cache``). On busy
cores set ``OMP_NUM_THREADS=1``: scikit-learn's gradient boosting otherwise spreads every prediction over all cores.
"""

from __future__ import annotations

import functools
import hashlib
import importlib.metadata
import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from ConfigSpace import ConfigurationSpace
from ConfigSpace.hyperparameters import (
    CategoricalHyperparameter,
    Constant,
    IntegerHyperparameter,
    NumericalHyperparameter,
    OrdinalHyperparameter,
)

from fairnas.benchmarks.problems import SURROGATE_FAMILY, SURROGATE_TABLE
from fairnas.benchmarks.surrogate import VERSION, RunsTable, Surrogate
from fairnas.benchmarks.tables import TABLES, load_table, names
from fairnas.config import SPACES_DIR
from fairnas.search import config_id, load_space
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
MODES = ("surrogate", "table")
COLUMNS = {
    "config_id": "the configuration's id: the first 12 hex digits of the SHA-1 of its canonical JSON",
    "config": "the configuration as JSON, its active hyperparameters only, keys sorted",
    "seed": "the training seed",
    "epoch": "the epoch after which the metrics were measured (the fidelity, 1 to 4)",
    "<hyperparameter>": "one column per hyperparameter of the space, empty where inactive",
    "<split>/<metric>": "for split val and test and metric error, rank_disparity, rank, disparity, error/g0, error/g1, "
    "rank/g0, rank/g1 (docs/metrics.md); error = (error/g0 + error/g1) / 2, disparity = |error/g0 - error/g1| and "
    "rank_disparity = |rank/g0 - rank/g1| in every row",
    "run_seconds": "the whole run's training seconds (setup and evaluation included), on every row of the run",
}
"""The columns of a shipped table (``fairnas/benchmarks/tables/<name>.csv``), one row per configuration, seed and
epoch: what the ``table`` mode answers from. A query returns the :data:`METRICS` of both splits."""
LIBRARIES = ("scikit-learn", "numpy", "scipy", "pandas", "ConfigSpace")
"""The libraries whose versions a surrogate blackbox's :attr:`~FairnessBlackbox.version` records: the fit depends on
them, and it is refitted at every load."""
REFERENCE_FINGERPRINTS = {
    ("dpn_paper_sampled", 2): "44f6280e393d36765c9598be3f0a015e618fcb4ce1637dbd04c08ab6beabf91f",
    ("dpn_paper_top5", 2): "8cb8f2b69388470b9258a95bdb89cc11c68918c0f47583a4a72578a903731dea",
}
"""The model fingerprint (:func:`fingerprint`) the fit of each shipped table gave when docs/blackbox.md's figures were
measured (scikit-learn 1.9.1, numpy 2.4.6, scipy 1.17.1, by surrogate version): a load whose fingerprint differs
says so in its version (``matches_reference``), so a result fitted by other library versions is known to be one."""


@dataclass(frozen=True, eq=False)
class FairnessBlackbox:
    """A loaded blackbox (the module docstring). Every objective is minimised."""

    name: str
    configspace: ConfigurationSpace
    """The table's space (ConfigSpace, with its conditions): a configuration holds its active hyperparameters only."""
    fidelities: tuple[int, ...]
    """The epochs a run reports after."""
    objectives: tuple[str, ...]
    """``<split>/<metric>`` for each split of :data:`SPLITS` and metric of :data:`METRICS`, e.g. ``val/error``."""
    epoch_seconds: float
    """The median training seconds of one epoch in the table (its median run over the epochs; setup included);
    :meth:`cost` is a configuration's own."""
    surrogate: Surrogate | None
    """The fitted surrogate (``surrogate`` mode), or None (``table`` mode)."""
    mode: str = "surrogate"
    version: dict[str, Any] = field(default_factory=dict)
    """What a result on this blackbox cites: the table and the SHA-256 of its files, the mode, and in ``surrogate``
    mode the surrogate's :data:`~fairnas.benchmarks.surrogate.VERSION` and family, the versions of
    :data:`LIBRARIES`, the fitted model's :func:`fingerprint` and whether it matches the reference one."""
    runs: RunsTable | None = None
    """The table's runs, every objective of both splits (in ``table`` mode the answers; in ``surrogate`` mode what
    was fitted)."""
    fidelity_name: str = FIDELITY

    def query(self, config: Mapping[str, Any], epoch: int, seed: int = 0) -> dict[str, float]:
        """Every objective of ``config`` after ``epoch`` in its run with training ``seed``: simulated (the same
        values for the same configuration and seed, the epochs of one run correlated), or in ``table`` mode the
        table's run, which must exist."""
        index, config, seed = self._epoch(epoch), self.checked(config), _seed(seed)
        if self.surrogate is None:
            row = self._row(config)
            seeds = self.seeds(config)
            if seed not in seeds:
                raise ValueError(
                    f"seed {seed} was not trained for configuration {config_id(config)} in {self.name}; its seeds: "
                    f"{seeds}"
                )
            return self._named(self.runs.values[row, self.runs.seeds.index(seed), index])
        return self._named(self.surrogate.sample(config, seed, WORLD)[index])

    def mean(self, configs: Mapping[str, Any] | Sequence[Mapping[str, Any]], epoch: int) -> Any:
        """Every objective after ``epoch`` averaged over training seeds, of one configuration (a dict back) or of a
        list of them (a list of dicts, computed together and cached per configuration): the exact expectation of a
        simulated run's values, or in ``table`` mode the mean over the seeds the table has."""
        index = self._epoch(epoch)
        single = isinstance(configs, Mapping)
        if not single and not (isinstance(configs, (list, tuple)) and configs):
            _refuse(configs, "or a non-empty list of them")
        checked = [self.checked(config) for config in ([configs] if single else configs)]  # type: ignore[list-item]
        if self.surrogate is None:
            values = [np.nanmean(self.runs.values[self._row(config)], axis=0)[index] for config in checked]
        else:
            values = list(self.surrogate.mean(checked)[:, index])
        answers = [self._named(row) for row in values]
        return answers[0] if single else answers

    def cost(self, config: Mapping[str, Any], epoch: int, seed: int = 0) -> float:
        """The training seconds of ``config``'s run up to ``epoch`` (setup and evaluation included, spread evenly over
        the epochs): modelled from the table's ``run_seconds`` (:meth:`Surrogate.seconds`), or in ``table`` mode the
        run's recorded seconds; :attr:`epoch_seconds` per epoch where the table has none."""
        index, config = self._epoch(epoch), self.checked(config)
        share = (index + 1) / len(self.fidelities)
        if self.surrogate is not None:
            seconds = float(self.surrogate.seconds([config])[0])
        elif self.runs.seconds is not None:
            seed = _seed(seed)
            if seed not in self.seeds(config):
                raise ValueError(f"seed {seed} was not trained for configuration {config_id(config)} in {self.name}")
            seconds = float(self.runs.seconds[self._row(config), self.runs.seeds.index(seed)])
        else:
            seconds = math.nan
        return share * (seconds if math.isfinite(seconds) else self.epoch_seconds * len(self.fidelities))

    def seeds(self, config: Mapping[str, Any]) -> list[int] | None:
        """The training seeds the table has for ``config`` (``table`` mode), or None: any non-negative integer is a
        seed of the surrogate."""
        if self.surrogate is not None:
            return None
        row = self._row(self.checked(config))
        present = ~np.isnan(self.runs.values[row, :, -1, 0])
        return [seed for seed, there in zip(self.runs.seeds, present, strict=True) if there]

    def configs(self) -> list[dict[str, Any]]:
        """The table's configurations (in ``table`` mode the only ones it answers for)."""
        return [dict(config) for config in self.runs.configs]

    @property
    def citation(self) -> str:
        """The version as one line for a results table or paper: mode, table and hash, and the fit's versions."""
        version = self.version
        text = f"fairnas blackbox {version['table']} ({version['mode']}; table sha256 {version['table_sha256'][:12]}"
        if version["mode"] == "surrogate":
            libraries = ", ".join(f"{name} {value}" for name, value in version["libraries"].items())
            text += f"; surrogate v{version['surrogate_version']} {version['family']}, {libraries}"
            text += f"; model {version['fingerprint'][:12]}"
        return text + ")"

    def checked(self, config: Mapping[str, Any], drop_inactive: bool = False) -> dict[str, Any]:
        """``config`` (a dict or a ConfigSpace ``Configuration``) as the canonical plain dict the benchmark reads:
        each value the space's own (a choice equal to it, ``5.0`` for the choice ``5``; a float for a float
        hyperparameter, an integral number for an integer one), keys sorted. Anything else stops with a one-line
        ValueError naming the first unknown, missing, inactive or out-of-range hyperparameter and what is allowed, or
        saying that ``config`` is not a mapping. ``drop_inactive``: leave out inactive hyperparameters instead (a
        sampler without conditions sets them all)."""
        if not isinstance(config, Mapping):
            _refuse(config)
        values = dict(config)
        unknown = sorted(str(name) for name in set(values) - set(self.configspace))
        if unknown:
            raise ValueError(f"unknown hyperparameter '{unknown[0]}'; {self.name} has {sorted(self.configspace)}")
        conditions = {condition.child.name: condition for condition in self.configspace.conditions}
        active: dict[str, Any] = {}
        for name, hyperparameter in self.configspace.items():  # parents before children
            condition = conditions.get(name)
            if condition is None or _holds(condition, active):
                if name not in values:
                    raise ValueError(f"the configuration lacks '{name}' ({_allowed(hyperparameter)})")
                value = _canonical(hyperparameter, values[name])
                if value is None:
                    raise ValueError(f"{name}={values[name]!r} is outside the space: {_allowed(hyperparameter)}")
                active[name] = value
            elif name in values and not drop_inactive:
                raise ValueError(f"'{name}' is inactive in this configuration ({condition}); leave it out")
        return dict(sorted(active.items()))

    def _row(self, config: Mapping[str, Any]) -> int:
        """The table's row of a checked configuration, or a one-line ValueError."""
        identifier, rows = config_id(config), self._rows
        if identifier not in rows:
            raise ValueError(
                f"configuration {identifier} is not in the table {self.name}, which answers only for its "
                f"{len(rows)} configurations (configs()); load_blackbox('{self.name}') answers for any"
            )
        return rows[identifier]

    @functools.cached_property
    def _rows(self) -> dict[str, int]:
        """The table's row of each configuration id."""
        return {config_id(config): row for row, config in enumerate(self.runs.configs)}

    def _epoch(self, epoch: int) -> int:
        for index, fidelity in enumerate(self.fidelities):
            if is_number(epoch) and epoch == fidelity:
                return index
        raise ValueError(f"epoch {epoch!r} is not a fidelity of {self.name}; allowed: {list(self.fidelities)}")

    def _named(self, values: np.ndarray) -> dict[str, float]:
        """One epoch's values by objective name (the surrogate's are already in range: a share in [0, 1], rank
        disparity at least 0)."""
        return {name: float(value) for name, value in zip(self.objectives, values, strict=True)}


@functools.lru_cache(maxsize=4)
def load_blackbox(name: str = SURROGATE_TABLE, tables: Path | None = None, mode: str = "surrogate") -> FairnessBlackbox:
    """The blackbox of the table ``<tables>/<name>`` (default: the shipped ``dpn_paper_sampled``) in ``mode``
    (:data:`MODES`): the surrogate fitted to it on first use (seconds), or the table's own runs; the same object for
    every later call with the same arguments in this process."""
    folder = Path(tables) if tables is not None else TABLES
    if mode not in MODES:
        raise ValueError(f"unknown blackbox mode '{mode}'; allowed: {list(MODES)}")
    if not (folder / f"{name}.json").is_file():
        raise ValueError(f"no table '{name}' in {folder}; the tables there: {names(folder)}")
    table, spec = load_table(name, folder)
    space = load_space(SPACES_DIR.parent / spec["space"])
    objectives = tuple(f"{split}/{metric}" for split in SPLITS for metric in METRICS)
    runs = RunsTable.of(table, objectives, split=None)
    if "run_seconds" in table:
        run_seconds = float(table.groupby(["config_id", "seed"])["run_seconds"].first().median())
    else:  # a table built before runs kept their seconds
        run_seconds = float(spec.get("train_seconds", {}).get("median", math.nan))
    version: dict[str, Any] = {"table": name, "mode": mode, "table_sha256": table_hash(folder, name)}
    surrogate = None
    if mode == "surrogate":
        surrogate = Surrogate.fit(space, runs, SURROGATE_FAMILY)
        model = fingerprint(surrogate, runs)
        reference = REFERENCE_FINGERPRINTS.get((name, VERSION))
        version |= {
            "surrogate_version": VERSION,
            "family": SURROGATE_FAMILY,
            "libraries": {library: importlib.metadata.version(library) for library in LIBRARIES},
            "fingerprint": model,
            "matches_reference": None if not reference else model == reference,
        }
    return FairnessBlackbox(
        name=name,
        configspace=space.configspace,
        fidelities=tuple(int(epoch) for epoch in runs.epochs),
        objectives=objectives,
        epoch_seconds=run_seconds / len(runs.epochs),
        surrogate=surrogate,
        mode=mode,
        version=version,
        runs=runs,
    )


def table_hash(folder: Path, name: str) -> str:
    """The SHA-256 of a table's CSV and spec, the bytes as shipped."""
    digest = hashlib.sha256()
    for suffix in (".csv", ".json"):
        digest.update((folder / f"{name}{suffix}").read_bytes())
    return digest.hexdigest()


def fingerprint(surrogate: Surrogate, runs: RunsTable) -> str:
    """The SHA-256 of the surrogate's means of the table's configurations after every epoch, rounded to 6
    decimals: the same for the same fit, whatever the machine, and another where library versions change the fit."""
    means = np.round(surrogate.mean(runs.configs), 6) + 0.0  # -0.0 as 0.0
    return hashlib.sha256(json.dumps(means.tolist()).encode()).hexdigest()


def _refuse(value: Any, also: str = "") -> None:
    text = repr(value)
    text = text if len(text) <= 60 else text[:57] + "..."
    raise ValueError(
        f"a configuration is a mapping of hyperparameter names to values (a dict or a ConfigSpace Configuration)"
        f"{' ' + also if also else ''}, not {type(value).__name__} {text}"
    )


def _canonical(hyperparameter: Any, value: Any) -> Any:
    """The space's own value equal to ``value``, or None where none is: a categorical's or ordinal's choice (a number
    equals a numeric choice, ``5.0`` the choice ``5``; a string only the same string), a float for a float
    hyperparameter in its range, an int for an integer one."""
    if isinstance(hyperparameter, (CategoricalHyperparameter, OrdinalHyperparameter, Constant)):
        choices = (
            hyperparameter.choices
            if isinstance(hyperparameter, CategoricalHyperparameter)
            else hyperparameter.sequence
            if isinstance(hyperparameter, OrdinalHyperparameter)
            else (hyperparameter.value,)
        )
        for choice in choices:
            if _same(choice, value):
                return choice.item() if hasattr(choice, "item") else choice
        return None
    if not isinstance(hyperparameter, NumericalHyperparameter) or not is_number(value) or not math.isfinite(value):
        return None
    if isinstance(hyperparameter, IntegerHyperparameter):
        if not float(value).is_integer():
            return None
        value = int(value)
    else:
        value = float(value)
    try:
        return value if hyperparameter.legal_value(value) else None
    except (TypeError, ValueError):
        return None


def _same(choice: Any, value: Any) -> bool:
    """Whether ``value`` names the choice: equal and of its kind (a number for a number, a string for a string,
    a bool only for a bool)."""
    flags = (bool, np.bool_)
    if isinstance(choice, flags) or isinstance(value, flags):
        return isinstance(choice, flags) and isinstance(value, flags) and bool(choice) == bool(value)
    if is_number(choice):
        return is_number(value) and value == choice
    if isinstance(choice, str):
        return isinstance(value, str) and value == choice
    return bool(value == choice)


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
