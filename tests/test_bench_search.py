"""fairnas.benchmarks and bench/search_efficiency.py: compute metering, equal-consumed-budget runs of every method,
the summary and the figure, on the analytic and BoTorch problems."""

import dataclasses
import json

import numpy as np
import pandas as pd
import pytest

from bench import search_efficiency, smac_defaults
from bench.comparison.figure import efficiency_figure, volume_on_grid
from bench.comparison.method_summary import format_table, hypervolume_at, summarize
from bench.comparison.methods import DEFAULT_METHODS, METHODS
from bench.comparison.runner import benchmark, run_method
from fairnas.benchmarks import compute_meter as meter
from fairnas.benchmarks.answer_quality import answer
from fairnas.benchmarks.problems import PROBLEMS, analytic_problem, table_problem
from fairnas.search.pareto import non_dominated_mask


def test_retraining_cost_charges_only_the_new_epochs_when_continuing():
    config = {"x0": 0.5}
    continuing, scratch = meter.RetrainingCost(True), meter.RetrainingCost(False)
    assert [continuing(config, 0, budget) for budget in (1, 2, 4)] == [1, 1, 2]
    assert [scratch(config, 0, budget) for budget in (1, 2, 4)] == [1, 2, 4]
    assert continuing(config, 1, 4) == 4  # another seed has no checkpoint to continue
    assert continuing({"x0": 0.6}, 0, 2) == 2


def test_metered_target_stops_starting_calls_at_the_consumed_limit():
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


def test_epochs_trained_charges_each_finished_run_once_from_its_record(tmp_path):
    from fairnas.training.search_target import TRIAL_FILE, trial_dir

    config = {"op0": 3}
    for budget, epochs_run in ((2, 2), (4, 2)):  # the 4-epoch run continued the 2-epoch one
        record = trial_dir(tmp_path, config, 1, budget) / TRIAL_FILE
        record.parent.mkdir(parents=True)
        record.write_text(json.dumps({"epochs_run": epochs_run}))
    trained = search_efficiency.EpochsTrained(tmp_path)
    assert [trained(config, 1, 2), trained(config, 1, 4), trained(config, 1, 4)] == [2, 2, 0]  # read back: free
    assert trained(config, 1, 1) == 0 and trained(config, 0, 2) == 0  # crashed / never trained: no record


def test_smac_full_trains_every_trial_at_the_full_budget_smac_half_from_half_where_smac_starts_lower(tmp_path):
    problem = analytic_problem()  # budgets 1 to 8, eta 2
    full = run_method(problem, "smac_full", seed=0, total_budget=40, run_dir=tmp_path / "full")
    assert (full["budget"] == problem.max_budget).all() and len(full) == 40 // problem.max_budget
    half = run_method(problem, "smac_half", seed=0, total_budget=40, run_dir=tmp_path / "half")
    assert set(half["budget"]) == {4.0, 8.0}
    hyperband = run_method(problem, "smac", seed=0, total_budget=40, run_dir=tmp_path / "hyperband")
    assert hyperband["budget"].min() == problem.min_budget < problem.max_budget


def test_smac_ends_starts_configurations_only_at_the_first_and_the_full_budget(tmp_path):
    problem = analytic_problem()  # budgets 1 to 8, eta 2: brackets start at 1, 2, 4 and 8
    trials = run_method(problem, "smac_ends", seed=0, total_budget=80, run_dir=tmp_path)
    start = trials.groupby("config_id", sort=False)["budget"].min()
    assert list(start.value_counts().sort_index().items()) == [(1.0, 16), (8.0, 5)]  # brackets 0, 3, 0, 3 (cut)
    assert list(trials["budget"][:15]) == [1.0] * 8 + [2.0] * 4 + [4.0] * 2 + [8.0]  # bracket 0: 8 -> 4 -> 2 -> 1
    assert list(trials["budget"][15:19]) == [8.0] * 4  # then the last bracket


def test_the_benchmarks_smac_runs_every_bracket_and_settings_change_a_methods_options_one_by_one(tmp_path):
    problem = analytic_problem()  # budgets 1 to 8, eta 2: brackets start at 1, 2, 4 and 8
    trials = run_method(problem, "smac", seed=0, total_budget=100, run_dir=tmp_path / "smac")
    assert set(trials.groupby("config_id")["budget"].min()) == {1.0, 2.0, 4.0, 8.0}  # the paper's Hyperband
    run_method(problem, "smac", seed=0, total_budget=8, run_dir=tmp_path / "rho", settings={"options": {"rho": 0.5}})
    recorded = json.loads((tmp_path / "rho" / "search" / "search.json").read_text())
    assert (recorded["brackets"], recorded["rho"]) == (None, 0.5)  # the method's every bracket kept


