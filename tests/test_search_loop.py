"""run_search on analytic multi-fidelity problems: strategies, outputs, faults, limits, bad input."""

import json
import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from ConfigSpace import Categorical, ConfigurationSpace, Float

from fairnas.benchmarks.analytic import NoisyMultiFidelityProblem
from fairnas.search import SearchResult, SearchSettings, non_dominated_mask, run_search
from fairnas.search.trial import TrialsCrashAlike

SPACES = Path(__file__).resolve().parents[1] / "searchspaces"
ZDT1 = NoisyMultiFidelityProblem("zdt1", n_variables=3)
REFERENCE = [1.5, 8.0]


def _search(tmp_path, target=ZDT1, space=None, known_objectives=None, **overrides):
    settings = {
        "objectives": ZDT1.objectives,
        "min_budget": 1,
        "max_budget": 4,
        "n_trials": 12,
        "reference_point": REFERENCE,
        "final": {"seeds": 0},
        **overrides,
    }
    return run_search(
        target,
        ZDT1.configspace() if space is None else space,
        SearchSettings(**settings),
        output_dir=tmp_path / "search",
        known_objectives=known_objectives,
    )


def _check_outputs(result: SearchResult, n_trials: int) -> pd.DataFrame:
    out = result.output_dir
    for name in ("trials.csv", "pareto_front.csv", "pareto_front.png", "hypervolume.csv", "search.json"):
        assert (out / name).is_file(), name
    trials = pd.read_csv(out / "trials.csv")
    assert len(trials) == n_trials == len(result.trials)
    assert trials["trial_id"].is_unique and not trials.duplicated(["config_id", "budget"]).any()
    front = pd.read_csv(out / "pareto_front.csv")
    points = front[list(result.objectives)].to_numpy()
    assert len(front) >= 1 and non_dominated_mask(points).all()
    assert np.allclose(front["budget"], result.max_budget) and (front["status"] == "success").all()
    curve = pd.read_csv(out / "hypervolume.csv")
    assert curve["hypervolume"].is_monotonic_increasing and len(curve) == n_trials
    assert curve["consumed_budget"].iloc[-1] == pytest.approx(trials["budget"].sum())
    return trials


def test_smac_multi_objective_hyperband_writes_all_outputs(tmp_path):
    result = _search(tmp_path)
    trials = _check_outputs(result, 12)
    assert set(trials["budget"]) <= {1.0, 2.0, 4.0} and {1.0, 4.0} <= set(trials["budget"])
    assert (trials["seed"] == 0).all() and (trials["status"] == "success").all()
    curve = pd.read_csv(tmp_path / "search" / "hypervolume.csv")
    assert curve[["ref_f1", "ref_f2"]].iloc[0].tolist() == REFERENCE
    assert (
        curve["hypervolume"].iloc[-1] == pytest.approx(result.hypervolume(REFERENCE))
        and result.hypervolume(REFERENCE) > 0
    )
    assert list((tmp_path / "search" / "smac3" / "smac" / "0").glob("runhistory.json"))
    # a promoted configuration keeps its id across budgets
    promoted = trials.groupby("config_id")["budget"].nunique()
    assert (promoted > 1).any()


def test_random_search_runs_every_trial_at_the_maximum_budget(tmp_path):
    result = _search(tmp_path, strategy="random", n_trials=8)
    trials = _check_outputs(result, 8)
    assert (trials["budget"] == 4.0).all()
    loaded = SearchResult.load(tmp_path / "search")
    assert loaded.hypervolume(REFERENCE) == pytest.approx(result.hypervolume(REFERENCE))


@pytest.mark.parametrize("strategy", ["smac", "random"])
def test_total_budget_stops_the_search_once_reached(tmp_path, strategy):
    result = _search(tmp_path, strategy=strategy, n_trials=None, total_budget=18)
    budgets = result.trials["budget"]
    assert budgets.sum() >= 18 and budgets.sum() - budgets.iloc[-1] < 18


def _crashing_target(config, seed, budget):
    if config["x0"] > 0.7:
        raise RuntimeError("diverged\nwith a traceback line")
    if 0.5 < config["x0"] <= 0.7:
        raise MemoryError("out of memory")
    if config["x1"] > 0.6:
        return {"f1": config["x0"], "f2": math.nan}
    if config["x2"] > 0.8:
        return {"f1": config["x0"]}
    if config["x0"] < 0.2:  # a well-defined +inf (e.g. a ratio over a zero denominator): a result, capped
        return {"f1": config["x0"], "f2": math.inf}
    return ZDT1(config, seed, budget)


