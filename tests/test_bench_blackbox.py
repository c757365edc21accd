"""The fairness blackbox (:mod:`fairnas.benchmarks.blackbox`) as its users call it: the names it promises, one
simulated run per (configuration, seed), the truth as the mean of many runs, the bounds, one-line errors; and Syne
Tune's simulator running its own schedulers on it (:mod:`fairnas.benchmarks.syne_tune_blackbox`)."""

from __future__ import annotations

import copy
import importlib
import math
import sys

import numpy as np
import pandas as pd
import pytest
from ConfigSpace import Configuration
from threadpoolctl import threadpool_limits

from fairnas.benchmarks.blackbox import FairnessBlackbox, load_blackbox

DEFAULT_DPN = {
    "op0": 3,
    "op1": 0,
    "op2": 1,
    "head": "cosface",
    "optimizer": "adamw",
    "lr_adam": 3e-3,
    "group_alpha": 0.0,
}
"""The default DPN of ``experiment=showcase`` in the paper space: a configuration that learns (error near 0.5)."""
METRICS = ("error", "rank_disparity", "disparity", "error/g0", "error/g1")


@pytest.fixture(scope="module", autouse=True)
def one_openmp_thread():
    """scikit-learn's gradient boosting on one OpenMP thread, as the suite's workers run it (tests/conftest.py): on
    busy cores its default threads made the fit 15 times slower here (docs/blackbox.md, "Limits")."""
    with threadpool_limits(limits=1, user_api="openmp"):
        yield


@pytest.fixture(scope="module")
def blackbox(one_openmp_thread) -> FairnessBlackbox:
    return load_blackbox()


def test_the_blackbox_names_its_space_fidelities_and_objectives(blackbox):
    assert load_blackbox() is blackbox  # fitted once per process
    assert blackbox.name == "dpn_paper_sampled"
    assert blackbox.fidelity_name == "epoch" and blackbox.fidelities == (1, 2, 3, 4)
    assert blackbox.objectives == tuple(f"{split}/{metric}" for split in ("val", "test") for metric in METRICS)
    assert sorted(blackbox.configspace) == sorted([*DEFAULT_DPN, "lr_sgd"])
    assert 5 < blackbox.epoch_seconds < 30  # the table's median run of 57 s over 4 epochs
    for answer in (blackbox.query(DEFAULT_DPN, 4, seed=0), blackbox.mean(DEFAULT_DPN, 4)):
        assert list(answer) == list(blackbox.objectives)
        assert all(isinstance(value, float) and math.isfinite(value) for value in answer.values())


def test_a_run_is_the_same_for_the_same_configuration_and_seed_and_differs_between_seeds(blackbox):
    first = [blackbox.query(DEFAULT_DPN, epoch, seed=3) for epoch in blackbox.fidelities]
    assert [blackbox.query(DEFAULT_DPN, epoch, seed=3) for epoch in reversed(blackbox.fidelities)] == first[::-1]
    other = blackbox.query(DEFAULT_DPN, 4, seed=4)
    assert all(other[name] != first[-1][name] for name in blackbox.objectives)
    # the same configuration in other clothes: a ConfigSpace Configuration, an int where the space has a float
    as_configuration = Configuration(blackbox.configspace, values=DEFAULT_DPN)
    assert blackbox.query(as_configuration, 4, seed=3) == first[-1]
    assert blackbox.query({**DEFAULT_DPN, "group_alpha": 0}, 4.0, seed=3) == first[-1]


def test_the_mean_is_the_average_of_many_seeds_and_a_run_s_epochs_move_together(blackbox):
    runs = pd.DataFrame(
        [
            {"seed": seed, "epoch": epoch, **blackbox.query(DEFAULT_DPN, epoch, seed)}
            for seed in range(1000)
            for epoch in (3, 4)
        ]
    )
    last = runs[runs["epoch"] == 4].set_index("seed")[list(blackbox.objectives)]
    mean = pd.Series(blackbox.mean(DEFAULT_DPN, 4))
    standard_error = last.std() / np.sqrt(len(last))
    assert (last.std() > 0).all()
    assert ((last.mean() - mean).abs() <= 4 * standard_error).all(), pd.DataFrame(
        {"average": last.mean(), "mean": mean}
    )
    before = runs[runs["epoch"] == 3].set_index("seed")
    assert np.corrcoef(before["val/error"], last["val/error"])[0, 1] > 0.5  # a learning curve, not fresh noise
    assert np.corrcoef(last["val/error"], last["test/error"])[0, 1] > 0.5  # one run's splits move together


