"""Every registered strategy (search.strategy): the same contract, checked on each, by its declared traits; NSGA-II's
and MO-ASHA's own behaviour; a strategy registered from a test runs with no edit to the search."""

import dataclasses
import json
import re
import sys
from pathlib import Path

import pandas as pd
import pytest
from ConfigSpace import ConfigurationSpace

from fairnas.search import SearchSettings, load_space, run_search
from fairnas.search.records import TrialRecord
from fairnas.search.sections import Section
from fairnas.search.strategies import REGISTRY, BuildContext, Proposal, Registration, register
from fairnas.search.strategies.nsga2 import Nsga2Strategy
from fairnas.search.trial import TrialOutcome, config_id
from fairnas.tasks.search import run_face_search
from tests.test_search_cli import search_config
from tests.test_search_loop import SPACES, ZDT1, _check_outputs, _never_called, _search

SLOW = {"botorch"}
"""Strategies whose searches here take a minute each: the contract runs for them in the slow suite, and their own
test file covers it in the default one."""
OPTIONS = {
    "nsga2": {"population_size": 4},
    "botorch": {"fidelity": "early_stop", "raw_samples": 16, "num_restarts": 2, "mc_samples": 16, "fit_maxiter": 50},
}
"""Options that keep each test's search small (a strategy not named here runs with its defaults)."""


def registered() -> list:
    """Every registered strategy as a parameter, skipped where its optional extra is not installed (``SLOW``: in
    the slow suite)."""
    return [
        pytest.param(
            name,
            marks=[
                *([pytest.mark.extra(name)] if entry.requires is not None else []),
                *([pytest.mark.slow] if name in SLOW else []),
            ],
        )
        for name, entry in REGISTRY.items()
    ]


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


@pytest.fixture(params=registered())
def strategy(request):
    return request.param


def _strategy_search(tmp_path, strategy, **overrides):
    return _search(tmp_path, strategy=strategy, options=OPTIONS.get(strategy), **overrides)


def _mixed_target(config, seed, budget):
    assert ("lr_adam" in config) == (config["optimizer"] == "adam") and ("lr_sgd" in config) != ("lr_adam" in config)
    assert config["backbone"] == "dpn" and config["width"] in (16, 32, 64)
    assert isinstance(config["depth"], int) and 1 <= config["depth"] <= 64 and config["blocks"] in (1, 2, 3, 4)
    lr = config.get("lr_adam", config.get("lr_sgd"))
    return {"f1": config["depth"] / 64 + config["dropout"] + 1 / budget, "f2": lr * config["width"] / config["blocks"]}


def test_each_strategy_searches_the_analytic_problem(tmp_path, strategy):
    result = _strategy_search(tmp_path, strategy, n_trials=16)
    trials = _check_outputs(result, 16)
    assert (trials["status"] == "success").all() and set(trials["budget"]) <= {1.0, 2.0, 4.0}
    if REGISTRY[strategy].full_budget_only:
        assert (trials["budget"] == 4.0).all()
    if REGISTRY[strategy].multi_fidelity:  # with the options above (BoTorch: early_stop)
        assert trials["budget"].nunique() > 1


def test_every_hyperparameter_type_and_condition_of_a_space_file(tmp_path, strategy):
    result = _strategy_search(tmp_path, strategy, target=_mixed_target, space=MIXED_SPACE, n_trials=14)
    trials = result.trials
    assert (trials["status"] == "success").all(), trials["error_message"].tolist()
    assert trials["lr_adam"].isna().tolist() == (trials["optimizer"] == "sgd").tolist()
    assert trials["lr_sgd"].isna().tolist() == (trials["optimizer"] == "adam").tolist()


def test_the_paper_space_gets_only_valid_conditional_configurations(tmp_path, strategy):
    def target(config, seed, budget):
        assert ("lr_adam" in config) == (config["optimizer"] in ("adam", "adamw"))
        assert ("lr_sgd" in config) == (config["optimizer"] == "sgd")
        return {"f1": config["op0"] / 8 + 1 / budget, "f2": config.get("lr_adam", config.get("lr_sgd"))}

    result = _strategy_search(tmp_path, strategy, target=target, space=SPACES / "dpn_paper.yaml", n_trials=12)
    assert (result.trials["status"] == "success").all(), result.trials["error_message"].tolist()


