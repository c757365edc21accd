"""The fairness blackbox (:mod:`fairnas.benchmarks.blackbox`) as its users call it: the names it promises, one
simulated run per (configuration, seed), the truth as the mean of many runs, the table's identities, canonical
configurations, the bounds, one-line errors, the version a result cites, the real table in ``table`` mode; and Syne
Tune's simulator running its own schedulers on it (:mod:`fairnas.benchmarks.syne_tune_blackbox`)."""

from __future__ import annotations

import copy
import importlib
import json
import math
import sys

import numpy as np
import pandas as pd
import pytest
from ConfigSpace import Configuration
from threadpoolctl import threadpool_limits

from fairnas.benchmarks.blackbox import COLUMNS, FairnessBlackbox, load_blackbox, table_hash
from fairnas.benchmarks.tables import TABLES, load_table

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


def fairest(blackbox: FairnessBlackbox) -> dict:
    """The table's configuration whose predicted validation rank gap is smallest against its noise: a fair one,
    where rank disparity is the absolute value of a gap that is often either sign."""
    surrogate = blackbox.surrogate
    mean, sd = surrogate.channel_moments(blackbox.configs())
    gap = surrogate.modelled.channels.index("val/rank_gap")
    return blackbox.configs()[int(np.argmin(np.abs(mean[:, -1, gap]) / sd[:, -1, gap]))]


def test_the_mean_is_what_runs_report_on_average_fair_configurations_and_clipping_included(blackbox):
    """``mean()`` of every objective within 3 s.e. of the average of 1,000 seeds' ``query()``, for a learning
    configuration, a fair one (its rank gap's mean well inside its noise: rank disparity is a folded normal's, not
    the gap's mean clipped at 0), one that barely learns (group errors clipped at 1) and an SGD one."""
    fair = fairest(blackbox)
    mean, sd = blackbox.surrogate.channel_moments([fair])
    gap = blackbox.surrogate.modelled.channels.index("val/rank_gap")
    assert abs(mean[0, -1, gap]) < sd[0, -1, gap]  # near-zero rank disparity: the gap crosses 0 between seeds
    poor = {"op0": 0, "op1": 0, "op2": 0, "head": "cosface", "optimizer": "adamw", "lr_adam": 3e-3, "group_alpha": 0.0}
    sgd = {"op0": 4, "op1": 2, "op2": 6, "head": "arcface", "optimizer": "sgd", "lr_sgd": 0.3, "group_alpha": 1.0}
    for config in (DEFAULT_DPN, fair, poor, sgd):
        runs = pd.DataFrame([blackbox.query(config, 4, seed) for seed in range(1000)])
        truth = pd.Series(blackbox.mean(config, 4))
        standard_error = runs.std() / np.sqrt(len(runs))
        # a share whose 1,000 runs all lie at a bound (1) has s.e. 0 and a mean within 1e-6 of the bound
        assert ((runs.mean() - truth).abs() <= 3 * standard_error + 1e-6).all(), pd.DataFrame(
            {"average": runs.mean(), "mean": truth, "z": (runs.mean() - truth) / standard_error}
        )
    assert (pd.DataFrame([blackbox.query(fair, 4, seed) for seed in range(200)])["val/rank_disparity"] > 0).all()


def test_every_run_keeps_the_tables_identities(blackbox):
    """As in every row of the real table: error is the mean of the groups' errors, disparity their gap; so is the
    mean's error (the mean of a mean), while the mean's disparity is the runs' mean gap, at least the gap of the
    means."""
    configspace = copy.deepcopy(blackbox.configspace)
    configspace.seed(1)
    configs = [blackbox.checked(config) for config in configspace.sample_configuration(30)]
    runs = pd.DataFrame(
        [blackbox.query(config, epoch, seed) for config in configs for epoch in (1, 4) for seed in (0, 7)]
    )
    means = pd.DataFrame(blackbox.mean(configs, 4))
    for split in ("val", "test"):
        groups = runs[[f"{split}/error/g0", f"{split}/error/g1"]]
        assert np.array_equal(runs[f"{split}/error"], groups.mean(axis=1))
        assert np.array_equal(runs[f"{split}/disparity"], (groups.iloc[:, 0] - groups.iloc[:, 1]).abs())
        mean_groups = means[[f"{split}/error/g0", f"{split}/error/g1"]]
        assert np.allclose(means[f"{split}/error"], mean_groups.mean(axis=1), rtol=0, atol=1e-12)
        assert (means[f"{split}/disparity"] >= (mean_groups.iloc[:, 0] - mean_groups.iloc[:, 1]).abs() - 1e-12).all()
    table = load_table("dpn_paper_sampled")[0]
    assert np.allclose(table["val/error"], table[["val/error/g0", "val/error/g1"]].mean(axis=1), rtol=0, atol=1e-12)


