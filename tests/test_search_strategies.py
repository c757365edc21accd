"""MO-ASHA and NSGA-II (search.strategy=moasha | nsga2): the same contract as SMAC and random search."""

import dataclasses
import json
import sys

import pandas as pd
import pytest

from fairnas.search import SearchSettings, load_space
from fairnas.search.nsga2 import Nsga2Strategy
from fairnas.search.records import TrialRecord
from fairnas.search.trial import TrialOutcome
from fairnas.tasks.search import run_face_search
from tests.test_search_cli import search_config
from tests.test_search_loop import SPACES, ZDT1, _check_outputs, _never_called, _search

STRATEGIES = ["moasha", "nsga2"]
MIXED_SPACE = {
    "hyperparameters": {
        "optimizer": {"type": "categorical", "choices": ["adam", "sgd"], "key": "optimizer"},
        "lr_adam": {"type": "float", "lower": 1.0e-4, "upper": 1.0e-2, "log": True, "key": "optimizer.lr"},
        "lr_sgd": {"type": "float", "lower": 0.09, "upper": 0.8, "log": True, "key": "optimizer.lr"},
        "width": {"type": "ordinal", "sequence": [16, 32, 64], "key": "width"},
        "depth": {"type": "integer", "lower": 1, "upper": 64, "log": True, "key": "depth"},
        "blocks": {"type": "integer", "lower": 1, "upper": 4, "key": "blocks"},
        "dropout": {"type": "float", "lower": 0.0, "upper": 0.5, "key": "dropout"},
        "backbone": {"type": "constant", "value": "dpn", "key": "backbone"},
    },
    "conditions": [
        {"child": "lr_adam", "parent": "optimizer", "equals": "adam"},
        {"child": "lr_sgd", "parent": "optimizer", "equals": "sgd"},
    ],
}


@pytest.fixture(params=STRATEGIES)
def strategy(request):
    if request.param == "moasha":
        pytest.importorskip("syne_tune")
    return request.param


def _mixed_target(config, seed, budget):
    assert ("lr_adam" in config) == (config["optimizer"] == "adam") and ("lr_sgd" in config) != ("lr_adam" in config)
    assert config["backbone"] == "dpn" and config["width"] in (16, 32, 64)
    assert isinstance(config["depth"], int) and 1 <= config["depth"] <= 64 and config["blocks"] in (1, 2, 3, 4)
    lr = config.get("lr_adam", config.get("lr_sgd"))
    return {"f1": config["depth"] / 64 + config["dropout"] + 1 / budget, "f2": lr * config["width"] / config["blocks"]}


def test_each_strategy_searches_the_analytic_problem(tmp_path, strategy):
    result = _search(tmp_path, strategy=strategy, n_trials=16, population_size=4)
    trials = _check_outputs(result, 16)
    assert (trials["status"] == "success").all()
    if strategy == "nsga2":
        assert (trials["budget"] == 4.0).all()
    else:
        assert set(trials["budget"]) == {1.0, 2.0, 4.0}


def test_every_hyperparameter_type_and_condition_of_a_space_file(tmp_path, strategy):
    result = _search(
        tmp_path, target=_mixed_target, space=MIXED_SPACE, strategy=strategy, n_trials=14, population_size=4
    )
    trials = result.trials
    assert (trials["status"] == "success").all(), trials["error_message"].tolist()
    assert trials["lr_adam"].isna().tolist() == (trials["optimizer"] == "sgd").tolist()
    assert trials["lr_sgd"].isna().tolist() == (trials["optimizer"] == "adam").tolist()


def test_the_paper_space_gets_only_valid_conditional_configurations(tmp_path, strategy):
    def target(config, seed, budget):
        assert ("lr_adam" in config) == (config["optimizer"] in ("adam", "adamw"))
        assert ("lr_sgd" in config) == (config["optimizer"] == "sgd")
        return {"f1": config["op0"] / 8 + 1 / budget, "f2": config.get("lr_adam", config.get("lr_sgd"))}

    result = _search(
        tmp_path, target=target, space=SPACES / "dpn_paper.yaml", strategy=strategy, n_trials=12, population_size=4
    )
    assert (result.trials["status"] == "success").all(), result.trials["error_message"].tolist()


