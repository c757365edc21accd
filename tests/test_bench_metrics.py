"""bench/metrics_speed.py: every method measures the same metrics, and bench/gpu_check.py reads its JSON."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

from bench import gpu_check, metrics_speed
from fairnas.config import compose_config


@pytest.fixture(scope="module")
def row():
    """One size's results of every method, as the benchmark's workers return them."""
    results = {method: metrics_speed.run_one(method, 300, 32, 0, 64, "cpu") for method in metrics_speed.METHODS}
    return {"n": 300, **results}


def test_both_precisions_and_the_naive_method_agree_and_the_table_says_so(row):
    naive, single, half = (row[method]["metrics"] for method in ("naive", "float32", "bfloat16"))
    assert half == single  # exact at both precisions: every key, to the last bit
    assert single["rank"] == pytest.approx(naive["rank"]) and single["error"] == pytest.approx(naive["error"])
    assert 0 < single["error"] < 1
    table = metrics_speed.format_table([row])
    assert table.splitlines()[2].split("|")[-2].strip() == "True"


def test_the_gpu_check_reads_both_precisions_and_their_bounds(row, tmp_path, monkeypatch):
    def fake_run(command, timeout):
        large = {**row, "n": 1_000_000}
        (tmp_path / "metrics_speed.json").write_text(json.dumps([row, large], default=float))

    monkeypatch.setattr(gpu_check, "run", fake_run)
    found = gpu_check.metrics(tmp_path)
    single = found["n300"]["float32"]
    assert single["to_bound"] == pytest.approx(row["float32"]["seconds"] / row["bound_float32"]["seconds"])
    assert found["identical"] is True
    fastest = min(row[precision]["seconds"] for precision in ("float32", "bfloat16"))
    assert found["goal_met"] == (fastest <= gpu_check.GOALS["metrics_1m_seconds"])


def test_the_gpu_check_counts_trials_per_hour_for_each_share_and_names_the_best(tmp_path, monkeypatch):
    commands = []

    def fake_run(command, timeout):
        commands.append(command)
        folder = Path(next(arg for arg in command if arg.startswith("hydra.run.dir=")).split("=", 1)[1])
        folder.mkdir(parents=True)
        share = int(next(arg for arg in command if arg.startswith("search.trials_per_gpu=")).split("=")[1])
        (folder / "trials.csv").write_text("trial_id\n" + "".join(f"{i}\n" for i in range(16)))
        return 100.0 / min(share, 2), ""  # k = 2 halves the wall time, k = 4 gains nothing more

    monkeypatch.setattr(gpu_check, "run", fake_run)
    found = gpu_check.trials_per_gpu(tmp_path)
    assert [(run["trials"], run["k"]) for run in found["runs"]] == [
        (images, share) for images in ("default", "paper_112px") for share in (1, 2, 4)
    ]
    assert found["runs"][1]["trials_per_hour"] == pytest.approx(16 * 3600 / 50)
    assert found["best_k_default"] == 2 and found["best_k_paper_112px"] == 2
    assert all("search.final.seeds=0" in command for command in commands)
    search = compose_config("search", commands[4][2:-1]).search  # the overrides, without search.py and run dir
    assert list(search.train_overrides) == [*gpu_check.GPU_TRIAL, "data.table.image_size=112", "data.transforms.resize=120"]
    assert not compose_config("search", commands[4][2:-1]).get("logger")
    assert len(pd.read_csv(tmp_path / "trials_per_gpu.csv")) == 6
    assert (search.trials_per_gpu, search.n_trials, search.strategy) == (2, 16, "random")
