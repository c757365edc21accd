"""The final-selection stage: candidates by non-dominated sorting, re-training with fresh seeds on the search's pool,
the front of means, resume after SIGKILL without losing or repeating a run, crashes recorded, SMAC's n_seeds."""

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from fairnas.benchmarks.analytic import NoisyMultiFidelityProblem
from fairnas.search import SearchResult, SearchSettings, non_dominated_mask, run_search
from fairnas.search.final import fresh_seeds, select_candidates

REPOSITORY = Path(__file__).resolve().parents[1]
ZDT1 = NoisyMultiFidelityProblem("zdt1", n_variables=3)


def _settings(**overrides) -> SearchSettings:
    values = {"objectives": ZDT1.objectives, "min_budget": 1, "max_budget": 4, "n_trials": 16, "strategy": "random"}
    return SearchSettings(**(values | overrides))


def test_candidates_are_the_front_then_the_next_layers_and_the_most_isolated_of_a_split_layer():
    rows = [
        ("a", 0.0, 3.0),  # layer 0
        ("b", 1.0, 1.0),  # layer 0
        ("c", 3.0, 0.0),  # layer 0
        ("d", 1.2, 3.5),  # layer 1 (b dominates it)
        ("e", 2.0, 2.0),  # layer 1, between d and f
        ("f", 2.05, 1.95),  # layer 1
        ("g", 5.0, 5.0),  # layer 2
    ]
    trials = pd.DataFrame(
        [
            {"config_id": cid, "config": json.dumps({"x": cid}), "budget": 4.0, "status": "success", "f1": x, "f2": y}
            for cid, x, y in rows
        ]
        + [{"config_id": "h", "config": "{}", "budget": 2.0, "status": "success", "f1": -1.0, "f2": -1.0}]
    )
    assert select_candidates(trials, ["f1", "f2"], 4, top_k=2)["config_id"].tolist() in (["a", "c"], ["c", "a"])
    five = select_candidates(trials, ["f1", "f2"], 4, top_k=5)
    assert five["config_id"].tolist()[:3] == ["a", "b", "c"] and set(five["config_id"][3:]) == {"d", "f"}
    assert five["layer"].tolist() == [0, 0, 0, 1, 1]
    assert len(select_candidates(trials, ["f1", "f2"], 4, top_k=20)) == 7  # budget-2 trials never count
    assert fresh_seeds([0, 2, 5], 3) == [1, 3, 4]


def test_final_stage_retrains_the_candidates_with_fresh_seeds_and_answers_with_the_front_of_means(tmp_path):
    calls = []

    def target(config, seed, budget):
        calls.append((json.dumps(config, sort_keys=True), seed, budget))
        return ZDT1(config, seed, budget)

    result = run_search(target, ZDT1.configspace(), _settings(final={"top_k": 4, "seeds": 3}), output_dir=tmp_path)
    trials = pd.read_csv(tmp_path / "trials.csv")
    final_runs = pd.read_csv(tmp_path / "final_trials.csv")
    candidates = pd.read_csv(tmp_path / "final_candidates.csv")
    assert len(trials) == 16 and (trials["seed"] == 0).all()
    assert len(candidates) == 4 and set(candidates["config_id"]) <= set(trials["config_id"])
    assert len(final_runs) == 12 and set(final_runs["seed"]) == {1, 2, 3} and (final_runs["budget"] == 4).all()
    assert len(calls) == 16 + 12
    for row in candidates.to_dict("records"):
        runs = final_runs[final_runs["config_id"] == row["config_id"]]
        expected = [ZDT1(json.loads(row["config"]), seed, 4.0)["f1"] for seed in (1, 2, 3)]
        assert row["f1_mean"] == pytest.approx(np.mean(expected)) and row["n_seeds"] == 3
        assert row["f1_se"] == pytest.approx(runs["f1"].sem())
    front = pd.read_csv(tmp_path / "final_front.csv")
    means = candidates[["f1_mean", "f2_mean"]].to_numpy()
    on_front = candidates["config_id"][non_dominated_mask(means)]
    assert set(front["config_id"]) == set(on_front) and {"f1_se", "f2_se", "n_seeds", "x0"} <= set(front)
    assert result.final is not None and result.final.epochs == 48
    loaded = SearchResult.load(tmp_path)
    assert loaded.final is not None and loaded.final.front.equals(front)

    calls.clear()
    again = run_search(target, ZDT1.configspace(), _settings(final={"top_k": 4, "seeds": 3}), output_dir=tmp_path)
    assert calls == [] and again.final.front.equals(front)  # read back: nothing trained again
    more = run_search(target, ZDT1.configspace(), _settings(final={"top_k": 4, "seeds": 4}), output_dir=tmp_path)
    assert len(calls) == 4 and {seed for _, seed, _ in calls} == {4}  # one more seed: only its runs
    assert (more.final.candidates["n_seeds"] == 4).all()


