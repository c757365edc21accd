"""Choosing a search's answer by a model's estimate of its trials instead of their observed values.

A search returns the front of the values it observed, one noisy run per configuration, so among good configurations
it returns the lucky ones (the winner's curse; docs/search_benchmark.md, "Why the strategies do (not) pull ahead").
An estimator here re-estimates every configuration a run trained at the full budget from all of the run's
full-budget trials, and the answer is the front of those estimates (judged at the truth by
:func:`~fairnas.benchmarks.answer_quality.quality`, as any answer):

- ``observed``: the observed values (:func:`~fairnas.benchmarks.answer_quality.answer`, what searches return today);
- ``forest_shrunk``: half the observed value and half a random forest's out-of-bag prediction from the other
  configurations (a fixed shrinkage towards the model);
- ``gp``: a GP's posterior mean at the trained configurations, with a fitted white-noise term (Matern 5/2 on the
  standardised one-hot features), so the data set how far it smooths.

Nothing here runs a search: ``bench/answer_selection.py`` applies the estimators to finished runs.
"""

from __future__ import annotations

import json
from collections.abc import Sequence

import numpy as np
import pandas as pd
from ConfigSpace import ConfigurationSpace
from sklearn.ensemble import RandomForestRegressor
from sklearn.gaussian_process import GaussianProcessRegressor
from sklearn.gaussian_process.kernels import ConstantKernel, Matern, WhiteKernel

from fairnas.benchmarks.answer_quality import answer, evaluated
from fairnas.benchmarks.surrogate import Encoding
from fairnas.search.pareto import non_dominated_mask

SHRINKAGE = 0.5
"""The weight of the observed value in ``forest_shrunk`` (the rest is the forest's)."""


def estimated_answer(
    trials: pd.DataFrame,
    objectives: Sequence[str],
    max_budget: float,
    configspace: ConfigurationSpace,
    estimator: str,
    seed: int = 0,
) -> pd.DataFrame:
    """The front of a run's full-budget configurations by ``estimator`` (one of :data:`ESTIMATORS`), indexed by
    ``config_id``, with the estimates as the objectives' values, sorted by the first objective (as
    :func:`~fairnas.benchmarks.answer_quality.answer` returns an answer)."""
    if estimator not in ESTIMATORS:
        raise ValueError(f"unknown answer estimator '{estimator}'; allowed: {list(ESTIMATORS)}")
    if estimator == "observed":
        return answer(trials, objectives, max_budget)
    trained = evaluated(trials, objectives, max_budget)
    if len(trained) < 3:  # too few to model: the observed front
        return answer(trials, objectives, max_budget)
    features = Encoding(configspace)([json.loads(config) for config in trained["config"]])
    estimates = trained.copy()
    for name in objectives:
        observed = trained[name].to_numpy(dtype=float)
        estimates[name] = SMOOTHERS[estimator](features, observed, seed)
    front = estimates[non_dominated_mask(estimates[list(objectives)].to_numpy(dtype=float))]
    return front.sort_values(list(objectives))


def shrunk_to_forest(features: np.ndarray, observed: np.ndarray, seed: int) -> np.ndarray:
    """:data:`SHRINKAGE` x ``observed`` plus the rest x a random forest's out-of-bag prediction from the others."""
    forest = RandomForestRegressor(
        n_estimators=200, min_samples_leaf=2, max_features=0.5, oob_score=True, random_state=seed, n_jobs=1
    ).fit(features, observed)
    prior = np.where(np.isnan(forest.oob_prediction_), observed.mean(), forest.oob_prediction_)
    return SHRINKAGE * observed + (1 - SHRINKAGE) * prior


def gp_posterior_mean(features: np.ndarray, observed: np.ndarray, seed: int) -> np.ndarray:
    """A GP's posterior mean at ``features`` (Matern 5/2 on standardised features plus fitted white noise)."""
    scale = features.std(axis=0)
    scaled = (features - features.mean(axis=0)) / np.where(scale > 0, scale, 1.0)
    kernel = ConstantKernel(1.0) * Matern(length_scale=np.sqrt(scaled.shape[1]), nu=2.5) + WhiteKernel(0.5)
    gp = GaussianProcessRegressor(kernel, normalize_y=True, n_restarts_optimizer=2, random_state=seed)
    return gp.fit(scaled, observed).predict(scaled)


SMOOTHERS = {"forest_shrunk": shrunk_to_forest, "gp": gp_posterior_mean}
"""Each model estimator's re-estimate of the trained configurations' values from their features."""
ESTIMATORS = ("observed", *SMOOTHERS)
