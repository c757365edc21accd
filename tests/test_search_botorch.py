"""search.strategy=botorch: the same contract as the other strategies, its encoding, fidelity variants and settings.

Every search here keeps BoTorch's acquisition optimiser small (``SMALL``) so a trial's suggestion takes well under a
second on two cores; the settings' defaults are for real searches.
"""

import json
import os
import signal
import subprocess
import sys
import textwrap
import time

import numpy as np
import pandas as pd
import pytest

from fairnas.search import SearchSettings, load_space
from fairnas.search.records import TrialRecord
from fairnas.search.trial import TrialOutcome, config_id
from tests.test_search_loop import SPACES, ZDT1, _check_outputs, _never_called, _search
from tests.test_search_resume import REPOSITORY, _rows
from tests.test_search_strategies import MIXED_SPACE, _mixed_target

pytest.importorskip("botorch", reason="needs the botorch extra: pip install -e '.[botorch]'")

from fairnas.search.encoding import SpaceEncoding
from fairnas.search.strategies.botorch import model as gp
from fairnas.search.strategies.botorch.model import ImputeInactive, OneHotCategoricalKernel
from fairnas.search.strategies.botorch.strategy import BotorchStrategy

pytestmark = pytest.mark.extra("botorch")
SMALL = {"raw_samples": 16, "num_restarts": 2, "mc_samples": 16, "fit_maxiter": 50}
FIDELITIES = ["full", "early_stop", "momf"]


def _botorch(tmp_path, fidelity="full", botorch=None, **overrides):
    options = {"fidelity": fidelity, **SMALL, **(botorch or {})}
    return _search(tmp_path, strategy="botorch", options=options, **overrides)


def _settings(**overrides):
    values = {"min_budget": 1, "max_budget": 4, "n_trials": 20, "strategy": "botorch", "final": {"seeds": 0}}
    values["options"] = {**SMALL, **overrides.pop("botorch", {})}
    return SearchSettings(ZDT1.objectives, **(values | overrides))


def _told(strategy, proposal, target=ZDT1):
    strategy.tell(proposal, TrialOutcome(target(proposal.config, 0, proposal.budget), "success", 1.0))


@pytest.mark.parametrize(
    "fidelity", [pytest.param(f, marks=pytest.mark.slow) if f == "full" else f for f in FIDELITIES]
)  # full (every trial at the maximum budget) is the slowest; the other variants stay in the default suite
def test_each_fidelity_variant_searches_the_analytic_problem(tmp_path, fidelity):
    result = _botorch(tmp_path, fidelity, n_trials=14, final={"top_k": 2, "seeds": 1})
    trials = _check_outputs(result, 14)
    assert result.final is not None and len(result.final.trials) == 2  # the final stage comes with every strategy
    assert (trials["status"] == "success").all() and (trials["seed"] == 0).all()
    budgets = trials.groupby("config_id", sort=False)["budget"].apply(list)
    if fidelity == "full":
        assert (trials["budget"] == 4.0).all()
    elif fidelity == "early_stop":  # one rung at a time, from the first; some configurations stopped early
        assert all(b == [1.0, 2.0, 4.0][: len(b)] for b in budgets)
        assert (budgets.map(len) == 3).any() and (budgets.map(len) < 3).any()
    else:
        assert set(trials["budget"]) <= {1.0, 2.0, 4.0} and 4.0 in set(trials["budget"])
        assert all(b == sorted(set(b)) for b in budgets)  # a configuration only climbs
    assert len(result.pareto_front) >= 1


@pytest.mark.slow
def test_a_search_repeats_itself_with_the_same_seed(tmp_path):
    first = _botorch(tmp_path / "a", "early_stop", n_trials=12).trials
    second = _botorch(tmp_path / "b", "early_stop", n_trials=12).trials
    assert first["config_id"].tolist() == second["config_id"].tolist()
    assert first["budget"].tolist() == second["budget"].tolist()
    other = _botorch(tmp_path / "c", "early_stop", n_trials=12, seed=1).trials
    assert other["config_id"].tolist() != first["config_id"].tolist()


@pytest.mark.parametrize("fidelity", [pytest.param("full", marks=pytest.mark.slow), "early_stop"])
def test_every_hyperparameter_type_and_condition_of_a_space_file(tmp_path, fidelity):
    result = _botorch(tmp_path, fidelity, target=_mixed_target, space=MIXED_SPACE, n_trials=12)
    trials = result.trials
    assert (trials["status"] == "success").all(), trials["error_message"].tolist()  # the target checks each config
    assert trials["lr_adam"].isna().tolist() == (trials["optimizer"] == "sgd").tolist()
    assert trials["lr_sgd"].isna().tolist() == (trials["optimizer"] == "adam").tolist()
    assert set(trials["optimizer"]) == {"adam", "sgd"}