def test_a_configuration_is_canonical_so_a_csv_round_trip_gives_the_same_run(blackbox):
    """``op0=5.0`` (what a CSV or a float-typed sampler gives back) is the operation 5: the same run and the same
    mean as ``op0=5``, and the same configuration from ``checked``; ``5.5``, ``"5"`` and ``True`` are no operation."""
    as_float = {**DEFAULT_DPN, "op0": 5.0, "op1": np.float64(0.0), "op2": np.int64(1), "group_alpha": 0}
    as_int = {**DEFAULT_DPN, "op0": 5}
    assert blackbox.checked(as_float) == blackbox.checked(as_int)
    assert type(blackbox.checked(as_float)["op0"]) is int and type(blackbox.checked(as_float)["group_alpha"]) is float
    assert blackbox.query(as_float, 4, seed=2) == blackbox.query(as_int, 4, seed=2)
    assert blackbox.mean(as_float, 4) == blackbox.mean(as_int, 4)
    for value in (5.5, "5", True):
        with pytest.raises(ValueError, match=rf"^op0={value!r} is outside the space: allowed: 0, 1, 2"):
            blackbox.query({**DEFAULT_DPN, "op0": value}, 4)


@pytest.mark.parametrize("config", [[3, 0, 1], "op0=3", None, 3, ("op0", 3)])
def test_a_configuration_that_is_not_a_mapping_is_refused_in_one_line(blackbox, config):
    """Not Python's own ``dict()`` error: one line saying what a configuration is, naming what was given (``mean``,
    which also takes a list of configurations, names the list's first item that is not one)."""
    given = config[0] if isinstance(config, (list, tuple)) else config
    asks = {"query": (lambda: blackbox.query(config, 4), config), "checked": (lambda: blackbox.checked(config), config)}
    asks["mean"] = (lambda: blackbox.mean(config, 4), given)
    for ask, named in asks.values():
        with pytest.raises(
            ValueError, match=r"^a configuration is a mapping of hyperparameter names to values"
        ) as error:
            ask()
        assert "\n" not in str(error.value) and str(error.value).endswith(f"not {type(named).__name__} {named!r}")
    with pytest.raises(
        ValueError, match=r"^a configuration is a mapping .* or a non-empty list of them, not list \[\]$"
    ):
        blackbox.mean([], 4)


def test_the_mean_of_many_configurations_is_each_ones_and_is_computed_once(blackbox):
    configspace = copy.deepcopy(blackbox.configspace)
    configspace.seed(2)
    configs = [blackbox.checked(config) for config in configspace.sample_configuration(12)]
    together = blackbox.mean(configs, 3)
    assert together == [blackbox.mean(config, 3) for config in configs] and len(together) == 12
    known = len(blackbox.surrogate._expectations)
    blackbox.mean(configs[::-1], 2)
    assert len(blackbox.surrogate._expectations) == known  # cached per configuration, every epoch at once


def test_every_load_records_the_version_results_cite(blackbox):
    """The table's hash (its shipped bytes), the surrogate's version and family, the libraries the fit depends on
    and the fitted model's fingerprint; the citation is one line."""
    version = blackbox.version
    assert version["table"] == "dpn_paper_sampled" and version["mode"] == "surrogate"
    assert version["table_sha256"] == table_hash(TABLES, "dpn_paper_sampled") and len(version["table_sha256"]) == 64
    assert version["surrogate_version"] == 2 and version["family"] == "ensemble"
    import sklearn

    assert version["libraries"]["scikit-learn"] == sklearn.__version__ and "numpy" in version["libraries"]
    assert len(version["fingerprint"]) == 64 and version["matches_reference"] in (True, False)
    if version["libraries"]["scikit-learn"] == "1.9.1" and version["libraries"]["numpy"] == "2.4.6":
        assert version["matches_reference"]  # the fit of the versions docs/blackbox.md was measured with
    assert "\n" not in blackbox.citation and version["table_sha256"][:12] in blackbox.citation