@pytest.mark.extra("moasha")
def test_moasha_promotes_configurations_rung_by_rung(tmp_path):
    result = _search(tmp_path, strategy="moasha", min_budget=1, max_budget=9, eta=3, n_trials=40)
    trials = result.trials
    assert set(trials["budget"]) == {1.0, 3.0, 9.0}
    rungs = trials.groupby("config_id", sort=False)["budget"].apply(list)
    assert all(budgets == [1.0, 3.0, 9.0][: len(budgets)] for budgets in rungs)  # in order, one rung at a time
    assert (rungs.map(len) > 1).any() and (rungs.map(len) == 1).any()  # some continue, some are stopped


def _diverging(config, seed, budget):
    if config["x0"] > 0.5:
        raise RuntimeError("diverged")
    return ZDT1(config, seed, budget)


def test_crashed_trials_are_recorded_off_the_front(tmp_path, strategy):
    result = _strategy_search(tmp_path, strategy, target=_diverging, n_trials=20, fail_fast=0)  # half the space
    trials = result.trials
    crashed = trials[trials["status"] == "crashed"]
    assert len(trials) == 20 and 0 < len(crashed) < 20 and (crashed[["f1", "f2"]] == 1000.0).all().all()
    assert (crashed["error_message"] == "RuntimeError: diverged").all()
    assert not set(result.pareto_front["config_id"]) & set(crashed["config_id"])


@pytest.mark.extra("moasha")
def test_moasha_never_continues_a_crashed_trial(tmp_path):
    trials = _search(tmp_path, target=_diverging, strategy="moasha", n_trials=20, fail_fast=0).trials
    assert (trials.loc[trials["status"] == "crashed", "budget"] == 1.0).all()  # it left no checkpoint to continue


@pytest.mark.parametrize("limit", [{"n_trials": 11}, {"n_trials": None, "total_budget": 18}])
def test_the_stopping_rules_hold(tmp_path, strategy, limit):
    budgets = _strategy_search(tmp_path, strategy, **limit).trials["budget"]
    if limit["n_trials"]:
        assert len(budgets) == 11
    else:
        assert budgets.sum() >= 18 and budgets.sum() - budgets.iloc[-1] < 18


def test_a_small_space_is_searched_until_exhausted_without_repeats(tmp_path, strategy):
    space = {"hyperparameters": {"x0": {"type": "categorical", "choices": [0.1, 0.5, 0.9], "key": "x0"}}}
    result = _strategy_search(
        tmp_path, strategy, target=lambda c, s, b: {"f1": c["x0"], "f2": 1 - c["x0"]}, space=space, n_trials=30
    )
    trials = result.trials
    assert not trials.duplicated(["config_id", "budget"]).any() and set(trials["x0"]) == {0.1, 0.5, 0.9}
    assert len(trials) < 30


@pytest.mark.integration
def test_two_dask_workers_run_the_trials(tmp_path, strategy):
    result = _strategy_search(tmp_path, strategy, n_trials=10, n_workers=2)
    trials = result.trials
    assert len(trials) == 10 and (trials["status"] == "success").all()
    assert not trials.duplicated(["config_id", "budget"]).any()


