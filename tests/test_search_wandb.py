"""Reporting a search to W&B: one offline run per trial in the search's group, and a summary run."""

import json
import re
import time
from pathlib import Path

import pandas as pd
import pytest

from fairnas.benchmarks.analytic import NoisyMultiFidelityProblem
from fairnas.config import compose_config
from fairnas.search import SearchSettings, run_search
from fairnas.tasks.search import log_progress, report_search, summary_report

ZDT1 = NoisyMultiFidelityProblem("zdt1", n_variables=3)
SETTINGS = SearchSettings(
    objectives=ZDT1.objectives, min_budget=1, max_budget=4, strategy="random", n_trials=3, final={"seeds": 0}
)


@pytest.fixture(scope="module")
def result(tmp_path_factory):
    return run_search(ZDT1, ZDT1.configspace(), SETTINGS, output_dir=tmp_path_factory.mktemp("search"))


def test_offline_run_directories_hold_trials_and_the_pareto_table(result, monkeypatch):
    monkeypatch.delenv("WANDB_MODE", raising=False)  # offline is the default
    report_search(compose_config("search", ["search.name=zdt1-demo"], output_dir=result.output_dir), result, SETTINGS)
    wandb_dir = result.output_dir / "wandb"
    runs = sorted(path.name for path in wandb_dir.glob("offline-run-*"))
    assert len(runs) == 4 and sum(name.endswith("-summary") for name in runs) == 1
    summary = next(wandb_dir.glob("offline-run-*-summary"))
    tables = {
        re.sub(r"_\d+_[0-9a-f]+\.table\.json$", "", path.name): path
        for path in summary.glob("files/media/table/*.table.json")
    }
    assert set(tables) == {"pareto_front", "trials", "hypervolume_curve", "trials_scatter_table"}
    assert b"wandb/scatter/v0" in next(summary.glob("run-*.wandb")).read_bytes()  # a native scatter plot
    front = json.loads(tables["pareto_front"].read_text())
    assert len(front["data"]) == len(result.pareto_front) and {"f1", "f2", "config_id"} <= set(front["columns"])
    assert list(summary.glob("files/media/images/pareto_scatter_*.png"))


def test_logger_none_writes_nothing(result):
    before = set(result.output_dir.rglob("*"))
    report_search(compose_config("search", ["logger=none"], output_dir=result.output_dir), result, SETTINGS)
    assert set(result.output_dir.rglob("*")) == before


def test_the_front_and_hypervolume_reach_wandb_as_each_trial_finishes(tmp_path, monkeypatch):
    monkeypatch.delenv("WANDB_MODE", raising=False)
    cfg = compose_config("search", ["search.name=zdt1-live"], output_dir=tmp_path)
    fronts_logged, progresses = [], []

    def fronts_so_far() -> int:
        return len(list(tmp_path.glob("wandb/offline-run-*-summary/files/media/table/pareto_front_*.table.json")))

    with summary_report(cfg, tmp_path) as report:

        def observe(progress):
            log_progress(report, progress)
            fronts_logged.append((progress.curve_row["n_trials"], fronts_so_far()))
            progresses.append(progress)

        result = run_search(ZDT1, ZDT1.configspace(), SETTINGS, output_dir=tmp_path, on_trial=observe)
    assert fronts_logged == [(1, 1), (2, 2), (3, 3)]  # written while the search ran, one front per finished trial
    pd.testing.assert_frame_equal(progresses[-1].pareto_front, result.pareto_front, check_dtype=False)
    curve = pd.read_csv(tmp_path / "hypervolume.csv").iloc[-1]
    assert progresses[-1].curve_row == pytest.approx({name: curve[name] for name in progresses[-1].curve_row})
    history = _written_history(next(tmp_path.glob("wandb/offline-run-*-summary/run-*.wandb")), b"consumed_budget", 3)
    assert history.count(b"hypervolume") >= 3 and history.count(b"consumed_budget") >= 3


def _written_history(path: Path, record: bytes, count: int, timeout_s: float = 30.0) -> bytes:
    """The offline run file once it holds ``count`` ``record``s: wandb-core (0.31) can return from ``finish()``
    before its writer has flushed the file, as seen on two loaded cores."""
    deadline = time.monotonic() + timeout_s
    while (history := path.read_bytes()).count(record) < count and time.monotonic() < deadline:
        time.sleep(0.2)
    return history
