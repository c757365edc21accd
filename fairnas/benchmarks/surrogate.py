"""A surrogate benchmark, built the way NAS-Bench-301 and HW-GPT-Bench are: models fitted to a table of trained runs
(``bench/comparison/table_builder.py``, e.g. a space-filling design over the paper's whole space) that answer for any
configuration of the table's space, trained or not.

What it models are the table's *channels* (:mod:`fairnas.benchmarks.surrogate_metrics`): the error, the signed gap
between the groups' errors and the signed gap between their mean ranks, where the table has the groups' columns (an
objective without them is its own channel). A run's objectives are derived from its channels, so they keep the
table's identities (error the mean of the groups' errors, accuracy disparity their gap, rank disparity the absolute
rank gap), and the truth, :meth:`Surrogate.mean`, is the exact expectation of what a run reports, clipping and the
absolute values included.

For each channel, a *mean model* predicts the mean over training seeds after every epoch (the fidelities) from the
configuration; rank disparity's size comes from a mean model of its own (the signed gap's model gives its sign), so
that it ranks as well as a model of rank disparity itself. A seed's deviation from the mean has two parts
(:class:`SeedNoise`):

- a *shared seed effect*, common to every configuration trained with that seed: in the tables a seed moves nearly
  all configurations the same way (in ``dpn_paper_sampled`` seed 0 has the lower error in 81 % of them, by 0.045 on
  average). It is estimated from the table's seeds, in units of each configuration's own noise, and a simulated
  seed draws a normal combination of the table's seeds' effects; it moves a rank gap's size, not its sign;
- a configuration's own noise, whose variance a forest predicts from the configuration and its mean error after
  each epoch (the noise of rank disparity grows tenfold from the best configurations to those that barely learn),
  fitted on the log of the seeds' variances net of the shared effects.

One correlation matrix, pooled over the table's configurations, says how a run's own deviations co-vary across
epochs and channels (a run that is unlucky after epoch 2 tends to stay so). :meth:`Surrogate.sample` draws one
training run, deterministic given (world, configuration, training seed), so asking the same trial again gives the
same values (:class:`fairnas.benchmarks.surrogate_target.SurrogateTarget` searches it); the runs of one world and seed
share that seed's effect, as a real seed's runs do. A forest on the table's ``run_seconds`` gives each
configuration's training seconds (:meth:`Surrogate.seconds`).

Fitting takes seconds and is deterministic (fixed ``random_state``), so the committed table is the benchmark and the
models are refitted on load (:data:`VERSION` names the model, for results to cite). :func:`cross_validate` measures
the surrogate on configurations it was not fitted on (docs/search_benchmark.md, "The surrogate benchmark").
"""

from __future__ import annotations

import functools
import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd
from ConfigSpace import ConfigurationSpace
from scipy import stats
from scipy.special import digamma
from sklearn.ensemble import HistGradientBoostingRegressor, RandomForestRegressor, VotingRegressor
from sklearn.gaussian_process import GaussianProcessRegressor
from sklearn.gaussian_process.kernels import ConstantKernel, Matern, WhiteKernel
from sklearn.model_selection import GroupKFold

from fairnas.benchmarks.surrogate_metrics import Modelled, channel_column, expectations, folded_location, modelled
from fairnas.search import SearchSpace, config_id
from fairnas.search.encoding import SpaceEncoding
from fairnas.search.hypervolume import hypervolume
from fairnas.search.pareto import non_dominated_mask

VERSION = 2
"""The surrogate model's version, which results cite with the table's hash (docs/search_benchmark.md): 1 modelled
each objective as itself with independent seeds; 2 models the groups' channels, the shared seed effect and the noise
by error level, and each configuration's seconds (docs/search_benchmark.md, "Version 2: runs that look like real
runs")."""

Regressor = Any
"""A scikit-learn regressor: ``fit(X, y)`` and ``predict(X)``."""

FAMILIES: dict[str, Callable[[int, int], Regressor]] = {
    "forest": lambda n_features, seed: RandomForestRegressor(
        n_estimators=100, max_features=0.5, min_samples_leaf=2, random_state=seed
    ),
    "boosting": lambda n_features, seed: HistGradientBoostingRegressor(
        max_iter=300, learning_rate=0.05, min_samples_leaf=10, random_state=seed
    ),
    "ensemble": lambda n_features, seed: VotingRegressor(
        [("forest", FAMILIES["forest"](n_features, seed)), ("boosting", FAMILIES["boosting"](n_features, seed))]
    ),
    "gp": lambda n_features, seed: GaussianProcessRegressor(
        ConstantKernel() * Matern(length_scale=np.ones(n_features), nu=2.5) + WhiteKernel(1e-2),
        normalize_y=True,
        random_state=seed,
    ),
}
"""The mean models :func:`cross_validate` compares (NAS-Bench-301's families: a random forest, gradient boosting,
their average and a GP with one length scale per feature), one per channel (:class:`ObjectiveModels`: a model
shared by objectives that depend on different hyperparameters ranks both worse). Forests of 100 trees predicting
through :class:`StackedForest` keep a simulated run at about a millisecond."""

INTERVAL = 0.9
"""The central probability of the noise interval whose coverage :func:`cross_validate` reports."""
INTERVAL_DRAWS = 400
"""How many simulated runs of a configuration give its interval (:meth:`Surrogate.interval`)."""
TOP_SHARE = 0.25
"""The share of configurations, lowest in measured error, :func:`cross_validate` also ranks apart (the top region)."""
CHANCE_ERROR = 0.9
"""Measured error at or above which :func:`cross_validate` counts a configuration as not having learned (chance is
about 1 with hundreds of identities)."""
NOISE_ROUNDS = 40
"""How many steps :class:`SeedNoise` takes towards the seeds' shared effects in units of a configuration's own
noise (a fixed point that each step approaches by the share q / (1 + q) of the way left, q the effects' variance)."""
BANK_ROWS = 64
"""Up to how many rows (configurations x epochs) a prediction walks the stacked trees in NumPy
(:class:`TreeBank`); more go through scikit-learn's compiled prediction."""
SHARED_STREAM = 2**48
"""The generator key of a (world, seed)'s shared effect, beside the configurations' keys (12 hex digits, below it)."""


class Encoding:
    """Configurations of a space as feature vectors for the mean and noise models: the columns of
    :class:`~fairnas.search.encoding.SpaceEncoding` (ConfigSpace's vector form: numbers in [0, 1],
    log-scaled where ``log``, ordinals as their position, -1 when inactive), with every categorical column one-hot
    (one feature per choice, all 0 when inactive), since a regression tree or a GP kernel would read choice indices
    as an order that does not exist."""

    def __init__(self, configspace: ConfigurationSpace):
        self._space = SpaceEncoding(configspace)
        self._choices = {index: len(values) for index, values in self._space.categorical_columns.items()}
        self.width = sum(self._choices.get(index, 1) for index in range(self._space.dim))

    def __call__(self, configs: Sequence[Mapping[str, Any]]) -> np.ndarray:
        features = np.zeros((len(configs), self.width))
        for row, config in enumerate(configs):
            position = 0
            for index, value in enumerate(self._space.encode(config)):
                choices = self._choices.get(index)
                if choices is None:
                    features[row, position] = value
                elif value < choices:  # the imputed inactive value is one category more: all zeros
                    features[row, position + int(value)] = 1.0
                position += choices or 1
        return features