@pytest.mark.slow
def test_the_paper_space_gets_only_valid_conditional_configurations(tmp_path):
    def target(config, seed, budget):
        assert ("lr_adam" in config) == (config["optimizer"] in ("adam", "adamw"))
        assert ("lr_sgd" in config) == (config["optimizer"] == "sgd")
        return {"f1": config["op0"] / 8 + 1 / budget, "f2": config.get("lr_adam", config.get("lr_sgd"))}

    result = _botorch(tmp_path, target=target, space=SPACES / "dpn_paper.yaml", n_trials=8, initial_design_size=3)
    assert (result.trials["status"] == "success").all(), result.trials["error_message"].tolist()


def test_inactive_inputs_are_imputed_in_the_model_as_smac_does():
    encoding = SpaceEncoding(load_space(MIXED_SPACE).configspace)
    columns = {column.name: i for i, column in enumerate(encoding.columns)}
    assert [c.kind for c in encoding.columns] == [
        "discrete",  # blocks: 4 integers
        "continuous",  # depth: 64 integers, log scale
        "continuous",  # dropout
        "categorical",  # optimizer
        "discrete",  # width: ordinal
        "continuous",  # lr_adam
        "continuous",  # lr_sgd
    ]  # the constant is no input
    adam = {
        "backbone": "dpn",
        "blocks": 2,
        "depth": 8,
        "dropout": 0.1,
        "optimizer": "adam",
        "width": 64,
        "lr_adam": 1e-3,
    }
    x = encoding.encode(adam)
    assert x[columns["lr_sgd"]] == -1.0 and x[columns["lr_adam"]] == pytest.approx(0.5)  # log scale
    assert x[columns["width"]] == 1.0 and x[columns["depth"]] == pytest.approx(0.5)
    assert encoding.decode(x) == adam
    # what an optimiser tries: every column in range; the model sees the inactive ones imputed
    import torch

    tried = np.tile(x, (2, 1))
    tried[:, columns["lr_sgd"]] = 0.3
    tried[1, columns["optimizer"]] = 1.0  # sgd: lr_adam inactive, lr_sgd active
    imputed = ImputeInactive(encoding).transform(torch.tensor(tried)).numpy()
    assert imputed[0, columns["lr_sgd"]] == -1.0 and imputed[0, columns["lr_adam"]] == pytest.approx(0.5)
    assert imputed[1, columns["lr_adam"]] == -1.0 and imputed[1, columns["lr_sgd"]] == pytest.approx(0.3)
    assert "lr_adam" not in encoding.decode(tried[1]) and "lr_sgd" in encoding.decode(tried[1])
    inactive_optimizer = encoding.impute(np.array([[*x[:3], 2.0, *x[4:]]]))  # a parent imputed: children follow
    assert inactive_optimizer[0, columns["lr_adam"]] == -1.0


def test_crashed_trials_are_recorded_off_the_front_and_never_continued(tmp_path):
    def target(config, seed, budget):
        if config["x0"] > 0.5:
            raise RuntimeError("diverged")
        return ZDT1(config, seed, budget)

    for crashed in ("worst", "exclude"):
        result = _botorch(tmp_path / crashed, "early_stop", botorch={"crashed": crashed}, target=target, n_trials=16)
        trials = result.trials
        failed = trials[trials["status"] == "crashed"]
        assert (
            len(trials) == 16 and 0 < len(failed) < 16 and (failed["error_message"] == "RuntimeError: diverged").all()
        )
        assert not set(result.pareto_front["config_id"]) & set(failed["config_id"])
        assert (trials.groupby("config_id")["budget"].max()[failed["config_id"]] == failed["budget"].to_numpy()).all()


def test_a_small_space_is_searched_until_exhausted_without_repeats(tmp_path):
    space = {"hyperparameters": {"x0": {"type": "categorical", "choices": [0.1, 0.5, 0.9], "key": "x0"}}}
    result = _botorch(tmp_path, target=lambda c, s, b: {"f1": c["x0"], "f2": 1 - c["x0"]}, space=space, n_trials=30)
    trials = result.trials
    assert not trials.duplicated(["config_id", "budget"]).any() and set(trials["x0"]) == {0.1, 0.5, 0.9}
    assert len(trials) == 3