def test_moasha_promotes_configurations_rung_by_rung(tmp_path):
    pytest.importorskip("syne_tune")
    result = _search(tmp_path, strategy="moasha", min_budget=1, max_budget=9, eta=3, n_trials=40)
    trials = result.trials
    assert set(trials["budget"]) == {1.0, 3.0, 9.0}
    rungs = trials.groupby("config_id", sort=False)["budget"].apply(list)
    assert all(budgets == [1.0, 3.0, 9.0][: len(budgets)] for budgets in rungs)  # in order, one rung at a time
    assert (rungs.map(len) > 1).any() and (rungs.map(len) == 1).any()  # some continue, some are stopped


def test_crashed_trials_are_recorded_off_the_front_and_never_continued(tmp_path, strategy):
    def target(config, seed, budget):
        if config["x0"] > 0.5:
            raise RuntimeError("diverged")
        return ZDT1(config, seed, budget)

    result = _search(tmp_path, target=target, strategy=strategy, n_trials=20, population_size=4)
    trials = result.trials
    crashed = trials[trials["status"] == "crashed"]
    assert len(trials) == 20 and 0 < len(crashed) < 20 and (crashed[["f1", "f2"]] == 1000.0).all().all()
    assert (crashed["error_message"] == "RuntimeError: diverged").all()
    assert not set(result.pareto_front["config_id"]) & set(crashed["config_id"])
    if strategy == "moasha":  # a crashed trial left no checkpoint to continue
        assert (crashed["budget"] == 1.0).all()


@pytest.mark.parametrize("limit", [{"n_trials": 11}, {"n_trials": None, "total_budget": 18}])
def test_the_stopping_rules_hold(tmp_path, strategy, limit):
    budgets = _search(tmp_path, strategy=strategy, population_size=4, **limit).trials["budget"]
    if limit["n_trials"]:
        assert len(budgets) == 11
    else:
        assert budgets.sum() >= 18 and budgets.sum() - budgets.iloc[-1] < 18


def test_a_small_space_is_searched_until_exhausted_without_repeats(tmp_path, strategy):
    space = {"hyperparameters": {"x0": {"type": "categorical", "choices": [0.1, 0.5, 0.9], "key": "x0"}}}
    result = _search(
        tmp_path,
        target=lambda c, s, b: {"f1": c["x0"], "f2": 1 - c["x0"]},
        space=space,
        strategy=strategy,
        n_trials=30,
        population_size=4,
    )
    trials = result.trials
    assert not trials.duplicated(["config_id", "budget"]).any() and set(trials["x0"]) == {0.1, 0.5, 0.9}
    assert len(trials) < 30


def test_two_dask_workers_run_the_trials(tmp_path, strategy):
    result = _search(tmp_path, strategy=strategy, n_trials=10, population_size=4, n_workers=2)
    trials = result.trials
    assert len(trials) == 10 and (trials["status"] == "success").all()
    assert not trials.duplicated(["config_id", "budget"]).any()


def test_nsga2_breeds_from_the_replayed_trials_of_an_earlier_run():
    settings = SearchSettings(
        ["f1", "f2"], min_budget=1, max_budget=4, n_trials=20, population_size=4, seed=1, final={"seeds": 0}
    )
    space = load_space(MIXED_SPACE).configspace
    earlier = Nsga2Strategy(space, dataclasses.replace(settings, seed=2))
    replayed = [earlier.ask() for _ in range(4)]  # configurations this run never asks for, inactive ones absent
    strategy = Nsga2Strategy(space, settings)
    dominating = TrialOutcome({"f1": 0, "f2": 0}, "success", 1)
    for trial_id, proposal in enumerate(replayed):
        strategy.tell_record(TrialRecord(trial_id, proposal.config, 4.0, 1, dominating))
    for _ in range(2):  # two generations, each dominated by the replayed trials
        for proposal in [strategy.ask() for _ in range(4)]:
            strategy.tell(proposal, TrialOutcome({"f1": 1, "f2": 1}, "success", 1))
    assert strategy.ask() is not None  # the third generation, bred from the 4 survivors: the replayed trials
    survivors = [strategy._config(genome) for genome in strategy._algorithm.pop.get("X")]
    assert sorted(map(json.dumps, survivors)) == sorted(json.dumps(proposal.config) for proposal in replayed)