@dataclass(frozen=True)
class RunsTable:
    """A table's runs as arrays: ``configs`` (one per configuration, in ``config_id`` order), ``values``
    [configuration, seed, epoch, objective] (NaN where a seed is missing) and the seeds and epochs they cover; what
    a surrogate models of them, ``modelled`` and ``channels`` [configuration, seed, epoch, channel]
    (:mod:`~fairnas.benchmarks.surrogate_metrics`: the objectives themselves unless given), and ``seconds``
    [configuration, seed], each run's training seconds where the table has them."""

    configs: list[dict[str, Any]]
    values: np.ndarray
    seeds: list[int]
    epochs: list[int]
    objectives: tuple[str, ...]
    modelled: Modelled | None = None
    channels: np.ndarray | None = None
    seconds: np.ndarray | None = field(default=None, compare=False)

    def __post_init__(self) -> None:
        if self.modelled is None:
            object.__setattr__(self, "modelled", modelled(self.objectives, [], None))
            object.__setattr__(self, "channels", self.values)

    @classmethod
    def of(cls, table: pd.DataFrame, objectives: Sequence[str], split: str | None = "val") -> RunsTable:
        """The runs of ``objectives`` on ``split`` (the columns ``<split>/<objective>``; ``split=None``: the
        objectives are whole column names, e.g. ``test/error``), and the channels they are derived from."""
        prefix = f"{split}/" if split else ""
        columns = [prefix + name for name in objectives]
        missing = sorted(set(columns) - set(table.columns))
        if missing:
            raise ValueError(f"the table has no columns {missing}; it has {sorted(table.columns)}")
        what = modelled(objectives, list(table.columns), split)
        frame = table[["config_id", "seed", "epoch", *columns]].copy()
        channel_names = []
        for index, channel in enumerate(what.channels):
            source = channel_column(list(table.columns), channel, split)
            channel_names.append(f"channel {index}")
            frame[channel_names[-1]] = (
                table[source[0]] - table[source[1]] if isinstance(source, tuple) else table[source]
            )
        if "run_seconds" in table:
            frame["run_seconds"] = table["run_seconds"]
        cube = frame.set_index(["config_id", "seed", "epoch"]).sort_index()
        ids, seeds, epochs = (list(level) for level in cube.index.levels)
        full = pd.MultiIndex.from_product([ids, seeds, epochs])
        cube = cube.reindex(full)
        shape = (len(ids), len(seeds), len(epochs))

        def block(names: list[str]) -> np.ndarray:
            return cube[names].to_numpy(dtype=float).reshape(*shape, len(names))

        seconds = block(["run_seconds"])[:, :, 0, 0] if "run_seconds" in cube else None
        configs = table.drop_duplicates("config_id").set_index("config_id").loc[ids, "config"]
        return cls(
            [json.loads(text) for text in configs],
            block(columns),
            seeds,
            epochs,
            tuple(objectives),
            what,
            block(channel_names),
            seconds,
        )

    def subset(self, rows: np.ndarray) -> RunsTable:
        return RunsTable(
            [self.configs[i] for i in rows],
            self.values[rows],
            self.seeds,
            self.epochs,
            self.objectives,
            self.modelled,
            self.channels[rows] if self.channels is not None else None,
            self.seconds[rows] if self.seconds is not None else None,
        )

    def ids(self) -> set[str]:
        """The ``config_id`` of every configuration."""
        return {config_id(config) for config in self.configs}

    def means(self) -> np.ndarray:
        """[configuration, epoch, objective]: the mean over the seeds each configuration has."""
        return np.nanmean(self.values, axis=1)