def test_nsga2_breeds_from_the_replayed_trials_of_an_earlier_run():
    settings = SearchSettings(
        ["f1", "f2"], min_budget=1, max_budget=4, n_trials=20, strategy="nsga2", options=OPTIONS["nsga2"], seed=1
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
        ZDT1.objectives, min_budget=1, max_budget=4, n_trials=20, strategy="nsga2", options={"population_size": 3}
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
        SearchSettings(
            ZDT1.objectives,
            min_budget=1,
            max_budget=4,
            n_trials=4,
            strategy="nsga2",
            options={"population_size": value},
        )
    assert str(error.value) == f"search.nsga2.population_size={value!r} must be an integer >= 2"


def test_moasha_without_syne_tune_stops_before_any_trial_with_the_install_line(tmp_path, monkeypatch):
    for name in [name for name in sys.modules if name.split(".")[0] == "syne_tune"] + ["syne_tune"]:
        monkeypatch.setitem(sys.modules, name, None)  # importing it fails as if it were not installed
    monkeypatch.delitem(sys.modules, "fairnas.search.strategies.moasha.strategy", raising=False)
    with pytest.raises(ValueError) as error:
        _search(tmp_path, target=_never_called, strategy="moasha")
    assert str(error.value) == "search.strategy=moasha needs Syne Tune: pip install -e '.[moasha]'"
    assert not (tmp_path / "search").exists()


@pytest.mark.integration
@pytest.mark.parametrize("strategy", registered())
def test_search_py_runs_each_strategy_on_faces(tmp_path, cache_dir, strategy):
    options = [f"search.{strategy}.{key}={value}" for key, value in OPTIONS.get(strategy, {}).items()]
    overrides = [f"search.strategy={strategy}", "search.max_budget=2", "search.total_budget=null", "search.n_trials=2"]
    cfg = search_config(tmp_path, cache_dir, *overrides, "search.final.seeds=1", "search.final.top_k=1", *options)
    result = run_face_search(cfg)
    out = tmp_path / "search"
    trials = pd.read_csv(out / "trials.csv")
    assert len(trials) == 2 and (trials["status"] == "success").all()
    assert (out / "pareto_front.csv").is_file() and any((out / "wandb").glob("offline-run-*"))
    assert len(result.pareto_front) >= 1 and len(result.final.front) == 1
    runs = [json.loads(path.read_text()) for path in out.glob("trials/*/seed0/epochs*/trial.json")]
    assert len(runs) == len(trials)
    for row in trials.itertuples():  # a configuration run again at a higher budget continues its checkpoint
        lower = trials[(trials["config_id"] == row.config_id) & (trials["budget"] < row.budget)]
        run = next(run for run in runs if config_id(run["config"]) == row.config_id and run["budget"] == row.budget)
        assert run["continued_from_epoch"] == (int(lower["budget"].max()) if len(lower) else 0)


@dataclasses.dataclass(frozen=True)
class SweepSettings(Section):
    """``search.sweep``: whether the sweep runs the choices in reverse."""

    reverse: bool = False
    section = "sweep"

    @classmethod
    def checked(cls, values):
        return cls(**values)


class Sweep:
    """A test-only strategy: every choice of a one-categorical space in turn, at max_budget, then none."""

    def __init__(self, configspace: ConfigurationSpace, settings: SearchSettings, context: BuildContext):
        (name,) = list(configspace)
        choices = list(configspace[name].choices)
        self._left = [Proposal({name: value}, settings.max_budget) for value in choices]
        if settings.options.reverse:
            self._left.reverse()
        self.history = context.history

    def ask(self):
        return self._left.pop(0) if self._left else None

    def tell(self, proposal, outcome):
        pass

    def tell_record(self, record):
        pass


@pytest.fixture
def sweep():
    entry = register(Registration("sweep", Sweep, options=SweepSettings, full_budget_only=True))
    yield entry
    del REGISTRY[entry.name]


def test_a_strategy_registered_from_a_test_runs_with_its_own_settings_section(tmp_path, sweep):
    space = {"hyperparameters": {"x0": {"type": "categorical", "choices": [0.1, 0.5, 0.9], "key": "x0"}}}
    mapping = {"objectives": ["f1", "f2"], "min_budget": 1, "max_budget": 4, "n_trials": 9, "final": {"seeds": 0}}
    assert "sweep" in SearchSettings.field_names()
    settings = SearchSettings.from_mapping({**mapping, "strategy": "sweep", "sweep": {"reverse": True}})
    result = run_search(lambda c, s, b: {"f1": c["x0"], "f2": 1 - c["x0"]}, space, settings, output_dir=tmp_path)
    assert result.trials["x0"].tolist() == [0.9, 0.5, 0.1] and (result.trials["budget"] == 4.0).all()
    assert json.loads((tmp_path / "search.json").read_text())["strategy"] == "sweep"
    with pytest.raises(ValueError, match=r"^unknown search.sweep settings \['forward'\]; allowed: \['reverse'\]$"):
        SearchSettings.from_mapping({**mapping, "strategy": "sweep", "sweep": {"forward": True}})


def test_the_docs_table_has_a_row_for_each_registered_strategy():
    page = (Path(__file__).resolve().parents[1] / "docs" / "search_strategies.md").read_text()
    table = page.split("| `search.strategy` |", 1)[1].split("\n\n", 1)[0]
    assert sorted(re.findall(r"^\| `(\w+)`", table, flags=re.MULTILINE)) == sorted(REGISTRY)