def test_pending_trials_enter_the_acquisition_and_are_never_proposed_twice(monkeypatch):
    from fairnas.search.strategies.botorch import model

    strategy = BotorchStrategy(ZDT1.configspace(), _settings(initial_design_size=3))
    for _ in range(3):
        _told(strategy, strategy.ask())
    pending = []
    improvement = model.improvement
    monkeypatch.setattr(model, "improvement", lambda *a, **k: pending.append(k["X_pending"]) or improvement(*a, **k))
    first, second, third = strategy.ask(), strategy.ask(), strategy.ask()
    assert pending[0] is None and pending[1].shape == (1, 3) and pending[2].shape == (2, 3)
    assert len({config_id(p.config) for p in (first, second, third)}) == 3
    assert np.allclose(pending[2][0].numpy(), [first.config[f"x{i}"] for i in range(3)])


def test_a_resumed_strategy_starts_from_the_earlier_trials():
    settings = _settings(initial_design_size=2, botorch={"fidelity": "early_stop"})
    earlier = BotorchStrategy(ZDT1.configspace(), settings)
    records = []
    for trial_id in range(8):  # the initial design (2 configurations x 3 rungs), then the model's
        proposal = earlier.ask()
        records.append(
            TrialRecord(
                trial_id,
                proposal.config,
                proposal.budget,
                0,
                TrialOutcome(ZDT1(proposal.config, 0, proposal.budget), "success", 1),
            )
        )
        _told(earlier, proposal)
    resumed = BotorchStrategy(ZDT1.configspace(), settings, history=records)
    following = earlier.ask()
    proposal = resumed.ask()
    assert (proposal.config, proposal.budget) == (following.config, following.budget)  # as if never interrupted
    assert (config_id(proposal.config), proposal.budget) not in {(config_id(r.config), r.budget) for r in records}
    for record in records:  # the loop replays them too: nothing is counted twice
        resumed.tell_record(record)
    assert len(resumed._trials.observations) == len(records)


def test_the_one_hot_hamming_kernel_gives_botorchs_values_and_gradients():
    import torch
    from botorch.models.kernels.categorical import CategoricalKernel

    torch.manual_seed(0)
    x1, x2 = torch.randint(0, 4, (2, 7, 3)).double(), torch.randint(0, 4, (2, 5, 3)).double()
    lengthscale = torch.tensor([[[0.3, 1.0, 4.0]], [[2.0, 0.5, 1.0]]], dtype=torch.double)
    x_outside = x1.clone()
    x_outside[0, 0, 1] = 7.0  # not a choice: compared as BoTorch compares it
    for inputs in [(x1, x2), (x1, x1), (x_outside, x2)]:
        values, grads = [], []
        for kind in (CategoricalKernel, OneHotCategoricalKernel):
            kernel = kind(batch_shape=torch.Size([2]), ard_num_dims=3).double()
            kernel.choices = [[0.0, 1.0, 2.0, 3.0]] * 3
            kernel.lengthscale = lengthscale
            value = kernel.forward(*inputs)
            value.sum().backward()
            values.append(value.detach())
            grads.append(kernel.raw_lengthscale.grad)
            assert torch.allclose(kernel.forward(x1, x1, diag=True), torch.ones(2, 7, dtype=torch.double))
        assert values[0].shape == (2, 7, inputs[1].shape[1]) and torch.allclose(values[0], values[1])
        assert torch.allclose(grads[0], grads[1])
    # a mixed space's model gets it in place of BoTorch's (in its sum and its product kernel)
    encoding = SpaceEncoding(load_space(MIXED_SPACE).configspace)
    X = torch.tensor(encoding.impute(np.array([encoding.encode(c) for c in _mixed_configs(6)])))
    model = gp.fit_model(X, torch.rand(6, 2, dtype=torch.double), encoding, maxiter=5)
    found = [type(k) for k in model.covar_module.modules() if isinstance(k, CategoricalKernel)]
    assert found == [OneHotCategoricalKernel, OneHotCategoricalKernel]


def _mixed_configs(n):
    configspace = load_space(MIXED_SPACE).configspace
    configspace.seed(0)
    return [dict(c) for c in configspace.sample_configuration(n)]


