"""bench/search_efficiency.py: compute metering, equal-consumed-budget runs and the summary, on the analytic problem."""

import importlib
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

BENCH = Path(__file__).resolve().parents[1] / "bench"


@pytest.fixture
def bench(monkeypatch):
    monkeypatch.syspath_prepend(str(BENCH))
    return importlib.import_module("search_efficiency")


@pytest.fixture
def meter(monkeypatch):
    monkeypatch.syspath_prepend(str(BENCH))
    return importlib.import_module("_compute_meter")


def test_retraining_cost_charges_only_the_new_epochs_when_continuing(meter):
    config = {"x0": 0.5}
    continuing, scratch = meter.RetrainingCost(True), meter.RetrainingCost(False)
    assert [continuing(config, 0, budget) for budget in (1, 2, 4)] == [1, 1, 2]
    assert [scratch(config, 0, budget) for budget in (1, 2, 4)] == [1, 2, 4]
    assert continuing(config, 1, 4) == 4  # another seed has no checkpoint to continue
    assert continuing({"x0": 0.6}, 0, 2) == 2


def test_metered_target_stops_starting_calls_at_the_consumed_limit(meter):
    metered = meter.MeteredTarget(lambda config, seed, budget: {"f": budget}, meter.RetrainingCost(False), limit=5)
    assert metered({"x": 1}, 0, 4) == {"f": 4}
    metered({"x": 2}, 0, 4)  # starts below the limit, ends past it
    with pytest.raises(meter.ComputeBudgetReached):
        metered({"x": 3}, 0, 1)
    assert metered.consumed == 8 and len(metered.charges) == 2
    trials = pd.DataFrame({"config_id": [c.config_id for c in metered.charges], "budget": [4.0, 4.0]})
    assert metered.costs_of(trials).tolist() == [4.0, 4.0]
    with pytest.raises(RuntimeError, match="do not match"):
        metered.costs_of(trials.iloc[::-1])


@pytest.mark.parametrize("methods", [("smac", "smac_scratch", "random"), ("random", "moasha")])
def test_benchmark_runs_every_method_to_the_same_consumed_budget(bench, tmp_path, methods):
    if "moasha" in methods:
        pytest.importorskip("syne_tune")
    problem = bench.analytic_problem()
    runs = bench.benchmark(problem, methods=methods, seeds=[0], total_budget=24, work_dir=tmp_path)
    assert list(runs["method"].unique()) == list(methods)
    for method, run in runs.groupby("method"):
        consumed = run["consumed_budget"].to_numpy()
        assert np.allclose(consumed, run["cost"].cumsum()) and (run["cost"] > 0).all()
        # the last trial starts below 24 consumed epochs and may end past it, by less than one trial
        assert consumed[-2] < 24 <= consumed[-1] < 24 + problem.max_budget, method
        assert run["hypervolume"].is_monotonic_increasing
    random = runs[runs["method"] == "random"]
    assert (random["budget"] == problem.max_budget).all() and len(random) == 3
    assert (random["hypervolume"] > 0).all()  # every random trial is a max-budget point inside the reference
    if "smac" in methods:
        smac, scratch = (runs[runs["method"] == name] for name in ("smac", "smac_scratch"))
        # the same SMAC search: continuing charges promotions only their new epochs and so runs further
        assert (smac["cost"] < smac["budget"]).any() and (scratch["cost"] == scratch["budget"]).all()
        assert len(smac) > len(scratch)
        assert smac["config_id"].iloc[: len(scratch)].tolist() == scratch["config_id"].tolist()
    if "moasha" in methods:
        moasha = runs[runs["method"] == "moasha"]
        assert set(moasha["budget"]) <= {1.0, 2.0, 4.0, 8.0} and moasha["cost"].sum() < moasha["budget"].sum()
        # MO-ASHA draws the configurations random search draws with the same seed
        assert moasha["config_id"].iloc[0] == random["config_id"].iloc[0]


def test_summary_reads_hypervolume_at_the_budget_and_the_budget_to_reach_random(bench):
    curve = lambda method, seed, consumed, volume: pd.DataFrame(  # noqa: E731
        {"method": method, "seed": seed, "consumed_budget": consumed, "hypervolume": volume, "run_wall_time_s": 1.0}
    )
    runs = pd.concat([
        curve("random", 0, [8, 16], [1.0, 2.0]),
        curve("random", 1, [8, 16], [3.0, 4.0]),
        curve("smac", 0, [4, 10, 17], [2.0, 3.5, 9.0]),  # the trial ending at 17 is past the budget
        curve("smac", 1, [4, 16], [0.5, 1.0]),
    ])
    summary = bench.summarize(runs, total_budget=16).set_index("method")
    assert summary.attrs["random_hypervolume"] == pytest.approx(3.0)
    assert summary.loc["random", "hv_mean"] == pytest.approx(3.0)
    assert summary.loc["smac", "hv_mean"] == pytest.approx(2.25)
    assert summary.loc["smac", "hv_std"] == pytest.approx(np.std([3.5, 1.0], ddof=1))
    # random seed 1 reaches 3.0 after 8 epochs, seed 0 never: median over [8, inf]
    assert summary.loc["random", "reached"] == 1 and np.isinf(summary.loc["random", "budget_to_random"])
    assert summary.loc["smac", "reached"] == 1
    table = bench.format_table(bench.summarize(runs, 16), bench.analytic_problem(), 16)
    assert "SMAC, continuing" in table and ">16 (median; 1/2 seeds)" in table


def test_bad_input_fails_before_any_trial(bench, tmp_path):
    problem = bench.analytic_problem()
    with pytest.raises(ValueError, match="unknown methods"):
        bench.benchmark(problem, methods=["hyperband"], seeds=[0], total_budget=24, work_dir=tmp_path)
    with pytest.raises(ValueError, match="below one max-budget trial"):
        bench.benchmark(problem, methods=["random"], seeds=[0], total_budget=4, work_dir=tmp_path)
    assert not any(tmp_path.iterdir())