class Surrogate:
    """Predicted means and seed noise of every configuration of ``space`` after each epoch (the module docstring).

    :meth:`fit` fits it to a table; :meth:`mean` and :meth:`noise_sd` are [configuration, epoch, objective] arrays
    (cached per configuration); :meth:`sample` draws one training run, :meth:`interval` the central interval of
    many."""

    def __init__(
        self,
        encoding: Encoding,
        runs: RunsTable,
        mean_model: ObjectiveModels,
        noise: SeedNoise,
        family: str,
        seconds_model: Regressor | None = None,
    ):
        assert runs.modelled is not None
        self.encoding, self.objectives, self.epochs = encoding, runs.objectives, runs.epochs
        self.modelled, self.family = runs.modelled, family
        self._mean_model, self.noise, self._seconds_model = mean_model, noise, seconds_model
        self._shape = (len(self.epochs), len(self.modelled.channels))
        self._factor = np.linalg.cholesky(noise.correlation)
        total = noise.correlation + noise.shared
        self.correlation = total / np.sqrt(np.outer(np.diag(total), np.diag(total)))
        """The correlation of one run's deviations across (epoch, channel), epoch-major: its own and the shared."""
        blocks = self.correlation.reshape(*self._shape, *self._shape)
        self._epoch_correlation = np.stack([blocks[e, :, e, :] for e in range(len(self.epochs))])  # [epoch, k, k]
        self._inflation = np.sqrt(1 + np.diag(noise.shared)).reshape(self._shape)
        self._cache: dict[str, tuple[np.ndarray, np.ndarray, np.ndarray]] = {}
        self._expectations: dict[str, tuple[np.ndarray, np.ndarray]] = {}
        self._shared: dict[tuple[int, int], np.ndarray] = {}

    @classmethod
    def fit(cls, space: SearchSpace, runs: RunsTable, family: str = "forest", seed: int = 0) -> Surrogate:
        """Fit the noise (:class:`SeedNoise`: the shared seed effects and each configuration's own variance, from the
        seeds' orthonormal contrasts; a signed gap's deviations oriented by the sign of its mean, since a seed moves
        the gap's size, not its sign: in ``dpn_paper_sampled`` seed 0's rank disparity is the lower whichever group
        ranks worse), then the mean model (``family``) on each configuration's per-epoch channel
        means net of its seeds' shared effects, and the seconds (a forest on the log of each configuration's median
        ``run_seconds``, where the table has them). Needs at least two seeds of some configurations."""
        if family not in FAMILIES:
            raise ValueError(f"unknown surrogate family '{family}'; allowed: {sorted(FAMILIES)}")
        assert runs.modelled is not None and runs.channels is not None
        encoding = Encoding(space.configspace)
        features = encoding(runs.configs)
        measured = np.nanmean(runs.channels, axis=1)  # [configuration, epoch, channel]
        orientation = _orientation(runs.modelled, measured)
        oriented = runs.channels * orientation[:, None]
        noise = SeedNoise.fit(_noise_inputs(features, runs.modelled, measured), oriented, seed)
        net = runs.channels - noise.table_effects * orientation[:, None]  # each run net of its seed's shared effect
        magnitudes = np.nanmean(runs.values[..., runs.modelled.absolute], axis=1)  # e.g. rank disparity's means
        means = np.concatenate([np.nanmean(net, axis=1), magnitudes], axis=2).reshape(
            len(features) * len(runs.epochs), -1
        )
        inputs = _with_epochs(features, runs.epochs)
        make_mean_model = functools.partial(FAMILIES[family], inputs.shape[1], seed)
        mean_model = ObjectiveModels(make_mean_model, inputs, means, [[k] for k in range(means.shape[1])])
        seconds_model = None
        if runs.seconds is not None and np.isfinite(runs.seconds).any():
            typical = np.nanmedian(runs.seconds, axis=1)
            known = np.isfinite(typical)
            forest = RandomForestRegressor(n_estimators=100, min_samples_leaf=3, random_state=seed)
            seconds_model = fast_predictor(forest.fit(features[known], np.log(typical[known])))
        return cls(encoding, runs, mean_model, noise, family, seconds_model)

    def channel_moments(self, configs: Sequence[Mapping[str, Any]]) -> tuple[np.ndarray, np.ndarray]:
        """[configuration, epoch, channel]: each channel's predicted mean and its own seed noise s.d. (the shared
        seed effect not included)."""
        self._remember(configs)
        return tuple(np.stack([self._cache[config_id(config)][i] for config in configs]) for i in (0, 1))  # type: ignore[return-value]

    def mean(self, configs: Sequence[Mapping[str, Any]]) -> np.ndarray:
        """[configuration, epoch, objective]: the expected value of a run's objectives (the mean over training
        seeds), exact for the derived objectives (:func:`~fairnas.benchmarks.surrogate_metrics.expectations`)."""
        return self._expected(configs)[0]

    def noise_sd(self, configs: Sequence[Mapping[str, Any]]) -> np.ndarray:
        """[configuration, epoch, objective]: the standard deviation of one training run's objectives around their
        mean, over seeds (the shared seed effect included)."""
        return self._expected(configs)[1]

    def _expected(self, configs: Sequence[Mapping[str, Any]]) -> tuple[np.ndarray, np.ndarray]:
        """The objectives' means and s.d. [configuration, epoch, objective], computed once per configuration."""
        ids = [config_id(config) for config in configs]
        new = {identifier: config for identifier, config in zip(ids, configs, strict=True)}
        new = {identifier: config for identifier, config in new.items() if identifier not in self._expectations}
        if new:
            mean, sd = self.channel_moments(list(new.values()))
            correlation = np.broadcast_to(self._epoch_correlation, (len(new), *self._epoch_correlation.shape))
            expected, spread = expectations(self.modelled, mean, sd * self._inflation, correlation)
            self._expectations |= {identifier: (expected[i], spread[i]) for i, identifier in enumerate(new)}
        shape = (len(configs), len(self.epochs), len(self.objectives))
        return (
            np.stack([self._expectations[identifier][0] for identifier in ids]).reshape(shape),
            np.stack([self._expectations[identifier][1] for identifier in ids]).reshape(shape),
        )

    def seconds(self, configs: Sequence[Mapping[str, Any]]) -> np.ndarray:
        """[configuration]: the predicted training seconds of a run of every epoch (NaN where the table had no
        ``run_seconds``)."""
        if self._seconds_model is None:
            return np.full(len(configs), np.nan)
        return np.exp(np.asarray(self._seconds_model.predict(self.encoding(configs))).reshape(len(configs)))

    def sample(self, config: Mapping[str, Any], seed: int, world: int = 0) -> np.ndarray:
        """[epoch, objective]: the run of ``config`` with training ``seed`` in ``world`` (a benchmark's search seed:
        searches of the same world see the same runs, and the runs of one seed there share its seed effect).
        Deterministic; the channels clipped to their bounds and the objectives derived from them."""
        identifier = config_id(config)
        if identifier not in self._cache:
            self._remember([config])
        mean, _, scale = self._cache[identifier]
        rng = np.random.default_rng([world, seed, int(identifier, 16)])  # the id is 12 hex digits
        deviation = self._factor @ rng.standard_normal(mean.size) + self._seed_effect(world, seed)
        return self.modelled.derive(mean + scale * deviation.reshape(self._shape))

    def interval(
        self, configs: Sequence[Mapping[str, Any]], probability: float = INTERVAL, draws: int = INTERVAL_DRAWS
    ) -> tuple[np.ndarray, np.ndarray]:
        """[configuration, epoch, objective]: the lower and upper ends of the central ``probability`` interval of
        a run's objectives over seeds (their shared effects included), from ``draws`` simulated runs per
        configuration (a fixed generator, so the same every call)."""
        self._remember(configs)
        mean, scale = (np.stack([self._cache[config_id(config)][i] for config in configs]) for i in (0, 2))
        rng = np.random.default_rng(0)
        own = rng.standard_normal((len(configs), draws, mean[0].size)) @ self._factor.T
        shared = rng.standard_normal((draws, self.noise.factor.shape[1])) @ self.noise.factor.T
        channels = mean[:, None] + scale[:, None] * (own + shared).reshape(len(configs), draws, *self._shape)
        low, high = np.quantile(self.modelled.derive(channels), [(1 - probability) / 2, (1 + probability) / 2], axis=1)
        return low, high

    def _seed_effect(self, world: int, seed: int) -> np.ndarray:
        """The standardised shared effect [epoch * channel] of ``seed`` in ``world``, the same for every
        configuration: a normal combination of the table's seed effects (:class:`SeedNoise`)."""
        key = (world, seed)
        if key not in self._shared:
            draw = np.random.default_rng([world, seed, SHARED_STREAM]).standard_normal(self.noise.factor.shape[1])
            self._shared[key] = self.noise.factor @ draw
        return self._shared[key]

    def _remember(self, configs: Sequence[Mapping[str, Any]]) -> None:
        """Predict and cache the channels' moments of the configurations not seen before."""
        new = list({config_id(config): config for config in configs if config_id(config) not in self._cache}.items())
        if not new:
            return
        chosen = [config for _, config in new]
        features = self.encoding(chosen)
        shape = (len(chosen), *self._shape)
        predicted = self._mean_model.predict(_with_epochs(features, self.epochs)).reshape(
            len(chosen), len(self.epochs), -1
        )
        mean = predicted[..., : shape[2]].copy()
        sd = self.noise.sd(_noise_inputs(features, self.modelled, mean)).reshape(shape)
        for column, objective in enumerate(self.modelled.absolute):  # the gap's size from its objective's own model
            (channel,) = self.modelled.derivations[objective].channels
            size = folded_location(predicted[..., shape[2] + column], sd[..., channel] * self._inflation[:, channel])
            mean[..., channel] = np.where(mean[..., channel] < 0, -size, size)
        scale = sd * _orientation(self.modelled, mean)  # a signed gap's deviations in the frame of its sign
        for index, (identifier, _) in enumerate(new):
            self._cache[identifier] = (mean[index], sd[index], scale[index])