def test_an_interrupted_benchmark_run_resumes_with_its_trials_charged(tmp_path):
    problem = analytic_problem()
    whole = run_method(problem, "smac", seed=0, total_budget=24, run_dir=tmp_path / "whole")

    class Killed(BaseException):  # like SIGKILL: nothing of the search handles it
        pass

    calls = []

    def dying_target(run_dir, continuing, seed):
        target, cost = problem.make_target(run_dir, continuing, seed)

        def call(config, seed, budget):
            if len(calls) == 5:
                raise Killed
            calls.append(budget)
            return target(config, seed, budget)

        return call, cost

    with pytest.raises(Killed):
        run_method(
            dataclasses.replace(problem, make_target=dying_target), "smac", seed=0, total_budget=24, run_dir=tmp_path
        )
    resumed = run_method(problem, "smac", seed=0, total_budget=24, run_dir=tmp_path)
    assert resumed["config_id"].iloc[:5].tolist() == whole["config_id"].iloc[:5].tolist()
    assert resumed["cost"].iloc[:5].tolist() == whole["cost"].iloc[:5].tolist()  # the first invocation's charges
    consumed = resumed["cost"].cumsum().to_numpy()
    assert consumed[-2] < 24 <= consumed[-1] < 24 + problem.max_budget  # one limit over both invocations


@pytest.mark.parametrize(
    "methods",
    [
        ("smac", "smac_scratch", "random"),
        pytest.param(("random", "moasha", "nsga2"), marks=pytest.mark.extra("moasha")),
    ],
)
def test_benchmark_runs_every_method_to_the_same_consumed_budget(tmp_path, methods):
    problem = analytic_problem()
    runs = benchmark(problem, methods=methods, seeds=[0], total_budget=24, work_dir=tmp_path)
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
    if "nsga2" in methods:
        nsga2 = runs[runs["method"] == "nsga2"]  # the first generation: every trial at the maximum budget
        assert (nsga2["budget"] == problem.max_budget).all() and (nsga2["cost"] == nsga2["budget"]).all()


def test_summary_reads_hypervolume_at_the_budget_and_the_budget_to_reach_random():
    curve = lambda method, seed, consumed, volume: pd.DataFrame(  # noqa: E731
        {"method": method, "seed": seed, "consumed_budget": consumed, "hypervolume": volume, "run_wall_time_s": 1.0}
    )
    runs = pd.concat(
        [
            curve("random", 0, [8, 16], [1.0, 2.0]),
            curve("random", 1, [8, 16], [3.0, 4.0]),
            curve("smac", 0, [4, 10, 17], [2.0, 3.5, 9.0]),  # the trial ending at 17 is past the budget
            curve("smac", 1, [4, 16], [0.5, 1.0]),
        ]
    )
    summary = summarize(runs, total_budget=16).set_index("method")
    assert summary.attrs["random_hypervolume"] == pytest.approx(3.0)
    assert summary.loc["random", "hv_mean"] == pytest.approx(3.0)
    assert summary.loc["smac", "hv_mean"] == pytest.approx(2.25)
    assert summary.loc["smac", "hv_std"] == pytest.approx(np.std([3.5, 1.0], ddof=1))
    # random seed 1 reaches 3.0 after 8 epochs, seed 0 never: median over [8, inf]
    assert summary.loc["random", "reached"] == 1 and np.isinf(summary.loc["random", "budget_to_random"])
    assert summary.loc["smac", "reached"] == 1
    # paired by seed: 3.5 - 2.0 and 1.0 - 4.0
    assert summary.loc["smac", "diff_mean"] == pytest.approx(-0.75) and summary.loc["smac", "ahead"] == 1
    assert summary.loc["smac", "diff_sem"] == pytest.approx(np.std([1.5, -3.0], ddof=1) / np.sqrt(2))
    shares = summarize(runs, 16, max_hypervolume=6.0).set_index("method")
    assert shares.loc["random", "share_mean"] == pytest.approx(0.5)
    table = format_table(summarize(runs, 16), analytic_problem(), 16)
    assert "| SMAC | 2.2500 ± 1.2500 |" in table and ">16 (1/2 seeds)" in table
    assert "-0.7500 ± 2.2500 (-0.3 s.e.)" in table


def test_bad_input_fails_before_any_trial(tmp_path):
    problem = analytic_problem()
    with pytest.raises(ValueError, match="unknown methods"):
        benchmark(problem, methods=["hyperband"], seeds=[0], total_budget=24, work_dir=tmp_path)
    with pytest.raises(ValueError, match="below one max-budget trial"):
        benchmark(problem, methods=["random"], seeds=[0], total_budget=4, work_dir=tmp_path)
    assert not any(tmp_path.iterdir())


@pytest.fixture
def momf():
    import fairnas.benchmarks.botorch_problems

    return fairnas.benchmarks.botorch_problems


