"""Choosing a run's answer by a model's estimate (``bench.comparison.answer_estimates``)."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from bench.comparison.answer_estimates import estimated_answer, gp_posterior_mean, shrunk_to_forest
from fairnas.benchmarks.answer_quality import answer
from fairnas.benchmarks.design import sobol_design
from fairnas.benchmarks.surrogate import Encoding
from fairnas.config import SPACES_DIR
from fairnas.search import config_id, load_space

SPACE = load_space(SPACES_DIR / "dpn_paper_group_sampling.yaml")
OBJECTIVES = ("error", "rank_disparity")


def truth(config: dict) -> tuple[float, float]:
    """A smooth landscape: error set by the head and the first operation, rank disparity by group sampling."""
    error = 0.3 + 0.1 * (config["head"] == "magface") + 0.02 * config["op0"]
    return error, 2.0 + 3.0 * abs(config["group_alpha"] - 1.0)


def trials_of(configs: list[dict], noise: float, seed: int = 0) -> pd.DataFrame:
    """One full-budget trial per configuration, observed with Gaussian noise of ``noise`` x each objective's s.d."""
    rng = np.random.default_rng(seed)
    true = np.array([truth(config) for config in configs])
    observed = true + noise * true.std(axis=0) * rng.standard_normal(true.shape)
    return pd.DataFrame(
        {
            "config_id": [config_id(config) for config in configs],
            "config": [json.dumps(config, sort_keys=True) for config in configs],
            "budget": 4.0,
            "status": "success",
            "stage": "search",
            "error": observed[:, 0],
            "rank_disparity": observed[:, 1],
        }
    )


@pytest.fixture(scope="module")
def configs() -> list[dict]:
    return sobol_design(SPACE, 48)


def test_the_observed_estimator_is_the_answer_searches_return_today(configs):
    trials = trials_of(configs, noise=0.5)
    chosen = estimated_answer(trials, OBJECTIVES, 4, SPACE.configspace, "observed")
    pd.testing.assert_frame_equal(chosen, answer(trials, OBJECTIVES, 4))


def test_the_forest_estimate_is_nearer_the_truth_than_noisy_observations_and_its_front_is_of_trained_configurations(
    configs,
):
    """With noise as large as the spread of the truth, the shrunk estimates of the trained configurations lie nearer
    their true values than the observations do; the answer holds trained configurations only, as a front."""
    trials = trials_of(configs, noise=1.0)
    chosen = estimated_answer(trials, OBJECTIVES, 4, SPACE.configspace, "forest_shrunk")
    assert set(chosen.index) <= set(trials["config_id"]) and chosen["error"].is_monotonic_increasing
    assert chosen["rank_disparity"].is_monotonic_decreasing  # a front: the better in one, the worse in the other
    assert not chosen.equals(answer(trials, OBJECTIVES, 4))
    features = Encoding(SPACE.configspace)(configs)
    true = np.array([truth(config) for config in configs])
    for k, name in enumerate(OBJECTIVES):
        observed = trials[name].to_numpy()
        estimate = shrunk_to_forest(features, observed, 0)
        assert np.abs(estimate - true[:, k]).mean() < 0.8 * np.abs(observed - true[:, k]).mean()


def test_without_noise_the_gp_keeps_the_observations(configs):
    """Its white-noise term is fitted: on exact observations its posterior mean stays at them (no smoothing)."""
    trials = trials_of(configs, noise=0.0)
    features = Encoding(SPACE.configspace)(configs)
    for name in OBJECTIVES:
        observed = trials[name].to_numpy()
        assert np.allclose(gp_posterior_mean(features, observed, 0), observed, atol=0.02 * observed.std())


def test_an_unknown_estimator_is_refused_naming_the_allowed_ones(configs):
    with pytest.raises(ValueError, match=r"unknown answer estimator 'mean'; allowed: \['observed', 'forest_shrunk'"):
        estimated_answer(trials_of(configs, 0.5), OBJECTIVES, 4, SPACE.configspace, "mean")


def test_bench_answer_selection_judges_every_estimator_of_each_run_at_the_truth(tmp_path):
    """``bench/answer_selection.py`` on random search over a generated surrogate: one row per run, the observed
    answer's true share as the benchmark's own answer quality reports it, the best of what it trained at least as
    good as any answer."""
    from bench import answer_selection
    from bench.comparison.method_summary import answer_quality
    from bench.comparison.runner import benchmark
    from fairnas.benchmarks.problems import surrogate_problem
    from tests.test_surrogate import write_table

    write_table(tmp_path, n_configs=64)
    problem = surrogate_problem("generated", tmp_path)
    runs = benchmark(problem, methods=["random"], seeds=[0, 1], total_budget=48, work_dir=tmp_path / "runs")
    judged = answer_selection.judged_runs(tmp_path / "runs", problem, total_budget=48)
    assert judged[["method", "seed", "budget"]].values.tolist() == [["random", 0, 48.0], ["random", 1, 48.0]]
    reported = answer_quality(runs, problem).set_index("seed")["true_share"]
    assert judged.set_index("seed")["observed"].to_dict() == pytest.approx(reported.to_dict())
    for estimator in ("observed", "forest_shrunk", "gp"):
        assert (judged["evaluated"] >= judged[estimator] - 1e-12).all()
    assert "| random   |       48 |      2 |" in answer_selection.summary(judged).round(3).to_markdown(index=False)