def test_nsga2_waits_for_its_generation_before_breeding_the_next():
    settings = SearchSettings(
        ZDT1.objectives, min_budget=1, max_budget=4, n_trials=20, population_size=3, final={"seeds": 0}
    )
    strategy = Nsga2Strategy(ZDT1.configspace(), settings)
    generation = [strategy.ask() for _ in range(3)]
    assert None not in generation and strategy.ask() is None
    for proposal in generation[:2]:
        strategy.tell(proposal, TrialOutcome(ZDT1(proposal.config, 0, 4), "success", 1))
    assert strategy.ask() is None
    strategy.tell(generation[2], TrialOutcome(ZDT1(generation[2].config, 0, 4), "success", 1))
    assert strategy.ask().config not in [proposal.config for proposal in generation]


@pytest.mark.parametrize("value", [1, 2.5, "many"])
def test_a_bad_population_size_is_named_in_one_line(value):
    with pytest.raises(ValueError) as error:
        SearchSettings(ZDT1.objectives, min_budget=1, max_budget=4, n_trials=4, population_size=value)
    assert str(error.value) == f"search.population_size must be an integer >= 2, got {value!r}"


def test_moasha_without_syne_tune_stops_before_any_trial_with_the_install_line(tmp_path, monkeypatch):
    for name in [name for name in sys.modules if name.split(".")[0] == "syne_tune"] + ["syne_tune"]:
        monkeypatch.setitem(sys.modules, name, None)  # importing it fails as if it were not installed
    monkeypatch.delitem(sys.modules, "fairnas.search.moasha", raising=False)
    with pytest.raises(ValueError) as error:
        _search(tmp_path, target=_never_called, strategy="moasha")
    assert str(error.value) == "search.strategy=moasha needs Syne Tune: pip install -e '.[moasha]'"
    assert not (tmp_path / "search").exists()


@pytest.mark.parametrize(
    ("strategy_overrides", "budgets"),
    [
        (("search.strategy=moasha", "search.n_trials=3"), [1.0, 2.0, 1.0]),
        (
            (
                "search.strategy=nsga2",
                "search.max_budget=1",
                "search.n_trials=2",
                "search.population_size=2",
                "search.final.seeds=1",
            ),
            [1.0, 1.0],
        ),
    ],
    ids=STRATEGIES,
)
def test_search_py_runs_each_strategy_on_faces(tmp_path, cache_dir, strategy_overrides, budgets):
    if "search.strategy=moasha" in strategy_overrides:
        pytest.importorskip("syne_tune")
    result = run_face_search(search_config(tmp_path, cache_dir, "search.total_budget=null", *strategy_overrides))
    out = tmp_path / "search"
    trials = pd.read_csv(out / "trials.csv")
    assert trials["budget"].tolist() == budgets and (trials["status"] == "success").all()
    assert (out / "pareto_front.csv").is_file() and any((out / "wandb").glob("offline-run-*"))
    assert len(result.pareto_front) >= 1
    runs = [json.loads(path.read_text()) for path in out.glob("trials/*/seed0/epochs*/trial.json")]
    assert len(runs) == len(trials)
    if budgets[1] > budgets[0]:  # MO-ASHA's promotion continues the configuration's 1-epoch checkpoint
        assert trials["config_id"][0] == trials["config_id"][1]
        assert [run["continued_from_epoch"] for run in runs if run["budget"] == 2.0] == [1]
    else:
        final = pd.read_csv(out / "final_front.csv")
        assert len(final) == len(result.final.front) >= 1 and (final["n_seeds"] == 1).all()