def test_the_observed_answer_keeps_every_observed_front_member_with_its_fresh_seeds_estimate(tmp_path):
    settings = _settings(final={"top_k": 8, "seeds": 2, "answer": "observed"})
    result = run_search(ZDT1, ZDT1.configspace(), settings, output_dir=tmp_path)
    observed = pd.read_csv(tmp_path / "pareto_front.csv")
    candidates = pd.read_csv(tmp_path / "final_candidates.csv")
    front = pd.read_csv(tmp_path / "final_front.csv")
    assert len(observed) <= 8 and set(front["config_id"]) == set(observed["config_id"])
    assert set(candidates.loc[candidates["layer"] == 0, "config_id"]) == set(front["config_id"])
    assert (front["n_seeds"] == 2).all() and front["f1_se"].notna().all()
    for row in front.to_dict("records"):  # re-measured on the fresh seeds, the search's own run left out
        expected = [ZDT1(json.loads(row["config"]), seed, 4.0)["f1"] for seed in (1, 2)]
        assert row["f1_mean"] == pytest.approx(np.mean(expected))
    means = run_search(ZDT1, ZDT1.configspace(), _settings(final={"top_k": 8, "seeds": 2}), output_dir=tmp_path)
    assert set(means.final.front["config_id"]) <= set(result.final.front["config_id"])  # the front of means re-selects


def test_no_final_stage_gives_the_observed_front_alone(tmp_path):
    result = run_search(ZDT1, ZDT1.configspace(), _settings(final={"seeds": 0}), output_dir=tmp_path)
    assert result.final is None
    assert not any((tmp_path / name).exists() for name in ("final_trials.csv", "final_front.csv"))
    assert (tmp_path / "pareto_front.csv").is_file() and (tmp_path / "pareto_front.png").is_file()


def test_a_crashed_retraining_is_recorded_and_left_out_of_the_means(tmp_path):
    """Also read back on resume, its test metric (NaN: a crash measures nothing) included."""

    def target(config, seed, budget):
        if seed == 2:
            raise RuntimeError("CUDA out of memory (simulated)")
        return {**ZDT1(config, seed, budget), "test/f1": 0.5}

    def search():
        settings = _settings(final={"top_k": 2, "seeds": 2})
        return run_search(target, ZDT1.configspace(), settings, output_dir=tmp_path, final_metrics=["test/f1"])

    result = search()
    final_runs = pd.read_csv(tmp_path / "final_trials.csv", keep_default_na=False)
    crashed = final_runs[final_runs["seed"] == 2]
    assert len(crashed) == 2 and (crashed["status"] == "crashed").all() and (crashed["test/f1"] == "").all()
    assert crashed["error_message"].str.contains("CUDA out of memory").all()
    assert (result.final.candidates["n_seeds"] == 1).all()  # the successful seed only
    assert result.final.candidates["f1_se"].isna().all()  # one seed: no standard error
    again = search()  # was: ValueError: could not convert string to float: ''
    pd.testing.assert_frame_equal(again.final.trials, result.final.trials)