def _orientation(modelled: Modelled, means: np.ndarray) -> np.ndarray:
    """[..., epoch, channel]: -1 where a channel whose absolute value is an objective (the signed rank gap) has a
    negative mean, else 1."""
    orientation = np.ones_like(means)
    for objective in modelled.absolute:
        (channel,) = modelled.derivations[objective].channels
        orientation[..., channel] = np.where(means[..., channel] < 0, -1.0, 1.0)
    return orientation


def _noise_inputs(features: np.ndarray, modelled: Modelled, means: np.ndarray) -> np.ndarray:
    """The noise model's inputs: the configuration's features and its error after every epoch (measured in the table,
    predicted elsewhere)."""
    return np.column_stack([features, modelled.error_level(means)])


@dataclass(frozen=True)
class SeedNoise:
    """A table's seed noise, in two parts (the module docstring). ``sd(inputs)`` [configuration, epoch * channel] is
    a configuration's own s.d.; ``correlation`` that of its own deviations, and ``shared`` the covariance of the
    shared seed effect, both in units of that s.d. and epoch-major; ``factor`` [epoch * channel, seeds] draws the
    shared effect (``factor @ g``, g standard normal: cov ``shared``); ``effects`` [seed, epoch * channel] are the
    table's seeds' estimated effects (standardised, summing to 0), and ``table_effects`` [configuration, seed,
    epoch, channel] the same in each configuration's units."""

    variance_model: ObjectiveModels
    correlation: np.ndarray
    shared: np.ndarray
    factor: np.ndarray
    effects: np.ndarray
    table_effects: np.ndarray

    @classmethod
    def fit(cls, inputs: np.ndarray, values: np.ndarray, seed: int = 0) -> SeedNoise:
        """From ``values`` [configuration, seed, epoch, channel]. A configuration's seeds' orthonormal contrasts
        estimate sigma^2 (1 + q): its own variance sigma^2 and q, the variance of its seeds' shared effects in units
        of sigma. A forest (100 trees, at least 5 configurations per leaf) on the squared contrasts predicts
        sigma^2 (1 + q); the seeds' effects are the fixed point of :func:`_seed_effects` of the deviations
        standardised by sigma = that s.d. / sqrt(1 + q), q their variance over each configuration's seeds
        (:data:`NOISE_ROUNDS` steps). Each run less its seed's effect (sigma times it) leaves the configuration's own
        noise, whose contrasts are central: the noise model is a forest on the log of their variance (chi-square
        corrected; on the log scale the noise of the best configurations is not averaged with that of the ones that
        barely learn, ten times larger), and their correlation, standardised by it and pooled, is a run's own. The
        seeds' effects are estimated once more in the units of the noise model (the raw forest smooths sigma^2 (1 +
        q) over configurations, which understates them), without refitting it: refitting on contrasts net of those
        effects lets a configuration that shares less of the seed's effect than its noise implies inflate its own
        noise, and that noise its effect, run after run."""
        n_configs, n_seeds, n_epochs, n_channels = values.shape
        by_channel = [range(k, n_epochs * n_channels, n_channels) for k in range(n_channels)]  # epoch-major
        flat = values.reshape(n_configs, n_seeds, -1)
        present = ~np.isnan(flat).any(axis=2)
        contrasts, owners = _seed_contrasts(values)
        if not len(contrasts):
            raise ValueError("the noise model needs configurations with two or more training seeds")
        rows = np.unique(owners)
        forest = functools.partial(RandomForestRegressor, n_estimators=100, min_samples_leaf=5, random_state=seed)
        raw = pd.DataFrame(contrasts**2).groupby(owners).mean().to_numpy()  # sigma^2 (1 + q), shift and all
        raw_sd = np.sqrt(np.maximum(ObjectiveModels(forest, inputs[rows], raw, by_channel).predict(inputs), 1e-12))
        deviations = np.where(present[:, :, None], flat - np.nanmean(flat, axis=1, keepdims=True), np.nan)
        effects = np.zeros((n_seeds, flat.shape[2]))
        for _ in range(NOISE_ROUNDS):  # the fixed point v = effects of deviations / (raw s.d. / sqrt(1 + q(v)))
            own_sd = raw_sd / np.sqrt(1 + _realised_share(effects, present))
            effects = _seed_effects(deviations / own_sd[:, None])
        own_sd = raw_sd / np.sqrt(1 + _realised_share(effects, present))
        table_effects = own_sd[:, None] * effects[None] * present[:, :, None]
        net, owners = _seed_contrasts((flat - np.nan_to_num(table_effects)).reshape(values.shape))
        variance_model = ObjectiveModels(forest, inputs[rows], _log_variances(net, owners), by_channel)
        sd = np.sqrt(_variance(variance_model, inputs))
        effects = _seed_effects(deviations / sd[:, None])  # in the units of the noise model itself
        table_effects = sd[:, None] * effects[None] * present[:, :, None]
        correlation = _nearest_correlation(np.corrcoef(net / sd[owners], rowvar=False))
        factor = effects.T / np.sqrt(max(n_seeds - 1, 1))
        return cls(variance_model, correlation, factor @ factor.T, factor, effects, table_effects.reshape(values.shape))

    def sd(self, inputs: np.ndarray) -> np.ndarray:
        return np.sqrt(_variance(self.variance_model, inputs))


def _variance(model: ObjectiveModels | None, inputs: np.ndarray) -> np.ndarray:
    return np.exp(model.predict(inputs)) if model is not None else np.ones(len(inputs))


def _log_variances(contrasts: np.ndarray, owners: np.ndarray) -> np.ndarray:
    """[configuration with contrasts, epoch * channel]: the log of each configuration's seed variance, unbiased on
    the log scale (the mean of its nu squared contrasts is sigma^2 chi^2_nu / nu, whose log has mean
    log sigma^2 + digamma(nu / 2) - log(nu / 2)); a variance of 0 (seeds that agree exactly) is floored at 1e-4 of
    the median one."""
    squares = pd.DataFrame(contrasts**2).groupby(owners)
    variances, counts = squares.mean().to_numpy(), squares.size().to_numpy()[:, None]
    floor = 1e-4 * np.median(np.where(variances > 0, variances, np.nan), axis=0)
    floor = np.where(np.isfinite(floor), floor, 1e-12)
    return np.log(np.maximum(variances, floor)) - digamma(counts / 2) + np.log(counts / 2)