def test_crashes_nan_and_missing_objectives_are_recorded_and_the_search_goes_on(tmp_path):
    result = _search(tmp_path, target=_crashing_target, strategy="random", n_trials=30, crash_cost=[10.0, 50.0])
    trials = result.trials
    crashed = trials[trials["status"] == "crashed"]
    assert len(trials) == 30 and 0 < len(crashed) < 30
    assert (crashed["f1"] == 10.0).all() and (crashed["f2"] == 50.0).all()
    kinds = set()
    for row in crashed.to_dict("records"):
        config, message = json.loads(row["config"]), row["error_message"]
        if config["x0"] > 0.7:
            kinds.add("raised")
            assert message == "RuntimeError: diverged with a traceback line"
        elif config["x0"] > 0.5:
            kinds.add("out of memory")
            assert message == "MemoryError: out of memory"
        elif config["x1"] > 0.6:
            kinds.add("nan")
            assert message == "FloatingPointError: undefined objective values {'f2': nan}"
        else:
            kinds.add("missing")
            assert message.startswith("ValueError: target result lacks objectives ['f2']")
    assert kinds == {"raised", "out of memory", "nan", "missing"}
    assert not set(result.pareto_front["config_id"]) & set(crashed["config_id"])
    succeeded = trials[trials["status"] == "success"]
    infinite = succeeded["config"].map(
        lambda config: json.loads(config)["x0"] < 0.2 and json.loads(config)["x2"] <= 0.8
    )
    assert infinite.any() and (succeeded.loc[infinite, "f2"] == 50.0).all()
    assert (succeeded.loc[infinite, "error_message"] == "f2=+inf capped at 50").all()
    assert succeeded.loc[~infinite, "error_message"].fillna("").eq("").all()


def _crashing_alike(config, seed, budget):
    raise ModuleNotFoundError("No module named 'wandb'")


def _crashing_first(n):
    """A target whose first ``n`` calls crash alike (a cache being built, say) and whose later calls succeed."""
    calls = []

    def target(config, seed, budget):
        calls.append(config)
        if len(calls) <= n:
            raise RuntimeError("cache not ready")
        return ZDT1(config, seed, budget)

    return target, calls


def test_a_search_whose_first_trials_crash_alike_stops_with_the_error_and_records_none_of_them(tmp_path):
    calls = []

    def target(config, seed, budget):
        calls.append(config)
        return _crashing_alike(config, seed, budget)

    with pytest.raises(TrialsCrashAlike) as stopped:
        _search(tmp_path, target=target, strategy="random", n_trials=30, fail_fast=3)
    message = str(stopped.value)
    assert "\n" not in message and len(calls) == 3  # three trials spent, not thirty
    assert message.startswith("the search's first 3 trials all crashed with the same error")
    assert "ModuleNotFoundError: No module named 'wandb'" in message and "search.fail_fast=0" in message
    assert not (tmp_path / "search" / "trials.csv").exists()  # running again after the fix starts clean
    # with the cause fixed, the same command resumes and trains every trial
    result = _search(tmp_path, target=ZDT1, strategy="random", n_trials=30, fail_fast=3)
    assert len(result.trials) == 30 and (result.trials["status"] == "success").all()


def test_fail_fast_0_spends_the_budget_on_crashes(tmp_path):
    result = _search(tmp_path, target=_crashing_alike, strategy="random", n_trials=5, fail_fast=0)
    assert len(result.trials) == 5 and (result.trials["status"] == "crashed").all()


def test_crashes_held_back_are_recorded_in_order_once_a_trial_succeeds(tmp_path):
    target, _ = _crashing_first(2)
    held = _search(tmp_path / "held", target=target, strategy="random", n_trials=8, fail_fast=3).trials
    target, _ = _crashing_first(2)
    plain = _search(tmp_path / "plain", target=target, strategy="random", n_trials=8, fail_fast=0).trials
    timing = ["wall_time_s", "finished_at"]
    assert list(held["status"]) == ["crashed", "crashed"] + ["success"] * 6
    pd.testing.assert_frame_equal(held.drop(columns=timing), plain.drop(columns=timing))