def test_a_configuration_costs_its_own_seconds(blackbox):
    """Modelled from the table's ``run_seconds`` (31-155 s a run): three 5x5 operations (6-8) cost more than
    three 1x1 ones (0-2), and a run's seconds accrue over its epochs."""
    cheap = {**DEFAULT_DPN, "op0": 0, "op1": 1, "op2": 2}
    dear = {**DEFAULT_DPN, "op0": 6, "op1": 7, "op2": 8}
    assert blackbox.cost(dear, 4) > 1.3 * blackbox.cost(cheap, 4)
    assert blackbox.cost(cheap, 2) == pytest.approx(blackbox.cost(cheap, 4) / 2)
    assert 20 < blackbox.cost(cheap, 4) < 160


@pytest.fixture(scope="module")
def real_table() -> FairnessBlackbox:
    return load_blackbox(mode="table")


def test_the_real_table_is_a_blackbox_of_the_same_api(real_table, blackbox):
    """``table`` mode: the same space, fidelities and objectives; a query answers a configuration and seed the table
    trained with its recorded row; the mean is the mean over its seeds; the cost its recorded seconds; nothing is
    fitted."""
    assert real_table.surrogate is None and real_table.mode == "table"
    assert (real_table.objectives, real_table.fidelities) == (blackbox.objectives, blackbox.fidelities)
    assert (
        real_table.version["table_sha256"] == blackbox.version["table_sha256"] and "libraries" not in real_table.version
    )
    table = load_table("dpn_paper_sampled")[0]
    assert set(COLUMNS) - {"<hyperparameter>", "<split>/<metric>"} <= set(table.columns)
    row = table[(table["epoch"] == 3) & (table["seed"] == 1)].iloc[7]
    config = json.loads(row["config"])
    assert real_table.seeds(config) == [0, 1]
    assert real_table.query(config, 3, seed=1) == {name: row[name] for name in real_table.objectives}
    runs = table[(table["config_id"] == row["config_id"]) & (table["epoch"] == 3)]
    assert real_table.mean(config, 3) == pytest.approx(runs[list(real_table.objectives)].mean().to_dict())
    assert real_table.cost(config, 4, seed=1) == pytest.approx(row["run_seconds"])
    assert len(real_table.configs()) == 337
    as_float = {**config, **{key: float(value) for key, value in config.items() if key in ("op0", "op1", "op2")}}
    assert real_table.query(as_float, 3, seed=1) == real_table.query(config, 3, seed=1)  # canonical here too


def test_the_real_table_refuses_a_configuration_or_seed_it_lacks_in_one_line(real_table):
    config = real_table.configs()[0]
    with pytest.raises(
        ValueError,
        match=r"^seed 2 was not trained for configuration [0-9a-f]{12} in dpn_paper_sampled; its seeds: \[0, 1\]$",
    ):
        real_table.query(config, 4, seed=2)
    with pytest.raises(
        ValueError,
        match=r"^configuration [0-9a-f]{12} is not in the table dpn_paper_sampled, which answers only for its 337 ",
    ):
        real_table.query({**DEFAULT_DPN, "lr_adam": 0.00123}, 4)
    with pytest.raises(ValueError, match=r"^unknown blackbox mode 'tabular'; allowed: \['surrogate', 'table'\]$"):
        load_blackbox(mode="tabular")
    top5 = load_blackbox("dpn_paper_top5", mode="table")
    seeds = [top5.seeds(config) for config in top5.configs()]
    assert sum(len(found) == 5 for found in seeds) == 85 and all(found[:2] == [0, 1] for found in seeds)


def test_bench_blackbox_speed_times_every_operation(blackbox):
    from bench import blackbox_speed

    timings = blackbox_speed.measure(configs=3, refit=False)
    assert list(timings.columns) == ["wall_ms", "cpu_ms"] and len(timings) == 8 and (timings >= 0).all().all()
    assert timings.loc["mean, cached configuration", "cpu_ms"] < timings.loc["mean, new configuration", "cpu_ms"]


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
        assert row[ELAPSED_TIME] == pytest.approx(blackbox.cost(config, int(row[fidelity]), seed=0))
    # Syne Tune's own interface: every epoch at once, or one
    config = rows.iloc[0]
    sampled = {key.removeprefix("config_"): value for key, value in config.items() if key.startswith("config_")}
    curve = adapted.objective_function(sampled)
    assert curve.shape == (4, len(blackbox.objectives) + 1)
    assert adapted.objective_function(sampled, fidelity=2) == dict(zip(adapted.objectives_names, curve[1], strict=True))
