"""A surrogate benchmark, built the way NAS-Bench-301 and HW-GPT-Bench are: models fitted to a table of trained runs
(:mod:`fairnas.benchmarks.tabular`, e.g. a space-filling design over the paper's whole space) that answer for any
configuration of the table's space, trained or not.

For each objective, a *mean model* predicts the mean over training seeds after every epoch (the fidelities) from the
configuration; a *noise model* predicts the seed-to-seed variance of every (epoch, objective) value, and one
correlation matrix, pooled over the table's configurations, says how a seed's deviations co-vary across epochs and
objectives (a run that is unlucky after epoch 2 tends to stay so, and its error and rank disparity move together as
the table's runs did). :meth:`Surrogate.sample` draws one training run of a configuration: the predicted means plus
correlated Gaussian noise, deterministic given (world, configuration, training seed), so asking the same trial again
gives the same values (:class:`fairnas.benchmarks.surrogate_target.SurrogateTarget` searches it).

Fitting takes seconds and is deterministic (fixed ``random_state``), so the committed table is the benchmark and the
models are refitted on load. :func:`cross_validate` measures the surrogate on configurations it was not fitted on
(docs/search_benchmark.md, "The surrogate benchmark").
"""

from __future__ import annotations

import functools
import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd
from ConfigSpace import ConfigurationSpace
from scipy import stats
from sklearn.ensemble import HistGradientBoostingRegressor, RandomForestRegressor, VotingRegressor
from sklearn.gaussian_process import GaussianProcessRegressor
from sklearn.gaussian_process.kernels import ConstantKernel, Matern, WhiteKernel
from sklearn.model_selection import GroupKFold

from fairnas.search import SearchSpace, config_id
from fairnas.search.encoding import SpaceEncoding
from fairnas.search.hypervolume import hypervolume
from fairnas.search.pareto import non_dominated_mask

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
their average and a GP with one length scale per feature), one per objective (:class:`ObjectiveModels`: a model
shared by objectives that depend on different hyperparameters ranks both worse). Forests of 100 trees predicting
through :class:`StackedForest` keep a simulated run at about a millisecond."""

BOUNDS = {"error": (0.0, 1.0)}
"""The range an objective's drawn value is clipped to; any other objective is clipped at 0 from below."""