def _realised_share(effects: np.ndarray, present: np.ndarray) -> np.ndarray:
    """[configuration, dimension]: the variance of the seed effects ``effects`` [seed, dimension] over each
    configuration's seeds (``present`` [configuration, seed]; 0 with fewer than two)."""
    shares = np.zeros((len(present), effects.shape[1]))
    for index, seeds in enumerate(present):
        if seeds.sum() >= 2:
            shares[index] = effects[seeds].var(axis=0, ddof=1)
    return shares


def _seed_effects(deviations: np.ndarray) -> np.ndarray:
    """[seed, dimension]: each seed's effect shared by all configurations, from ``deviations`` [configuration, seed,
    dimension] (each configuration's runs minus their mean, standardised; NaN where a seed is missing): the least
    squares fit of every deviation by its seed's effect minus the mean effect of that configuration's seeds,
    summing to 0 over the seeds."""
    n_seeds = deviations.shape[1]
    normal, right = np.zeros((n_seeds, n_seeds)), np.zeros((n_seeds, deviations.shape[2]))
    present = ~np.isnan(deviations).any(axis=2)
    for pattern in np.unique(present, axis=0):
        seeds = np.flatnonzero(pattern)
        if len(seeds) < 2:
            continue
        rows = (present == pattern).all(axis=1)
        centring = np.eye(len(seeds)) - 1.0 / len(seeds)
        normal[np.ix_(seeds, seeds)] += rows.sum() * centring
        right[seeds] += centring @ deviations[rows][:, seeds].sum(axis=0)
    return np.linalg.pinv(normal) @ right


class ObjectiveModels:
    """One model from ``make_model()`` per group of ``targets``' columns (``groups``: an objective's mean, or its
    variance after every epoch), fitted to the columns standardised so that the fit does not depend on an objective's
    units; predictions come back in the targets' units. Forests and gradient boosting, alone or in an ensemble,
    predict through their stacked forms (:func:`fast_predictor`), every group's trees walked as one
    (:class:`TreeBank`)."""

    def __init__(
        self,
        make_model: Callable[[], Regressor],
        inputs: np.ndarray,
        targets: np.ndarray,
        groups: Sequence[Sequence[int]],
    ):
        self.center, scale = targets.mean(axis=0), targets.std(axis=0)
        self.scale = np.where(scale > 0, scale, 1.0)
        standardised = (targets - self.center) / self.scale
        self._groups = [list(columns) for columns in groups]
        self._models, self._predictors = [], []
        for columns in self._groups:
            model = make_model().fit(
                inputs, standardised[:, columns[0]] if len(columns) == 1 else standardised[:, columns]
            )
            self._models.append(model)
            self._predictors.append(fast_predictor(model))
        self._bank = TreeBank.of(self._predictors, self._groups, len(self.center))

    def predict(self, inputs: np.ndarray) -> np.ndarray:
        """Through the :class:`TreeBank` for up to :data:`BANK_ROWS` rows, else through the models' own
        (compiled) prediction, which is faster for many rows: the same values."""
        if self._bank is not None and len(inputs) <= BANK_ROWS:
            return self._bank.predict(inputs) * self.scale + self.center
        predicted = np.empty((len(inputs), len(self.center)))
        models = self._models if self._bank is not None else self._predictors
        for columns, model in zip(self._groups, models, strict=True):
            predicted[:, columns] = np.asarray(model.predict(inputs)).reshape(len(inputs), -1)
        return predicted * self.scale + self.center


def fast_predictor(model: Regressor) -> Regressor:
    """``model`` with the same predictions at a few rows a call: a forest through :class:`StackedForest`, gradient
    boosting (squared error, numerical features) through :class:`StackedBoosting`, an unweighted ``VotingRegressor``
    as the mean of its members' fast predictors, anything else as it is."""
    if isinstance(model, RandomForestRegressor):
        return StackedForest(model)
    if isinstance(model, HistGradientBoostingRegressor) and StackedBoosting.handles(model):
        return StackedBoosting(model)
    if isinstance(model, VotingRegressor) and model.weights is None:
        return AveragedPredictors([fast_predictor(member) for member in model.estimators_])
    return model


class TreeBank:
    """Stacked tree models (:class:`StackedForest`, :class:`StackedBoosting` and their averages) walked as one: every
    tree of every model at once, each tree's leaf value weighted into its model's output columns. One walk predicts
    all the groups of an :class:`ObjectiveModels`, so a configuration costs a few dozen NumPy calls however many
    channels there are; the values are the models' own (the order of a sum aside)."""

    def __init__(self, parts: Sequence[tuple[StackedForest | StackedBoosting, float, list[int]]], width: int):
        """``parts``: (a stacked model, the weight of its prediction, the output columns it predicts)."""
        trees = sum(len(model.left) for model, _, _ in parts)
        nodes = max(model.left.shape[1] for model, _, _ in parts)
        outputs = max(model.value.shape[2] for model, _, _ in parts)
        self.left, self.right = np.full((trees, nodes), -1), np.zeros((trees, nodes), dtype=int)
        self.feature, self.threshold = np.zeros((trees, nodes), dtype=int), np.zeros((trees, nodes))
        self.value, self.narrow = np.zeros((trees, nodes, outputs)), np.zeros(trees, dtype=bool)
        self.weights, self.bias = np.zeros((trees, outputs, width)), np.zeros(width)
        self.depths, start = np.concatenate([model.depths for model, _, _ in parts]), 0
        for model, weight, columns in parts:
            rows = slice(start, start + len(model.left))
            width_ = model.left.shape[1]
            self.left[rows, :width_], self.right[rows, :width_] = model.left, model.right
            self.feature[rows, :width_], self.threshold[rows, :width_] = model.feature, model.threshold
            self.value[rows, :width_, : model.value.shape[2]] = model.value
            self.narrow[rows] = model.narrow
            for output, column in enumerate(columns):
                self.weights[rows, output, column] = weight * model.tree_weight
            self.bias[columns] += weight * model.bias
            start += len(model.left)
        self._trees = np.arange(trees)[:, None]
        self._walker: Walker | None = None
        self._width = 0

    @classmethod
    def of(cls, predictors: Sequence[Any], groups: Sequence[Sequence[int]], width: int) -> TreeBank | None:
        """The bank of ``predictors`` (one per group of output columns), or None if one is not stacked."""
        parts: list[tuple[StackedForest | StackedBoosting, float, list[int]]] = []
        for predictor, columns in zip(predictors, groups, strict=True):
            members = predictor.members if isinstance(predictor, AveragedPredictors) else [predictor]
            if not all(isinstance(member, (StackedForest, StackedBoosting)) for member in members):
                return None
            parts += [(member, 1.0 / len(members), list(columns)) for member in members]
        return cls(parts, width)

    def predict(self, inputs: np.ndarray) -> np.ndarray:
        inputs = np.asarray(inputs, dtype=float)
        width = inputs.shape[1]
        both = np.concatenate([inputs, inputs.astype(np.float32).astype(float)], axis=1)  # a forest reads float32
        if self._walker is None or self._width != width:  # a narrow tree's features index the float32 copy
            feature = self.feature + self.narrow[:, None] * width
            self._walker, self._width = Walker(self.left, self.right, feature, self.threshold, self.depths), width
        node = self._walker.leaves(both)
        return self.bias + np.einsum("tro,tok->rk", self.value[self._trees, node], self.weights)