def test_hyperparameters_are_refitted_every_refit_every_suggestions(monkeypatch):
    import torch

    fitted = []  # per suggestion of the model: were the hyperparameters fitted?
    fit = gp.fit_model

    def recording_fit(*args, hyperparameters=None, **kwargs):
        fitted.append(hyperparameters is None)
        return fit(*args, hyperparameters=hyperparameters, **kwargs)

    monkeypatch.setattr(gp, "fit_model", recording_fit)
    settings = _settings(min_budget=4, botorch={"refit_every": 3})
    strategy, records = BotorchStrategy(ZDT1.configspace(), settings), []
    for trial_id in range(12):
        proposal = strategy.ask()
        outcome = TrialOutcome(ZDT1(proposal.config, 0, proposal.budget), "success", 1.0)
        strategy.tell(proposal, outcome)
        records.append(TrialRecord(trial_id, proposal.config, proposal.budget, 0, outcome))
    assert len(fitted) >= 4 and fitted == [i % 3 == 0 for i in range(len(fitted))]
    kept = strategy._fit.hyperparameters
    assert kept is not None and not any(name.startswith("outcome_transform") for name in kept)
    # the kept hyperparameters are set as they are on a model of other data of the space, not fitted again
    X, Y = torch.rand(9, 3, dtype=torch.double), torch.rand(9, 2, dtype=torch.double)
    model = fit(X, Y, strategy._encoding, maxiter=5, hyperparameters=kept)
    assert all(torch.equal(model.state_dict()[name], value) for name, value in kept.items())
    # a resumed strategy fits them at its first suggestion
    fitted.clear()
    BotorchStrategy(ZDT1.configspace(), settings, history=records).ask()
    assert fitted == [True]


def test_the_model_is_fitted_on_at_most_max_observations():
    strategy = BotorchStrategy(ZDT1.configspace(), _settings(botorch={"max_observations": 4}))
    values = [(0.0, 1.0), (1.0, 0.0), (0.5, 0.5), (2, 2), (3, 3), (4, 4), (5, 5), (6, 6)]  # three non-dominated
    for trial_id, (f1, f2) in enumerate(values):
        config = {"x0": trial_id / 10, "x1": 0.5, "x2": 0.5}
        strategy.tell_record(TrialRecord(trial_id, config, 4.0, 0, TrialOutcome({"f1": f1, "f2": f2}, "success", 1)))
    kept = [o.values for o in strategy._data.observations(strategy._trials.observations.values())]
    assert kept == [(1.0, 0.0), (0.5, 0.5), (5, 5), (6, 6)]  # the two best front members by recency, the 2 latest


@pytest.mark.integration
def test_two_dask_workers_run_the_trials(tmp_path):
    result = _botorch(tmp_path, "early_stop", n_trials=10, n_workers=2, initial_design_size=2)
    trials = result.trials
    assert len(trials) == 10 and (trials["status"] == "success").all()
    assert not trials.duplicated(["config_id", "budget"]).any()


RESUME_SCRIPT = textwrap.dedent(
    """
    import sys, time
    from fairnas.benchmarks.analytic import NoisyMultiFidelityProblem
    from fairnas.search import SearchSettings, config_id, run_search

    problem = NoisyMultiFidelityProblem("zdt1", n_variables=3)
    output_dir, calls = sys.argv[1:3]

    def target(config, seed, budget):
        with open(calls, "a") as log:
            log.write(f"{config_id(config)},{budget}\\n")
        time.sleep(0.15)
        return problem(config, seed, budget)

    settings = SearchSettings(problem.objectives, min_budget=1, max_budget=4, n_trials=14, strategy="botorch",
                              initial_design_size=3, final={"seeds": 0},
                              options={"fidelity": "early_stop", "raw_samples": 16, "num_restarts": 2,
                                       "mc_samples": 16, "fit_maxiter": 50})
    run_search(target, problem.configspace(), settings, output_dir=output_dir)
    """
)


@pytest.mark.integration
def test_sigkill_mid_search_then_rerun_continues_without_lost_or_repeated_trials(tmp_path):
    script, output_dir, calls = tmp_path / "search.py", tmp_path / "search", tmp_path / "calls.csv"
    script.write_text(RESUME_SCRIPT)
    trials_csv, log = output_dir / "trials.csv", tmp_path / "stderr.log"
    env = {**os.environ, "PYTHONHASHSEED": "0", "PYTHONPATH": str(REPOSITORY), "OMP_NUM_THREADS": "1"}

    def start():
        with open(log, "a") as stderr:
            command = [sys.executable, str(script), str(output_dir), str(calls)]
            return subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL, stderr=stderr)

    first = start()
    deadline = time.monotonic() + 120
    while _rows(trials_csv) < 7 and first.poll() is None and time.monotonic() < deadline:  # past the initial design
        time.sleep(0.05)
    first.send_signal(signal.SIGKILL)
    first.wait()
    before_kill = pd.read_csv(trials_csv)
    assert 7 <= len(before_kill) < 14, "the search must be killed mid-way"

    assert start().wait(timeout=180) == 0, log.read_text()
    trials = pd.read_csv(trials_csv)
    assert len(trials) == 14 and not trials.duplicated(["config_id", "budget"]).any()
    pd.testing.assert_frame_equal(trials.iloc[: len(before_kill)], before_kill)
    evaluated = pd.read_csv(calls, names=["config_id", "budget"])
    repeated = evaluated[evaluated.duplicated(keep="first")]
    assert len(repeated) <= 1  # only the trial running at the kill may run again
    assert not repeated.merge(before_kill[["config_id", "budget"]]).size


