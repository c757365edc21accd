"""Resuming a search after SIGKILL, with every strategy: no finished trial is lost, repeated or re-run."""

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pandas as pd
import pytest

from tests.test_search_strategies import OPTIONS, registered

REPOSITORY = Path(__file__).resolve().parents[1]  # the script imports fairnas.benchmarks from here
SCRIPT = textwrap.dedent(
    """
    import json, sys, time
    from fairnas.benchmarks.analytic import NoisyMultiFidelityProblem
    from fairnas.search import SearchSettings, config_id, run_search

    problem = NoisyMultiFidelityProblem("zdt1", n_variables=3)
    output_dir, calls, strategy = sys.argv[1:4]

    def target(config, seed, budget):
        with open(calls, "a") as log:
            log.write(f"{config_id(config)},{budget}\\n")
        time.sleep(0.15)
        return problem(config, seed, budget)

    options = json.loads(sys.argv[4])
    settings = SearchSettings(problem.objectives, min_budget=1, max_budget=4, n_trials=14, strategy=strategy,
                              options=options, final={"seeds": 0})
    run_search(target, problem.configspace(), settings, output_dir=output_dir)
    """
)
N_TRIALS = 14


def _start(script, output_dir, calls, log, strategy):
    env = {**os.environ, "PYTHONHASHSEED": "0", "PYTHONPATH": str(REPOSITORY)}
    with open(log, "a") as stderr:
        return subprocess.Popen(
            [sys.executable, str(script), str(output_dir), str(calls), strategy, json.dumps(OPTIONS.get(strategy))],
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=stderr,
        )


def _rows(path):
    return len(pd.read_csv(path)) if path.exists() else 0


@pytest.mark.integration
@pytest.mark.parametrize("strategy", registered())
def test_sigkill_mid_search_then_rerun_continues_without_lost_or_repeated_trials(tmp_path, strategy):
    script, output_dir, calls = tmp_path / "search.py", tmp_path / "search", tmp_path / "calls.csv"
    log = tmp_path / "stderr.log"
    script.write_text(SCRIPT)
    trials_csv = output_dir / "trials.csv"

    first = _start(script, output_dir, calls, log, strategy)
    deadline = time.monotonic() + 120
    while _rows(trials_csv) < 5 and first.poll() is None and time.monotonic() < deadline:
        time.sleep(0.05)
    first.send_signal(signal.SIGKILL)
    first.wait()
    before_kill = pd.read_csv(trials_csv)
    assert 5 <= len(before_kill) < N_TRIALS, "the search must be killed mid-way"

    second = _start(script, output_dir, calls, log, strategy)
    assert second.wait(timeout=180) == 0, log.read_text()

    trials = pd.read_csv(trials_csv)
    assert len(trials) == N_TRIALS
    assert not trials.duplicated(["config_id", "budget"]).any() and trials["trial_id"].is_unique
    pd.testing.assert_frame_equal(trials.iloc[: len(before_kill)], before_kill)  # finished trials untouched
    evaluated = pd.read_csv(calls, names=["config_id", "budget"])
    repeated = evaluated[evaluated.duplicated(keep="first")]
    # only the trial running at the kill may run again; finished ones are replayed, not re-run
    assert len(repeated) <= 1
    assert not repeated.merge(before_kill[["config_id", "budget"]]).size
    for name in ("pareto_front.csv", "hypervolume.csv", "pareto_front.png"):
        assert (output_dir / name).is_file()