INTERVAL = 0.9
"""The central probability of the noise interval whose coverage :func:`cross_validate` reports."""
TOP_SHARE = 0.25
"""The share of configurations, lowest in measured error, :func:`cross_validate` also ranks apart (the top region)."""
CHANCE_ERROR = 0.9
"""Measured error at or above which :func:`cross_validate` counts a configuration as not having learned (chance is
about 1 with hundreds of identities)."""


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
    [configuration, seed, epoch, objective] (NaN where a seed is missing) and the seeds and epochs they cover."""

    configs: list[dict[str, Any]]
    values: np.ndarray
    seeds: list[int]
    epochs: list[int]
    objectives: tuple[str, ...]

    @classmethod
    def of(cls, table: pd.DataFrame, objectives: Sequence[str], split: str = "val") -> RunsTable:
        columns = [f"{split}/{name}" for name in objectives]
        missing = sorted(set(columns) - set(table.columns))
        if missing:
            raise ValueError(f"the table has no columns {missing}; it has {sorted(table.columns)}")
        cube = table.set_index(["config_id", "seed", "epoch"])[columns].sort_index()
        ids, seeds, epochs = (list(level) for level in cube.index.levels)
        full = pd.MultiIndex.from_product([ids, seeds, epochs])
        values = cube.reindex(full).to_numpy(dtype=float).reshape(len(ids), len(seeds), len(epochs), len(columns))
        configs = table.drop_duplicates("config_id").set_index("config_id").loc[ids, "config"]
        return cls([json.loads(text) for text in configs], values, seeds, epochs, tuple(objectives))

    def subset(self, rows: np.ndarray) -> RunsTable:
        return RunsTable([self.configs[i] for i in rows], self.values[rows], self.seeds, self.epochs, self.objectives)

    def ids(self) -> set[str]:
        """The ``config_id`` of every configuration."""
        return {config_id(config) for config in self.configs}

    def means(self) -> np.ndarray:
        """[configuration, epoch, objective]: the mean over the seeds each configuration has."""
        return np.nanmean(self.values, axis=1)


class Surrogate:
    """Predicted means and seed noise of every configuration of ``space`` after each epoch (the module docstring).

    :meth:`fit` fits it to a table; :meth:`mean` and :meth:`noise_sd` are [configuration, epoch, objective] arrays;
    :meth:`sample` draws one training run."""

    def __init__(
        self,
        encoding: Encoding,
        runs: RunsTable,
        mean_model: ObjectiveModels,
        variance_model: ObjectiveModels,
        correlation: np.ndarray,
        family: str,
    ):
        self.encoding, self.objectives, self.epochs = encoding, runs.objectives, runs.epochs
        self.family = family
        self._bounds = np.array([BOUNDS.get(name, (0.0, np.inf)) for name in self.objectives]).T  # lower, upper
        self._mean_model, self._variance_model = mean_model, variance_model
        self.correlation = correlation
        self._factor = np.linalg.cholesky(correlation)
        self._cache: dict[str, tuple[np.ndarray, np.ndarray]] = {}

    @classmethod
    def fit(cls, space: SearchSpace, runs: RunsTable, family: str = "forest", seed: int = 0) -> Surrogate:
        """Fit the mean model (``family``, on the per-epoch means over seeds) and the noise model
        (a random forest on every (epoch, objective) variance, from the seeds' orthonormal contrasts; the
        correlation of the contrasts, standardised by the fitted variances, pooled over the configurations). Needs
        at least two seeds of some configurations."""
        if family not in FAMILIES:
            raise ValueError(f"unknown surrogate family '{family}'; allowed: {sorted(FAMILIES)}")
        encoding = Encoding(space.configspace)
        features = encoding(runs.configs)
        n_epochs, n_objectives = len(runs.epochs), len(runs.objectives)
        inputs, means = _with_epochs(features, runs.epochs), runs.means().reshape(-1, n_objectives)
        make_mean_model = functools.partial(FAMILIES[family], inputs.shape[1], seed)
        mean_model = ObjectiveModels(make_mean_model, inputs, means, [[k] for k in range(n_objectives)])
        contrasts, owners = _seed_contrasts(runs.values)
        if not len(contrasts):
            raise ValueError("the noise model needs configurations with two or more training seeds")
        variances = pd.DataFrame(contrasts**2).groupby(owners).mean()  # unbiased per configuration
        by_objective = [range(k, n_epochs * n_objectives, n_objectives) for k in range(n_objectives)]  # epoch-major
        variance_model = ObjectiveModels(
            lambda: RandomForestRegressor(n_estimators=100, min_samples_leaf=5, random_state=seed),
            features[variances.index],
            variances.to_numpy(),
            by_objective,
        )
        fitted = np.maximum(variance_model.predict(features[owners]).reshape(len(owners), -1), 1e-12)
        correlation = _nearest_correlation(np.corrcoef(contrasts / np.sqrt(fitted), rowvar=False))
        assert correlation.shape == (n_epochs * n_objectives,) * 2
        return cls(encoding, runs, mean_model, variance_model, correlation, family)

    def mean(self, configs: Sequence[Mapping[str, Any]]) -> np.ndarray:
        """[configuration, epoch, objective]: the predicted mean over training seeds."""
        inputs = _with_epochs(self.encoding(configs), self.epochs)
        return self._mean_model.predict(inputs).reshape(len(configs), len(self.epochs), len(self.objectives))

    def noise_sd(self, configs: Sequence[Mapping[str, Any]]) -> np.ndarray:
        """[configuration, epoch, objective]: the predicted standard deviation of one training run around the mean."""
        variance = self._variance_model.predict(self.encoding(configs)).reshape(len(configs), -1)
        return np.sqrt(np.maximum(variance, 0.0)).reshape(len(configs), len(self.epochs), len(self.objectives))

    def sample(self, config: Mapping[str, Any], seed: int, world: int = 0) -> np.ndarray:
        """[epoch, objective]: the run of ``config`` with training ``seed`` in ``world`` (a benchmark's search seed:
        searches of the same world see the same runs). Deterministic; clipped to :data:`BOUNDS`."""
        identifier = config_id(config)
        if identifier not in self._cache:
            self._cache[identifier] = (self.mean([config])[0], self.noise_sd([config])[0])
        mean, sd = self._cache[identifier]
        rng = np.random.default_rng([world, seed, int(identifier, 16)])  # the id is 12 hex digits
        deviation = (self._factor @ rng.standard_normal(mean.size)).reshape(mean.shape)
        return np.clip(mean + sd * deviation, *self._bounds)


class ObjectiveModels:
    """One model from ``make_model()`` per group of ``targets``' columns (``groups``: an objective's mean, or its
    variance after every epoch), fitted to the columns standardised so that the fit does not depend on an objective's
    units; predictions come back in the targets' units. Forests, alone or in an ensemble, predict through
    :class:`StackedForest` (:func:`fast_predictor`)."""

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
        self._predictors = []
        for columns in self._groups:
            model = make_model().fit(
                inputs, standardised[:, columns[0]] if len(columns) == 1 else standardised[:, columns]
            )
            self._predictors.append(fast_predictor(model))

    def predict(self, inputs: np.ndarray) -> np.ndarray:
        predicted = np.empty((len(inputs), len(self.center)))
        for columns, predictor in zip(self._groups, self._predictors, strict=True):
            predicted[:, columns] = np.asarray(predictor.predict(inputs)).reshape(len(inputs), -1)
        return predicted * self.scale + self.center


def fast_predictor(model: Regressor) -> Regressor:
    """``model`` with the same predictions at a few rows a call: a forest through :class:`StackedForest`, an unweighted
    ``VotingRegressor`` as the mean of its members' fast predictors, anything else as it is."""
    if isinstance(model, RandomForestRegressor):
        return StackedForest(model)
    if isinstance(model, VotingRegressor) and model.weights is None:
        return AveragedPredictors([fast_predictor(member) for member in model.estimators_])
    return model


