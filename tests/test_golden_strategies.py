"""The search strategies' golden set: each strategy's hypervolume on the first seeds of the analytic problem and of
the noisy table, as ``bench/search_efficiency.py`` measures it, recorded before the benchmarks became a package
and the strategies a registry, and reproduced to the last digit since (the refactor changed no search)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from tests.helpers import assert_matches_golden

REPO = Path(__file__).resolve().parents[1]
STRATEGIES = ("random", "smac", "moasha", "nsga2", "botorch")


def strategy_runs(tmp_path: Path, problem: str, seeds: int, methods: tuple[str, ...], *options: str) -> pd.DataFrame:
    """One row per method and seed (``--runs-output``), floats read back exactly (pandas round-trips them)."""
    runs = tmp_path / f"{problem}_runs.csv"
    command = [sys.executable, str(REPO / "bench" / "search_efficiency.py"), "--problem", problem]
    command += ["--seeds", str(seeds), "--methods", *methods, "--runs-output", str(runs), *options]
    command += ["--output", str(tmp_path / f"{problem}.md"), "--work-dir", str(tmp_path / "work")]
    env = {**os.environ, "PYTHONHASHSEED": "0", "WANDB_MODE": "offline"}
    done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=1800, cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    return pd.read_csv(runs)


@pytest.mark.parametrize(
    ("problem", "methods", "options"),
    [
        ("table", ("random", "nsga2", "smac+final"), ("--total-budget", "96")),
    ],
)
def test_the_strategies_reproduce_the_golden_set_on_seed_0(tmp_path, problem, methods, options):
    """The default suite's share of the golden set: the cheap strategies on the table, seed 0."""
    assert_matches_golden(strategy_runs(tmp_path, problem, 1, methods, *options), f"{problem}_seed0_runs.csv")


@pytest.mark.slow
@pytest.mark.parametrize(
    ("problem", "methods", "options"),
    [
        ("analytic", ("smac", "smac_scratch", "random", "moasha", "nsga2", "botorch"), ()),
        ("table", (*STRATEGIES, "random+final", "smac+final"), ("--total-budget", "96")),
    ],
)
def test_every_strategy_reproduces_the_golden_set_on_3_seeds(tmp_path, problem, methods, options):
    assert_matches_golden(strategy_runs(tmp_path, problem, 3, methods, *options), f"{problem}_runs.csv")