def test_every_value_lies_in_its_range(blackbox):
    configspace = copy.deepcopy(blackbox.configspace)  # the shared one's generator stays as it is
    configspace.seed(0)
    configs = configspace.sample_configuration(60)
    values = pd.DataFrame(
        [blackbox.query(config, epoch, seed) for config in configs for epoch in blackbox.fidelities for seed in (0, 1)]
    )
    assert np.isfinite(values.to_numpy()).all()
    for split in ("val", "test"):
        shares = values[[f"{split}/{metric}" for metric in METRICS if metric != "rank_disparity"]]
        assert ((shares >= 0) & (shares <= 1)).all().all()
        assert (values[f"{split}/rank_disparity"] >= 0).all()
    means = pd.DataFrame([blackbox.mean(config, 4) for config in configs])
    assert (means[[f"val/{metric}" for metric in METRICS if metric != "rank_disparity"]] <= 1).all().all()
    assert means["val/error"].std() > 0.05  # the space spreads the configurations


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"width": 64}, r"^unknown hyperparameter 'width'; dpn_paper_sampled has \['group_alpha', 'head'"),
        ({"op0": 9}, r"^op0=9 is outside the space: allowed: 0, 1, 2, 3, 4, 5, 6, 7, 8$"),
        ({"head": "resnet"}, r"^head='resnet' is outside the space: allowed: cosface, arcface, magface$"),
        ({"lr_adam": 0.5}, r"^lr_adam=0.5 is outside the space: allowed: 0.0001 to 0.01 \(log scale\)$"),
        (
            {"lr_sgd": 0.1},
            r"^'lr_sgd' is inactive in this configuration \(lr_sgd \| optimizer == 'sgd'\); leave it out$",
        ),
        ({"lr_adam": None}, r"^the configuration lacks 'lr_adam' \(allowed: 0.0001 to 0.01 \(log scale\)\)$"),
        ({"epoch": 5}, r"^epoch 5 is not a fidelity of dpn_paper_sampled; allowed: \[1, 2, 3, 4\]$"),
        ({"epoch": 2.5}, r"^epoch 2.5 is not a fidelity"),
        ({"seed": -1}, r"^seed=-1 must be a non-negative integer \(a training seed\)$"),
    ],
)
def test_a_bad_query_stops_with_one_line_naming_what_is_allowed(blackbox, change, message):
    config = {**DEFAULT_DPN, **{key: value for key, value in change.items() if key not in ("epoch", "seed")}}
    config = {key: value for key, value in config.items() if value is not None}
    epoch, seed = change.get("epoch", 4), change.get("seed", 0)
    asks = [lambda: blackbox.query(config, epoch, seed)]
    if "seed" not in change:  # the mean takes no seed
        asks.append(lambda: blackbox.mean(config, epoch))
    for ask in asks:
        with pytest.raises(ValueError, match=message) as error:
            ask()
        assert "\n" not in str(error.value)


def test_an_unknown_table_is_refused_with_the_tables_there():
    with pytest.raises(ValueError, match=r"^no table 'nope' in .*; the tables there: \[.*'dpn_paper_sampled'"):
        load_blackbox("nope")


def test_the_syne_tune_adapter_names_its_extra_where_syne_tune_is_missing(monkeypatch):
    monkeypatch.setitem(sys.modules, "syne_tune", None)  # what an import finds where the package is not installed
    monkeypatch.delitem(sys.modules, "fairnas.benchmarks.syne_tune_blackbox", raising=False)
    with pytest.raises(
        ImportError, match=r"^fairnas.benchmarks.syne_tune_blackbox needs Syne Tune: pip install -e '\.\[moasha\]'$"
    ):
        importlib.import_module("fairnas.benchmarks.syne_tune_blackbox")


@pytest.mark.extra("moasha")
@pytest.mark.parametrize("scheduler", ["asha", "moasha"])
def test_syne_tune_s_simulator_runs_its_schedulers_on_the_blackbox(blackbox, scheduler, tmp_path, monkeypatch):
    from syne_tune import StoppingCriterion, Tuner
    from syne_tune.backend.simulator_backend.simulator_callback import SimulatorCallback
    from syne_tune.blackbox_repository import UserBlackboxBackend
    from syne_tune.optimizer.baselines import ASHA
    from syne_tune.optimizer.schedulers.multiobjective.moasha import MOASHA

    from fairnas.benchmarks.syne_tune_blackbox import ELAPSED_TIME, SyneTuneBlackbox

    monkeypatch.setenv("SYNETUNE_FOLDER", str(tmp_path))  # where the Tuner writes its results
    np.random.seed(0)  # Syne Tune samples configurations and brackets from NumPy's global generator
    adapted = SyneTuneBlackbox(blackbox)
    fidelity = adapted.fidelity_name()
    rungs = {"time_attr": fidelity, "max_t": 4, "grace_period": 1, "reduction_factor": 2, "random_seed": 0}
    if scheduler == "asha":
        chosen = ASHA(adapted.configuration_space, metric="val/error", **rungs)
    else:
        chosen = MOASHA(adapted.configuration_space, metrics=["val/error", "val/rank_disparity"], **rungs)
    results = SimulatorCallback()
    Tuner(
        trial_backend=UserBlackboxBackend(adapted, elapsed_time_attr=ELAPSED_TIME),
        scheduler=chosen,
        stop_criterion=StoppingCriterion(max_num_trials_finished=30),
        n_workers=4,
        sleep_time=0,
        callbacks=[results],
        tuner_name=f"blackbox-{scheduler}",
        save_tuner=False,
    ).run()

    rows = results.dataframe()
    reached = rows.groupby("trial_id")[fidelity].agg(["min", "max", "count"])
    assert len(reached) >= 30
    assert (reached["min"] == 1).all() and (reached["count"] == reached["max"]).all()  # every epoch, from the first
    assert (reached["max"] == 4).sum() >= 3 and (reached["max"] < 4).sum() >= 5  # some finish, some are stopped
    for _, row in rows.sample(40, random_state=0).iterrows():
        sampled = {key.removeprefix("config_"): value for key, value in row.items() if key.startswith("config_")}
        config = blackbox.checked(sampled, drop_inactive=True)
        expected = blackbox.query(config, int(row[fidelity]), seed=0)
        assert {name: row[name] for name in blackbox.objectives} == pytest.approx(expected, rel=1e-12)
        assert row[ELAPSED_TIME] == pytest.approx(row[fidelity] * blackbox.epoch_seconds)
    # Syne Tune's own interface: every epoch at once, or one
    config = rows.iloc[0]
    sampled = {key.removeprefix("config_"): value for key, value in config.items() if key.startswith("config_")}
    curve = adapted.objective_function(sampled)
    assert curve.shape == (4, len(blackbox.objectives) + 1)
    assert adapted.objective_function(sampled, fidelity=2) == dict(zip(adapted.objectives_names, curve[1], strict=True))