def test_final_stage_runs_on_the_dask_workers(tmp_path):
    settings = _settings(n_trials=6, n_workers=2, final={"top_k": 2, "seeds": 2})
    result = run_search(ZDT1, ZDT1.configspace(), settings, output_dir=tmp_path)
    final_runs = pd.read_csv(tmp_path / "final_trials.csv")
    assert len(final_runs) == 4 and (final_runs["status"] == "success").all()
    assert not final_runs.duplicated(["config_id", "seed"]).any() and len(result.final.front) >= 1


SCRIPT = textwrap.dedent(
    """
    import sys, time
    from fairnas.benchmarks.analytic import NoisyMultiFidelityProblem
    from fairnas.search import SearchSettings, config_id, run_search

    problem = NoisyMultiFidelityProblem("zdt1", n_variables=3)
    output_dir, calls = sys.argv[1:3]

    def target(config, seed, budget):
        with open(calls, "a") as log:
            log.write(f"{config_id(config)},{seed},{budget}\\n")
        time.sleep(0.1 if seed == 0 else 0.4)
        return problem(config, seed, budget)

    settings = SearchSettings(problem.objectives, min_budget=1, max_budget=4, n_trials=8, strategy="random",
                              final={"top_k": 3, "seeds": 3})
    run_search(target, problem.configspace(), settings, output_dir=output_dir)
    """
)


@pytest.mark.integration
def test_sigkill_during_the_final_stage_then_rerun_loses_and_repeats_nothing(tmp_path):
    script, output_dir, calls, log = (
        tmp_path / "search.py",
        tmp_path / "search",
        tmp_path / "calls.csv",
        tmp_path / "log",
    )
    script.write_text(SCRIPT)
    final_csv = output_dir / "final_trials.csv"
    env = {**os.environ, "PYTHONHASHSEED": "0", "PYTHONPATH": str(REPOSITORY)}

    def start():
        with open(log, "a") as stderr:
            command = [sys.executable, str(script), str(output_dir), str(calls)]
            return subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL, stderr=stderr)

    first = start()
    deadline = time.monotonic() + 120
    while (not final_csv.exists() or len(pd.read_csv(final_csv)) < 3) and time.monotonic() < deadline:
        assert first.poll() is None, log.read_text()
        time.sleep(0.02)
    first.send_signal(signal.SIGKILL)
    first.wait()
    before = pd.read_csv(final_csv)
    assert 3 <= len(before) < 9, "killed during the final stage"

    assert start().wait(timeout=120) == 0, log.read_text()
    final_runs = pd.read_csv(final_csv)
    assert len(final_runs) == 9 and not final_runs.duplicated(["config_id", "seed"]).any()
    pd.testing.assert_frame_equal(final_runs.iloc[: len(before)], before)  # finished runs untouched
    evaluated = pd.read_csv(calls, names=["config_id", "seed", "budget"])
    repeated = evaluated[evaluated.duplicated(keep="first")]
    assert len(repeated) <= 1 and not repeated.merge(before[["config_id", "seed"]]).size  # only the killed run
    assert len(pd.read_csv(output_dir / "trials.csv")) == 8


def test_smac_n_seeds_trains_a_configuration_with_several_seeds_and_resumes(tmp_path):
    settings = _settings(strategy="smac", n_trials=20, options={"n_seeds": 2}, final={"seeds": 0})  # full budget only
    result = run_search(ZDT1, ZDT1.configspace(), settings, output_dir=tmp_path / "a")
    trials = result.trials
    assert trials["seed"].nunique() == 2 and not trials.duplicated(["config_id", "budget", "seed"]).any()
    assert trials.duplicated(["config_id", "budget"]).any()  # some configuration ran with both seeds
    head = trials.iloc[:12]
    (tmp_path / "b").mkdir()
    (tmp_path / "a" / "search.json").rename(tmp_path / "b" / "search.json")
    head.to_csv(tmp_path / "b" / "trials.csv", index=False)
    resumed = run_search(ZDT1, ZDT1.configspace(), settings, output_dir=tmp_path / "b")
    assert len(resumed.trials) == 20 and not resumed.trials.duplicated(["config_id", "budget", "seed"]).any()