class AveragedPredictors:
    """The mean of several fitted regressors' predictions, as an unweighted ``VotingRegressor`` predicts."""

    def __init__(self, members: Sequence[Regressor]):
        self.members = list(members)

    def predict(self, inputs: np.ndarray) -> np.ndarray:
        return np.mean([np.asarray(member.predict(inputs)) for member in self.members], axis=0)


class StackedForest:
    """A fitted random forest's prediction for a few rows at a time, all trees at once: the trees' arrays stacked and
    walked level by level in NumPy, the same values as ``forest.predict`` (inputs compared in float32, as scikit-learn
    does) without its per-tree calls, which cost milliseconds for one configuration. Its arrays ([tree, node], and
    ``value`` [tree, node, output]) are :class:`TreeBank`'s: the prediction is the mean over the trees."""

    narrow, bias = True, 0.0

    def __init__(self, forest: RandomForestRegressor):
        trees = [estimator.tree_ for estimator in forest.estimators_]
        size = max(tree.node_count for tree in trees)

        def stacked(attribute: str, fill: float) -> np.ndarray:
            array = np.full((len(trees), size, *getattr(trees[0], attribute).shape[1:]), fill)
            for index, tree in enumerate(trees):
                array[index, : tree.node_count] = getattr(tree, attribute)
            return array

        self.left, self.right = stacked("children_left", -1).astype(int), stacked("children_right", -1).astype(int)
        self.feature, self.threshold = stacked("feature", 0).astype(int), stacked("threshold", 0.0)
        self.value = stacked("value", 0.0)[..., 0]  # [tree, node, output]
        self.depths, self.tree_weight = np.array([tree.max_depth for tree in trees]), 1.0 / len(trees)

    def predict(self, inputs: np.ndarray) -> np.ndarray:
        predicted = _walk(self, np.asarray(inputs, dtype=np.float32).astype(float)).mean(axis=0)  # [row, output]
        return predicted[:, 0] if predicted.shape[1] == 1 else predicted


class StackedBoosting:
    """A fitted ``HistGradientBoostingRegressor``'s prediction for a few rows at a time, all its trees at once, as
    :class:`StackedForest` walks a forest: the baseline plus every tree's leaf value (the learning rate is in them),
    inputs compared in float64 with each split's threshold as scikit-learn does. Its own prediction calls one
    predictor per tree: 300 of them took 3 ms for one configuration."""

    narrow, tree_weight = False, 1.0

    def __init__(self, model: HistGradientBoostingRegressor):
        nodes = [predictor.nodes for (predictor,) in model._predictors]
        size = max(len(tree) for tree in nodes)

        def stacked(name: str, fill: float) -> np.ndarray:
            array = np.full((len(nodes), size), fill, dtype=float)
            for index, tree in enumerate(nodes):
                array[index, : len(tree)] = tree[name]
            return array

        leaf = stacked("is_leaf", 1).astype(bool)
        self.left = np.where(leaf, -1, stacked("left", 0)).astype(int)
        self.right = stacked("right", 0).astype(int)
        self.feature, self.threshold = stacked("feature_idx", 0).astype(int), stacked("num_threshold", 0.0)
        self.value, self.bias = stacked("value", 0.0)[..., None], float(np.ravel(model._baseline_prediction)[0])
        self.depths = np.array([tree["depth"].max() for tree in nodes])

    @staticmethod
    def handles(model: HistGradientBoostingRegressor) -> bool:
        """Whether the stacked walk predicts what ``model`` does: one tree an iteration, the identity link, no
        categorical feature."""
        return (
            model.n_trees_per_iteration_ == 1
            and model.loss == "squared_error"
            and (model.is_categorical_ is None or not np.any(model.is_categorical_))
        )

    def predict(self, inputs: np.ndarray) -> np.ndarray:
        inputs = np.asarray(inputs, dtype=float)
        if np.isnan(inputs).any():
            raise ValueError("StackedBoosting does not follow the missing-value branches; the inputs hold NaN")
        return self.bias + _walk(self, inputs)[..., 0].sum(axis=0)


def _walk(model: StackedForest | StackedBoosting, inputs: np.ndarray) -> np.ndarray:
    """[tree, row, output]: the leaf value each tree of a stacked model reaches for each row of ``inputs``."""
    if not hasattr(model, "_walker"):
        model._walker = Walker(model.left, model.right, model.feature, model.threshold, model.depths)  # type: ignore[union-attr]
    return model.value[np.arange(len(model.left))[:, None], model._walker.leaves(inputs)]  # type: ignore[union-attr]


class Walker:
    """The leaf of each tree ([tree, node] arrays, ``left`` -1 at a leaf) that each row of some inputs reaches (left
    where the row's feature is at most the threshold), walked level by level over flat arrays, at each level only
    the trees deeper than it (the deepest first)."""

    def __init__(self, left, right, feature, threshold, depths: np.ndarray):
        self._order = np.argsort(-depths, kind="stable")
        nodes = left.shape[1]
        self._base = (self._order * nodes)[:, None]
        self._left, self._right, self._feature, self._threshold = (
            np.ascontiguousarray(array).ravel() for array in (left, right, feature, threshold)
        )
        self._deeper = [int((depths > level).sum()) for level in range(int(depths.max(initial=0)))]

    def leaves(self, inputs: np.ndarray) -> np.ndarray:
        """[tree, row]: each tree's leaf for each row of ``inputs`` [row, feature]."""
        rows = np.arange(len(inputs))[None, :] * inputs.shape[1]
        flat_inputs = np.ravel(inputs)
        node = np.zeros((len(self._order), len(inputs)), dtype=int)
        for count in self._deeper:
            at = self._base[:count] + node[:count]
            child = self._left[at]
            goes_left = flat_inputs[rows + self._feature[at]] <= self._threshold[at]
            node[:count] = np.where(child < 0, node[:count], np.where(goes_left, child, self._right[at]))
        leaves = np.empty_like(node)
        leaves[self._order] = node
        return leaves