def test_different_errors_do_not_stop_the_search(tmp_path):
    errors = iter([ValueError("a"), ValueError("b"), ValueError("a")])

    def target(config, seed, budget):
        error = next(errors, None)
        if error is not None:
            raise error
        return ZDT1(config, seed, budget)

    result = _search(tmp_path, target=target, strategy="random", n_trials=6, fail_fast=2)
    assert list(result.trials["status"]) == ["crashed"] * 3 + ["success"] * 3


def test_smac_survives_crashing_trials(tmp_path):
    result = _search(tmp_path, target=_crashing_target, n_trials=10)
    assert len(result.trials) == 10 and (result.trials["status"] == "crashed").any()


def test_three_objectives_with_mean_aggregation(tmp_path):
    dtlz2 = NoisyMultiFidelityProblem("dtlz2", n_variables=4, n_objectives=3)
    settings = SearchSettings(
        dtlz2.objectives,
        min_budget=1,
        max_budget=4,
        n_trials=12,
        options={"multi_objective": "mean", "objective_weights": [1, 1, 2]},
        final={"seeds": 0},
    )
    result = run_search(dtlz2, dtlz2.configspace(), settings, output_dir=tmp_path / "search")
    _check_outputs(result, 12)
    assert result.hypervolume([3.0, 3.0, 3.0]) > 0
    assert set(pd.read_csv(tmp_path / "search" / "hypervolume.csv").filter(like="ref_").columns) == {
        "ref_f1",
        "ref_f2",
        "ref_f3",
    }


def test_smac_on_the_paper_space_only_proposes_valid_conditional_configs(tmp_path):
    def target(config, seed, budget):
        assert ("lr_adam" in config) == (config["optimizer"] in ("adam", "adamw"))
        assert ("lr_sgd" in config) == (config["optimizer"] == "sgd")
        lr = config.get("lr_adam", config.get("lr_sgd"))
        return {"error": abs(math.log10(lr) + 2.5) / budget, "rank_disparity": config["op0"] / 8}

    settings = SearchSettings(["error", "rank_disparity"], min_budget=1, max_budget=4, n_trials=12, final={"seeds": 0})
    result = run_search(target, SPACES / "dpn_paper.yaml", settings, output_dir=tmp_path / "search")
    trials = result.trials
    assert (trials["status"] == "success").all(), trials["error_message"].tolist()
    assert trials["lr_adam"].isna().tolist() == (trials["optimizer"] == "sgd").tolist()
    assert trials["lr_sgd"].isna().tolist() == (trials["optimizer"] != "sgd").tolist()


def test_a_space_with_few_configurations_is_not_evaluated_twice(tmp_path):
    space = ConfigurationSpace(seed=0)
    space.add(Categorical("x0", [0.1, 0.9]))
    result = _search(
        tmp_path, target=lambda c, s, b: {"f1": c["x0"], "f2": 1 - c["x0"]}, space=space, strategy="random", n_trials=10
    )
    assert sorted(result.trials["x0"]) == [0.1, 0.9]


def _never_called(config, seed, budget):
    raise AssertionError("no trial may run on bad input")


def _clashing_space():
    space = ConfigurationSpace(seed=0)
    space.add([Float("x0", (0.0, 1.0)), Float("f2", (0.0, 1.0))])
    return space


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        ({"known_objectives": ["f1", "error"]}, r"unknown search.objectives \['f2'\]"),
        ({"space": _clashing_space()}, r"hyperparameter names \['f2'\] clash with trials.csv columns"),
    ],
)
def test_objectives_and_space_are_checked_before_any_trial(tmp_path, arguments, message):
    with pytest.raises(ValueError, match=message):
        _search(tmp_path, target=_never_called, **arguments)
    assert not (tmp_path / "search").exists()


def test_space_key_unknown_to_the_training_config_fails_before_any_trial(tmp_path):
    with pytest.raises(ValueError, match=r"space key 'backbone.ops' \(hyperparameter 'op0'\)"):
        run_search(
            _never_called,
            SPACES / "dpn_paper.yaml",
            SearchSettings(["error"], min_budget=1, max_budget=4, n_trials=3, final={"seeds": 0}),
            output_dir=tmp_path / "search",
            known_keys={"head", "optimizer", "optimizer.lr"},
        )