@pytest.mark.extra("botorch")
@pytest.mark.parametrize("name", ["momf_branin_currin", "momf_park"])
def test_momf_target_minimises_botorchs_maximised_objectives_at_the_budgets_fidelity(momf, name):
    import torch

    target = momf.MomfTarget(name, min_budget=1, max_budget=8)
    problem = momf.PROBLEMS[name](negate=True)  # BoTorch's convention: maximised
    config = {input_name: 0.1 + 0.2 * i for i, input_name in enumerate(target.inputs)}
    assert list(target.configspace()) == list(target.inputs) == [f"x{i}" for i in range(problem.dim - 1)]
    assert [target.fidelity(budget) for budget in (1, 4.5, 8)] == [0.0, 0.5, 1.0]
    direct = problem.evaluate_true(torch.tensor([[*config.values(), 0.5]], dtype=torch.double))[0]
    # negate=True: BoTorch maximises -evaluate_true; minimising its negation gives evaluate_true back
    assert target(config, 0, 4.5) == pytest.approx({"f1": float(direct[0]), "f2": float(direct[1])})
    assert target.reference_point == (0.0, 0.0) and target.max_hypervolume == problem.max_hv
    # signs: random target-fidelity points dominate a good part of the box below the reference point
    from fairnas.search.hypervolume import hypervolume

    inputs = np.random.default_rng(0).random((2000, len(target.inputs)))
    values = [list(target(dict(zip(target.inputs, x, strict=False)), 0, 8).values()) for x in inputs]
    assert 0.8 < hypervolume(np.array(values), target.reference_point) / target.max_hypervolume < 1.05


@pytest.mark.extra("botorch")
@pytest.mark.parametrize("name", ["momf_branin_currin", "momf_park"])
def test_momf_problems_run_every_method_and_report_the_share_of_botorchs_maximum(momf, tmp_path, name):
    problem = PROBLEMS[name]()
    assert problem.reference_point == (0.0, 0.0) and problem.max_hypervolume > 0
    runs = benchmark(problem, methods=["smac", "random", "nsga2"], seeds=[0, 1], total_budget=24, work_dir=tmp_path)
    summary = summarize(runs, 24, problem.max_hypervolume).set_index("method")
    assert (summary["share_mean"] < 1).all() and summary.loc["random", "share_mean"] > 0
    assert "| NSGA-II |" in format_table(summary.reset_index(), problem, 24)


def test_the_figure_has_a_panel_per_problem_with_a_band_per_method(tmp_path):
    problem = analytic_problem()
    runs = benchmark(problem, methods=["random", "nsga2"], seeds=[0, 1], total_budget=24, work_dir=tmp_path)
    labels = {name: method.label for name, method in METHODS.items()}
    figure = efficiency_figure([problem, problem], [runs, runs], [24, 24], labels)
    axes = [axis for axis in figure.axes if axis.get_visible()]
    assert len(axes) == 2 and [line.get_label() for line in axes[0].lines] == ["random search", "NSGA-II"]
    assert len(axes[0].collections) == 2  # the ± s.e. bands
    assert axes[0].lines[0].get_ydata().max() <= 1  # a share of the maximum hypervolume
    figure.savefig(tmp_path / "figure.png", dpi=50)
    grid = np.array([0.0, 8.0, 23.0, 24.0])
    curve = runs[(runs["method"] == "random") & (runs["seed"] == 0)]
    assert volume_on_grid(curve, grid).tolist() == [0.0, *(hypervolume_at(curve, b) for b in grid[1:])]


def test_the_main_writes_the_table_csv_and_figure(tmp_path, capsys):
    search_efficiency.main(
        [
            "--problem",
            "analytic",
            "--seeds",
            "1",
            "--total-budget",
            "16",
            "--methods",
            "random",
            "nsga2",
            "--output",
            str(tmp_path / "runs.csv"),
            "--figure",
            str(tmp_path / "figure.png"),
        ]
    )
    assert "| NSGA-II |" in capsys.readouterr().out
    assert set(pd.read_csv(tmp_path / "runs.csv")["method"]) == {"random", "nsga2"}
    assert (tmp_path / "figure.png").stat().st_size > 0


def test_a_surrogate_problem_prints_no_held_out_quality(tmp_path, capsys):
    """A surrogate's answers are judged at its predicted means: there are no held-out seeds to print a table of."""
    argv = ["--problem", "surrogate_table", "--seeds", "1", "--total-budget", "8", "--methods", "random"]
    search_efficiency.main([*argv, "--work-dir", str(tmp_path)])
    out = capsys.readouterr().out
    assert "true quality of the answer at 8 consumed epochs" in out and "held-out true quality" not in out


@pytest.fixture
def tiny_table(tabular):
    """The folder of the shared tiny table (``tabular`` in tests/conftest.py)."""
    return tabular[1]