def _with_epochs(features: np.ndarray, epochs: Sequence[int]) -> np.ndarray:
    """Every configuration's features once per epoch (configuration-major), the epoch appended as a column."""
    repeated = np.repeat(features, len(epochs), axis=0)
    return np.column_stack([repeated, np.tile(np.asarray(epochs, dtype=float), len(features))])


def _seed_contrasts(values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The seeds' deviations as independent draws of the noise: per configuration with S >= 2 seeds, S - 1 orthonormal
    contrasts of its seeds (orthogonal to their mean, as Helmert's are), each a vector over (epoch, objective) with the
    noise's covariance. Returns the contrasts [n, epoch * objective] and the configuration each belongs to."""
    contrasts, owners = [], []
    for index, runs in enumerate(values):
        runs = runs[~np.isnan(runs).any(axis=(1, 2))].reshape(-1, values.shape[2] * values.shape[3])
        if len(runs) < 2:
            continue
        basis = np.linalg.svd(np.eye(len(runs)) - 1.0 / len(runs))[0][:, : len(runs) - 1]  # orthonormal, sums to 0
        contrasts.append(basis.T @ runs)
        owners += [index] * (len(runs) - 1)
    if not contrasts:
        return np.empty((0, values.shape[2] * values.shape[3])), np.empty(0, dtype=int)
    return np.vstack(contrasts), np.asarray(owners)


def _nearest_correlation(matrix: np.ndarray) -> np.ndarray:
    """A positive-definite correlation matrix near ``matrix`` (eigenvalues floored, unit diagonal restored)."""
    matrix = np.nan_to_num((matrix + matrix.T) / 2.0)
    np.fill_diagonal(matrix, 1.0)
    values, vectors = np.linalg.eigh(matrix)
    matrix = (vectors * np.maximum(values, 1e-6)) @ vectors.T
    scale = np.sqrt(np.diag(matrix))
    return matrix / np.outer(scale, scale)


def cross_validate(
    space: SearchSpace,
    runs: RunsTable,
    family: str = "forest",
    *,
    folds: int = 5,
    group_by: Sequence[str] = (),
    reference_point: Sequence[float] | None = None,
    seed: int = 0,
    train_fraction: float = 1.0,
    subset_seed: int = 0,
    worlds: int = 5,
) -> dict[str, float]:
    """The surrogate judged on configurations it was not fitted on: ``folds``-fold cross-validation over groups of
    configurations (each configuration its own group, or those sharing the values of ``group_by``, e.g. the
    operations), predictions at the last epoch. ``train_fraction`` < 1 fits each fold on that share of its
    training configurations (drawn with ``subset_seed``), the points of a learning curve. Per objective:

    - ``tau_<objective>``: Kendall's tau of the predicted means against the held-out configurations' measured means
      (S-seed means); ``ceiling_<objective>``: the tau the true means themselves would reach against those S-seed
      means (:func:`mean_ceiling` of ``seed_pair_tau_<objective>``, the tau between two single seeds of the
      :func:`common_seeds`, at the median number of seeds), so
      ``tau_ratio_<objective>``, the first over the second, is 1 for a perfect model; ``one_seed_ratio_<objective>``,
      prediction against one held-out seed over seed against seed, a second, conservative reading;
    - the same three (``top_`` prefix) over the :data:`TOP_SHARE` of configurations lowest in measured error, the
      region searches end in, with its measured seed s.d. (``top_seed_sd_``, pooled; ``top_net_seed_sd_``, net of
      the shift its seeds share, over the :func:`common_seeds`) and the predicted one (``top_predicted_sd_``);
    - like for like, the held-out configurations simulated with the common seeds in each of ``worlds`` worlds, by
      the surrogate of their fold: the same two s.d. over the quarter lowest in *simulated* mean error
      (``sim_top_seed_sd_``, ``sim_top_net_seed_sd_``, means over the worlds), and the first two seeds' shift
      (:func:`seed_statistics`: ``seed_shift_`` measured, ``sim_seed_shift_rms_`` its root mean square over the
      worlds);
    - ``coverage_<objective>``, the calibration of the predicted noise: the share of the held-out seed values inside
      its central :data:`INTERVAL` interval around their configuration's measured mean (an S-seed mean: the
      interval scaled by sqrt((S - 1) / S), the spread of a seed around it; a normal interval of the predicted s.d.);
      ``run_coverage_<objective>``: the share inside the central interval of the runs :meth:`Surrogate.sample`
      draws (:meth:`Surrogate.interval`; the mean model's error counts against it too), also apart over the top
      region (``_top``), the configurations that learned (measured error below :data:`CHANCE_ERROR`,
      ``_learning``) and those that did not (``_chance``).

    ``front_share``: the hypervolume of the configurations the predicted means put on the front, judged at their
    measured means, as a share of the measured front's (``reference_point`` default: 1.1 x the worst measured
    mean per objective)."""
    groups = _groups(runs.configs, group_by)
    n_groups = len(set(groups))
    if n_groups < folds:
        raise ValueError(f"{folds} folds need at least {folds} groups of configurations; the table has {n_groups}")
    if not 0 < train_fraction <= 1:
        raise ValueError(f"train_fraction must lie in (0, 1], got {train_fraction}")
    predicted = np.empty((len(runs.configs), len(runs.objectives)))
    sd, low, high = np.empty_like(predicted), np.empty_like(predicted), np.empty_like(predicted)
    common = common_seeds(runs.values[:, :, -1, 0])
    simulated = np.empty((worlds, len(runs.configs), len(common), len(runs.objectives)))
    subsets = np.random.default_rng(subset_seed)
    for train, held_out in GroupKFold(n_splits=folds).split(runs.configs, groups=groups):
        train = np.sort(subsets.permutation(train)[: max(1, round(train_fraction * len(train)))])
        surrogate = Surrogate.fit(space, runs.subset(train), family, seed)
        held_configs = [runs.configs[i] for i in held_out]
        predicted[held_out] = surrogate.mean(held_configs)[:, -1]
        sd[held_out] = surrogate.noise_sd(held_configs)[:, -1]
        low[held_out], high[held_out] = (end[:, -1] for end in surrogate.interval(held_configs))
        for world in range(worlds):
            for row, config in zip(held_out, held_configs, strict=True):
                simulated[world, row] = [surrogate.sample(config, runs.seeds[s], world)[-1] for s in common]
    measured = runs.means()[:, -1]
    last = runs.values[:, :, -1]  # [configuration, seed, objective]
    result: dict[str, float] = {"configurations": float(len(runs.configs)), "seeds": float(len(runs.seeds))}
    half_width = stats.norm.ppf(0.5 + INTERVAL / 2) * sd
    n_seeds = (~np.isnan(last[:, :, 0])).sum(axis=1)
    several = n_seeds >= 2
    top = measured[:, 0] <= np.quantile(measured[:, 0], TOP_SHARE)
    regions = {"top": top, "learning": measured[:, 0] < CHANCE_ERROR, "chance": measured[:, 0] >= CHANCE_ERROR}
    for k, name in enumerate(runs.objectives):
        seeds = last[:, :, k]
        for prefix, rows in (("", slice(None)), ("top_", top)):
            result |= _ranking(prefix, name, predicted[rows, k], measured[rows, k], seeds[rows], n_seeds[rows])
        around_mean = np.abs(seeds - measured[:, k, None]) <= (half_width[:, k] * np.sqrt(1 - 1 / n_seeds))[:, None]
        around_prediction = (seeds >= low[:, k, None]) & (seeds <= high[:, k, None])
        result[f"coverage_{name}"] = float(around_mean[several][~np.isnan(seeds[several])].mean())
        result[f"run_coverage_{name}"] = float(around_prediction[~np.isnan(seeds)].mean())
        for region, rows in regions.items():
            inside = around_prediction[rows][~np.isnan(seeds[rows])]
            result[f"run_coverage_{name}_{region}"] = float(inside.mean()) if inside.size else np.nan
        contrasts = np.nanstd(seeds[top & several], axis=1, ddof=1)
        result[f"top_seed_sd_{name}"] = float(np.sqrt(np.mean(contrasts**2)))
        result[f"top_predicted_sd_{name}"] = float(np.sqrt(np.mean(sd[top & several, k] ** 2)))
        if len(common) >= 2:
            error = runs.objectives.index("error") if "error" in runs.objectives else 0
            real = seed_statistics(seeds[:, common], last[:, common, error])
            drawn = pd.DataFrame([seed_statistics(table[:, :, k], table[:, :, error]) for table in simulated])
            result[f"top_net_seed_sd_{name}"] = real["top_net_sd"]
            result[f"sim_top_seed_sd_{name}"] = float(drawn["top_sd"].mean())
            result[f"sim_top_net_seed_sd_{name}"] = float(drawn["top_net_sd"].mean())
            result[f"seed_shift_{name}"] = real["shift"]
            result[f"sim_seed_shift_rms_{name}"] = float(np.sqrt((drawn["shift"] ** 2).mean()))
    reference = np.asarray(reference_point if reference_point is not None else 1.1 * measured.max(axis=0), float)
    chosen = measured[non_dominated_mask(predicted)]
    result["front_share"] = hypervolume(chosen, reference) / hypervolume(measured, reference)
    return result


def seed_statistics(values: np.ndarray, error: np.ndarray) -> dict[str, float]:
    """The seed figures of one objective's values [configuration, seed] (at one epoch, every seed present), the
    configurations ranked by ``error`` [configuration, seed]:

    - ``top_sd`` and ``top_net_sd``: the pooled seed s.d. over the :data:`TOP_SHARE` of configurations lowest in mean
      error, as it is and net of each seed's mean deviation over them (the shift every configuration of the region
      shares);
    - ``shift``: the mean over all configurations of seed 0's value minus seed 1's (the first two seed columns),
      ``shift_t`` its t statistic, ``shift_share`` the share of configurations whose difference has the sign of the
      mean one."""
    top = error.mean(axis=1) <= np.quantile(error.mean(axis=1), TOP_SHARE)
    deviations = values[top] - values[top].mean(axis=1, keepdims=True)
    n, seeds = deviations.shape
    net = deviations - deviations.mean(axis=0)
    difference = values[:, 0] - values[:, 1]
    shift, se = difference.mean(), difference.std(ddof=1) / np.sqrt(len(difference))
    return {
        "top_sd": float(np.sqrt((deviations**2).sum() / (n * (seeds - 1)))),
        "top_net_sd": float(np.sqrt((net**2).sum() / ((n - 1) * (seeds - 1)))),
        "shift": float(shift),
        "shift_t": float(shift / se) if se > 0 else np.nan,
        "shift_share": float(np.mean(np.sign(difference) == np.sign(shift))),
    }


def _ranking(
    prefix: str, name: str, predicted: np.ndarray, measured: np.ndarray, seeds: np.ndarray, n_seeds: np.ndarray
) -> dict[str, float]:
    """``cross_validate``'s ranking figures of one objective over some configurations (see there)."""
    tau = float(stats.kendalltau(predicted, measured).statistic)
    seed_pair = seed_pair_tau(seeds)
    ceiling = mean_ceiling(seed_pair, float(np.median(n_seeds)))
    one_seed = [stats.kendalltau(predicted, seeds[:, seed]).statistic for seed in common_seeds(seeds)]
    return {
        f"{prefix}tau_{name}": tau,
        f"{prefix}ceiling_{name}": ceiling,
        f"{prefix}tau_ratio_{name}": tau / ceiling if ceiling > 0 else np.nan,
        f"{prefix}seed_pair_tau_{name}": seed_pair,
        f"{prefix}one_seed_ratio_{name}": float(np.mean(one_seed)) / seed_pair if seed_pair > 0 else np.nan,
    }


def mean_ceiling(seed_pair_tau: float, seeds: float) -> float:
    """The Kendall tau between the true means and an S-seed mean (S = ``seeds``), given the tau between two single
    seeds: for normal values Kendall's tau is (2 / pi) arcsin(r) (Greiner's relation), so r1 = sin(pi tau / 2) is one
    seed's reliability; an S-seed mean's is S r1 / (1 + (S - 1) r1) (Spearman-Brown) and its correlation with the
    truth the square root of that. What a perfect model would score against held-out S-seed means."""
    r1 = np.sin(np.pi * seed_pair_tau / 2)
    if not np.isfinite(r1) or r1 <= 0:
        return float("nan")
    reliability = seeds * r1 / (1 + (seeds - 1) * r1)
    return float(2 / np.pi * np.arcsin(np.sqrt(reliability)))


def _groups(configs: Sequence[Mapping[str, Any]], group_by: Sequence[str]) -> np.ndarray:
    keys = [
        json.dumps([config.get(name) for name in group_by]) if group_by else config_id(config) for config in configs
    ]
    return pd.factorize(pd.Series(keys))[0]


def seed_pair_tau(values: np.ndarray) -> float:
    """Mean Kendall tau between the values of two seeds ([configuration, seed]), over the seeds every configuration
    has (:func:`common_seeds`)."""
    common = common_seeds(values)
    taus = [
        stats.kendalltau(values[:, a], values[:, b]).statistic
        for position, a in enumerate(common)
        for b in common[position + 1 :]
    ]
    return float(np.mean(taus)) if taus and len(values) > 2 else np.nan


def common_seeds(values: np.ndarray) -> list[int]:
    """The seed columns of ``values`` [configuration, seed] that every configuration has. A table whose top region
    has more seeds (``bench/tabular.py build --top-seeds``) has its extra seeds for a subset only; comparing them
    over that range-restricted subset would bias the figures of the whole set."""
    return [seed for seed in range(values.shape[1]) if not np.isnan(values[:, seed]).any()]