@pytest.mark.parametrize(
    ("botorch", "message"),
    [
        (
            {"fidelity": "hyperband"},
            "search.botorch.fidelity='hyperband' must be one of ['full', 'early_stop', 'momf']",
        ),
        ({"crashed": "zero"}, "search.botorch.crashed='zero' must be one of ['worst', 'exclude']"),
        ({"raw_samples": 0}, "search.botorch.raw_samples=0 must be a positive integer"),
        ({"fit_maxiter": -5}, "search.botorch.fit_maxiter=-5 must be a positive integer"),
        ({"refit_every": 0}, "search.botorch.refit_every=0 must be a positive integer"),
        ({"num_restarts": 2.5}, "search.botorch.num_restarts=2.5 must be a positive integer"),
        ({"mc_samples": "many"}, "search.botorch.mc_samples='many' must be a positive integer"),
        ({"max_observations": 1}, "search.botorch.max_observations=1 must be an integer >= 2"),
        (
            {"raw_samples": 4, "num_restarts": 8},
            "search.botorch.num_restarts (8) must be <= search.botorch.raw_samples (4): the restarts are picked among "
            "the raw samples",
        ),
        (
            {"kernel": "rbf"},
            "unknown search.botorch settings ['kernel']; allowed: ['fidelity', 'max_observations', 'fit_maxiter', "
            "'refit_every', 'raw_samples', 'num_restarts', 'mc_samples', 'crashed']",
        ),
    ],
)
def test_bad_settings_are_named_in_one_line(botorch, message):
    with pytest.raises(ValueError) as error:
        SearchSettings(ZDT1.objectives, min_budget=1, max_budget=4, n_trials=4, strategy="botorch", options=botorch)
    assert str(error.value) == message


def test_a_fidelity_variant_needs_two_budgets():
    with pytest.raises(ValueError, match=r"^search.botorch.fidelity=momf needs search.min_budget < search.max_budget$"):
        SearchSettings(
            ZDT1.objectives, min_budget=4, max_budget=4, n_trials=4, strategy="botorch", options={"fidelity": "momf"}
        )


def test_without_botorch_the_search_stops_before_any_trial_with_the_install_line(tmp_path, monkeypatch):
    for name in [name for name in sys.modules if name.split(".")[0] in ("botorch", "gpytorch")]:
        monkeypatch.setitem(sys.modules, name, None)  # importing it fails as if it were not installed
    monkeypatch.setitem(sys.modules, "botorch", None)
    for name in [name for name in sys.modules if name.startswith("fairnas.search.strategies.botorch.")]:
        monkeypatch.delitem(sys.modules, name)
    with pytest.raises(ValueError) as error:
        _search(tmp_path, target=_never_called, strategy="botorch")
    assert str(error.value) == "search.strategy=botorch needs BoTorch: pip install -e '.[botorch]'"
    assert not (tmp_path / "search").exists()


@pytest.mark.integration
def test_search_py_runs_botorch_on_faces(tmp_path, cache_dir):
    from fairnas.tasks.search import run_face_search
    from tests.test_search_cli import search_config

    overrides = [
        "search.strategy=botorch",
        "search.total_budget=null",
        "search.n_trials=4",
        "+search.initial_design_size=1",
        "search.botorch.fidelity=early_stop",
        *(f"search.botorch.{key}={value}" for key, value in SMALL.items()),
    ]
    result = run_face_search(search_config(tmp_path, cache_dir, *overrides))
    out = tmp_path / "search"
    trials = pd.read_csv(out / "trials.csv")
    assert len(trials) == 4 and (trials["status"] == "success").all()
    assert trials["budget"].tolist()[:2] == [1.0, 2.0] and trials["config_id"][0] == trials["config_id"][1]
    assert (out / "pareto_front.csv").is_file() and any((out / "wandb").glob("offline-run-*"))
    assert len(result.pareto_front) >= 1
    runs = [json.loads(path.read_text()) for path in out.glob("trials/*/seed0/epochs*/trial.json")]
    assert len(runs) == 4
    assert [run["continued_from_epoch"] for run in runs if run["budget"] == 2.0][:1] == [1]  # its checkpoint