def test_the_plain_botorch_loop_is_skipped_on_a_problem_it_cannot_run(tmp_path, capsys):
    problem = analytic_problem()
    runs = benchmark(problem, methods=["random", "reference_full"], seeds=[0], total_budget=16, work_dir=tmp_path)
    assert set(runs["method"]) == {"random"}
    assert "analytic: ['reference_full'] skipped, they run on the BoTorch problems only" in capsys.readouterr().err
    with pytest.raises(ValueError, match="runs on the BoTorch problems only, not on analytic"):
        run_method(problem, "reference_full", seed=0, total_budget=16, run_dir=tmp_path / "reference")


@pytest.mark.extra("moasha")
def test_every_method_searches_the_table(tiny_table, tmp_path):
    problem = table_problem("tiny", tables=tiny_table)
    runs = benchmark(problem, methods=DEFAULT_METHODS, seeds=[0, 1], total_budget=8, work_dir=tmp_path)
    assert set(runs["method"]) == set(DEFAULT_METHODS) and set(runs["budget"]) <= {1.0, 2.0}
    summary = summarize(runs, 8, problem.max_hypervolume).set_index("method")
    assert (summary["share_mean"] > 0).all()  # observed single-seed values may beat the table's front of means
    labels = {name: method.label for name, method in METHODS.items()}
    figure = efficiency_figure([problem], [runs], [8], labels)
    assert figure.axes[0].get_title() == "table:tiny (2 seeds)"


def test_smac_candidates_change_one_thing_and_are_compared_paired_with_the_default(tmp_path):
    defaults = smac_defaults
    from smac import MultiFidelityFacade, Scenario

    scenario = Scenario(analytic_problem().space.configspace, objectives=["f1", "f2"], output_directory=tmp_path)
    with defaults.CANDIDATES["random_share_0.5"].patch():
        assert MultiFidelityFacade.get_random_design(scenario)._probability == 0.5
    with defaults.CANDIDATES["weights_per_proposal"].patch():
        assert MultiFidelityFacade.get_config_selector(scenario)._retrain_after == 1
    with defaults.CANDIDATES["bounds_model_budget"].patch():
        assert isinstance(MultiFidelityFacade.get_runhistory_encoder(scenario), defaults.ModelBudgetBoundsEncoder)
    assert MultiFidelityFacade.get_random_design(scenario)._probability == 0.2  # patched for the run only

    problem = analytic_problem()
    results = pd.concat(
        [
            defaults.run_candidate(problem, name, seeds=[0, 1], total_budget=24, work_dir=tmp_path)
            for name in ("default", "eta_3")
        ]
    )
    assert (tmp_path / "analytic" / "smac" / "seed0" / "consumed.csv").is_file()  # search_efficiency's smac runs
    eta_3 = pd.read_csv(tmp_path / "analytic" / "smac@eta_3" / "seed0" / "consumed.csv")
    assert set(eta_3["budget"]) <= {8 / 3, 8.0}  # Hyperband with eta 3 from 1 to 8 epochs
    comparison = defaults.compare(results, problem.max_hypervolume).set_index("candidate")
    volumes = results.pivot(index="seed", columns="candidate", values="hypervolume")
    assert comparison.loc["eta_3", "diff_mean"] == pytest.approx((volumes["eta_3"] - volumes["default"]).mean())
    assert "| eta_3 |" in defaults.format_comparison(comparison.reset_index(), problem, 24)
    assert "| eta_3: Hyperband eta 3 (2) |" in defaults.verdicts({"analytic": comparison.reset_index()})


def test_a_final_stage_answering_with_the_observed_front_is_judged_on_every_member_it_returns(tmp_path):
    problem = analytic_problem()
    trials = run_method(problem, "default_observed", seed=0, total_budget=120, run_dir=tmp_path / "observed")
    final = trials[trials["stage"] == "final"]
    search = trials[(trials["stage"] == "search") & (trials["budget"] == problem.max_budget)]
    observed = search[non_dominated_mask(search[list(problem.objectives)].to_numpy(dtype=float))]
    returned = answer(trials, problem.objectives, problem.max_budget)
    assert set(returned.index) == set(final.loc[final["in_answer"], "config_id"])
    assert set(returned.index) == set(observed["config_id"]) & set(final["config_id"])  # re-measured, none dropped
    means = run_method(problem, "default", seed=0, total_budget=120, run_dir=tmp_path / "means")
    assert len(answer(means, problem.objectives, problem.max_budget)) <= len(returned)
    runs = benchmark(problem, methods=["default_observed"], seeds=[0], total_budget=120, work_dir=tmp_path / "runs")
    assert set(answer(runs, problem.objectives, problem.max_budget).index) == set(returned.index)