def test_resuming_with_different_settings_is_refused(tmp_path):
    _search(tmp_path, strategy="random", n_trials=2)
    with pytest.raises(ValueError, match=r"different \['max_budget'\]"):
        _search(tmp_path, target=_never_called, strategy="random", n_trials=4, max_budget=8)
    extended = _search(tmp_path, strategy="random", n_trials=4)
    assert extended.trials["trial_id"].tolist() == [0, 1, 2, 3]


def test_a_resume_rebuilds_the_front_and_the_hypervolume_curve_from_trials_csv(tmp_path):
    """Derived from the trials, they are never read back: damaged or stale, the next run writes them again."""
    _search(tmp_path, strategy="random", n_trials=3)
    derived = {name: tmp_path / "search" / name for name in ("pareto_front.csv", "hypervolume.csv")}
    written = {name: path.read_text() for name, path in derived.items()}
    for path in derived.values():
        path.write_text("n_trials,hypervolume\n1,nan\n")
    _search(tmp_path, target=_never_called, strategy="random", n_trials=3)
    assert {name: path.read_text() for name, path in derived.items()} == written


def test_resuming_with_a_space_that_sets_other_keys_or_other_invariants_is_refused(tmp_path):
    def space(key):
        return {"hyperparameters": {"x0": {"type": "float", "lower": 0.0, "upper": 1.0, "key": key}}}

    def search(target, key, invariants):
        return run_search(
            target,
            space(key),
            SearchSettings(["f1", "f2"], min_budget=1, max_budget=4, n_trials=2, strategy="random", final={"seeds": 0}),
            output_dir=tmp_path / "search",
            invariants=invariants,
        )

    search(lambda c, s, b: {"f1": c["x0"], "f2": 1 - c["x0"]}, "model.a", {"data": ["d=1"]})
    with pytest.raises(ValueError, match=r"different \['space_keys'\]"):
        search(_never_called, "model.b", {"data": ["d=1"]})
    with pytest.raises(ValueError, match=r"different \['data'\]"):
        search(_never_called, "model.a", {"data": ["d=2"]})
    assert len(pd.read_csv(tmp_path / "search" / "trials.csv")) == 2
    recorded = tmp_path / "search" / "search.json"  # one written before space_keys was recorded still resumes
    recorded.write_text(json.dumps({k: v for k, v in json.loads(recorded.read_text()).items() if k != "space_keys"}))
    search(_never_called, "model.a", {"data": ["d=1"]})
    assert json.loads(recorded.read_text())["space_keys"] == {"x0": "model.a"}


def test_a_search_started_before_smac_recorded_its_brackets_resumes_only_with_every_bracket(tmp_path):
    _search(tmp_path, n_trials=4, options={"brackets": None})
    recorded = tmp_path / "search" / "search.json"
    older = {name: value for name, value in json.loads(recorded.read_text()).items() if name != "brackets"}
    recorded.write_text(json.dumps(older))  # as versions before search.smac.brackets wrote it: every bracket ran
    with pytest.raises(ValueError, match=r"different \['brackets'\] \(it ran with brackets=null\); resume it with"):
        _search(tmp_path, target=_never_called, n_trials=4)  # today's default, [0, -1], is not what it ran
    _search(tmp_path, n_trials=6, options={"brackets": None})
    assert json.loads(recorded.read_text())["brackets"] is None  # recorded from now on


def test_a_full_disk_stops_the_search_without_recording_the_trial_and_a_rerun_retries_it(tmp_path):
    """Running out of space is the machine's fault, not the trial's: the search stops, the trial stays unrecorded
    (a crash would record it with the crash cost and never retry it), and the same search later runs it."""
    import errno

    calls = []

    def full_disk_once(config, seed, budget):
        calls.append(budget)
        if len(calls) == 3:
            raise RuntimeError("checkpoint write failed") from OSError(errno.ENOSPC, "No space left on device")
        return ZDT1(config, seed, budget)

    with pytest.raises(RuntimeError, match="checkpoint write failed"):
        _search(tmp_path, target=full_disk_once, n_trials=6)
    assert len(pd.read_csv(tmp_path / "search" / "trials.csv")) == 2  # the third is not recorded as crashed
    result = _search(tmp_path, target=full_disk_once, n_trials=6)
    assert len(result.trials) == 6 and (result.trials["status"] == "success").all()
    assert not list((tmp_path / "search").glob(".trials.csv.*"))  # no temporary file left behind
