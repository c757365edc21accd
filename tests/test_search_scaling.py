"""The search driver's cost per trial does not grow with the trials, and its outputs stay what the driver wrote when
it rewrote them after every trial: trials.csv, pareto_front.csv and hypervolume.csv of a 300-trial random search,
against a golden set recorded from that driver (commit 1fbbea9), with the reference point fixed and derived from the
trials (it moves as they come in)."""

from __future__ import annotations

import dataclasses
import io
import logging

import pandas as pd
import pytest

from fairnas.benchmarks.analytic import NoisyMultiFidelityProblem
from fairnas.search import SearchSettings, run_search
from tests.helpers import assert_matches_golden

ZDT1 = NoisyMultiFidelityProblem("zdt1", n_variables=3)
TIMING = ["wall_time_s", "finished_at"]


@pytest.mark.parametrize("reference", [None, (1.2, 8.0)], ids=["derived", "fixed"])
def test_a_long_search_writes_what_the_rewriting_driver_wrote(tmp_path, reference):
    settings = SearchSettings(
        ZDT1.objectives,
        min_budget=1,
        max_budget=4,
        strategy="random",
        n_trials=300,
        seed=0,
        reference_point=reference,
        final={"seeds": 0},
    )
    run_search(ZDT1, ZDT1.configspace(), settings, output_dir=tmp_path)
    label = "derived" if reference is None else "fixed"
    for name in ("trials", "pareto_front", "hypervolume"):
        frame = pd.read_csv(tmp_path / f"{name}.csv").drop(columns=TIMING, errors="ignore")
        assert_matches_golden(frame, f"long_search_{label}_{name}.csv")


def test_a_trials_line_cut_short_by_a_crash_is_dropped_and_that_trial_runs_again(tmp_path, caplog):
    settings = SearchSettings(
        ZDT1.objectives, min_budget=1, max_budget=4, strategy="random", n_trials=5, seed=0, final={"seeds": 0}
    )
    run_search(ZDT1, ZDT1.configspace(), settings, output_dir=tmp_path / "whole")
    whole = (tmp_path / "whole" / "trials.csv").read_text()
    run_search(ZDT1, ZDT1.configspace(), dataclasses.replace(settings, n_trials=4), output_dir=tmp_path / "cut")
    trials = tmp_path / "cut" / "trials.csv"
    with open(trials, "a") as file:  # the fifth trial's line, as a crash mid-append leaves it
        file.write(whole.splitlines()[5][:25])
    with caplog.at_level(logging.WARNING, logger="fairnas.search"):  # other tests may quiet that logger
        run_search(ZDT1, ZDT1.configspace(), settings, output_dir=tmp_path / "cut")
    assert "dropping its last line, cut short" in caplog.text
    columns = ["trial_id", "config_id", "budget", "seed", "status", *ZDT1.objectives]
    resumed, expected = pd.read_csv(trials), pd.read_csv(io.StringIO(whole))
    pd.testing.assert_frame_equal(resumed[columns], expected[columns])