class AveragedPredictors:
    """The mean of several fitted regressors' predictions, as an unweighted ``VotingRegressor`` predicts."""

    def __init__(self, members: Sequence[Regressor]):
        self._members = list(members)

    def predict(self, inputs: np.ndarray) -> np.ndarray:
        return np.mean([np.asarray(member.predict(inputs)) for member in self._members], axis=0)


class StackedForest:
    """A fitted random forest's prediction for a few rows at a time, all trees at once: the trees' arrays stacked and
    walked level by level in NumPy, the same values as ``forest.predict`` (inputs compared in float32, as scikit-learn
    does) without its per-tree calls, which cost milliseconds for one configuration."""

    def __init__(self, forest: RandomForestRegressor):
        trees = [estimator.tree_ for estimator in forest.estimators_]
        size = max(tree.node_count for tree in trees)

        def stacked(attribute: str, fill: float) -> np.ndarray:
            array = np.full((len(trees), size, *getattr(trees[0], attribute).shape[1:]), fill)
            for index, tree in enumerate(trees):
                array[index, : tree.node_count] = getattr(tree, attribute)
            return array

        self._left, self._right = stacked("children_left", -1).astype(int), stacked("children_right", -1).astype(int)
        self._feature, self._threshold = stacked("feature", 0).astype(int), stacked("threshold", 0.0)
        self._value = stacked("value", 0.0)[..., 0]  # [tree, node, output]
        self._depth = max(tree.max_depth for tree in trees)

    def predict(self, inputs: np.ndarray) -> np.ndarray:
        inputs = np.asarray(inputs, dtype=np.float32).astype(float)
        trees, rows = np.arange(len(self._left))[:, None], np.arange(len(inputs))[None, :]
        node = np.zeros((len(self._left), len(inputs)), dtype=int)
        for _ in range(self._depth):
            left = self._left[trees, node]
            goes_left = inputs[rows, self._feature[trees, node]] <= self._threshold[trees, node]
            node = np.where(left < 0, node, np.where(goes_left, left, self._right[trees, node]))
        predicted = self._value[trees, node].mean(axis=0)  # [row, output]
        return predicted[:, 0] if predicted.shape[1] == 1 else predicted


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
      region searches end in, with its measured seed s.d. (``top_seed_sd_``, pooled) and the predicted one
      (``top_predicted_sd_``);
    - ``coverage_<objective>``, the calibration of the predicted noise: the share of the held-out seed values inside
      its central :data:`INTERVAL` interval around their configuration's measured mean (an S-seed mean: the
      interval scaled by sqrt((S - 1) / S), the spread of a seed around it); ``run_coverage_<objective>``: the share
      inside the interval of the distribution :meth:`Surrogate.sample` draws from, around the predicted mean (the
      mean model's error counts against it too), also apart over the top region (``_top``), the configurations
      that learned (measured error below :data:`CHANCE_ERROR`, ``_learning``) and those that did not (``_chance``).

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
    sd = np.empty_like(predicted)
    subsets = np.random.default_rng(subset_seed)
    for train, held_out in GroupKFold(n_splits=folds).split(runs.configs, groups=groups):
        train = np.sort(subsets.permutation(train)[: max(1, round(train_fraction * len(train)))])
        surrogate = Surrogate.fit(space, runs.subset(train), family, seed)
        held_configs = [runs.configs[i] for i in held_out]
        predicted[held_out] = surrogate.mean(held_configs)[:, -1]
        sd[held_out] = surrogate.noise_sd(held_configs)[:, -1]
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
        around_prediction = np.abs(seeds - predicted[:, k, None]) <= half_width[:, k, None]
        result[f"coverage_{name}"] = float(around_mean[several][~np.isnan(seeds[several])].mean())
        result[f"run_coverage_{name}"] = float(around_prediction[~np.isnan(seeds)].mean())
        for region, rows in regions.items():
            inside = around_prediction[rows][~np.isnan(seeds[rows])]
            result[f"run_coverage_{name}_{region}"] = float(inside.mean()) if inside.size else np.nan
        contrasts = np.nanstd(seeds[top & several], axis=1, ddof=1)
        result[f"top_seed_sd_{name}"] = float(np.sqrt(np.mean(contrasts**2)))
        result[f"top_predicted_sd_{name}"] = float(np.sqrt(np.mean(sd[top & several, k] ** 2)))
    reference = np.asarray(reference_point if reference_point is not None else 1.1 * measured.max(axis=0), float)
    chosen = measured[non_dominated_mask(predicted)]
    result["front_share"] = hypervolume(chosen, reference) / hypervolume(measured, reference)
    return result


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
