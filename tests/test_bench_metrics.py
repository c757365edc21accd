"""bench/metrics_speed.py: every method measures the same metrics, and bench/gpu_check.py reads its JSON."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

from bench import gpu_check, metrics_speed
from bench.evidence.gpu_check_report import GOALS
from fairnas.config import compose_config


@pytest.fixture(scope="module")
def row():
    """One size's results of every method, as the benchmark's workers return them."""
    options = metrics_speed.options(["--dim", "32", "--block-size", "64", "--profile"])
    results = {method: metrics_speed.run_one(method, 300, options) for method in metrics_speed.METHODS}
    return {"n": 300, **results}


def test_both_precisions_and_the_naive_method_agree_and_the_table_says_so(row):
    naive, single, half = (row[method]["metrics"] for method in ("naive", "float32", "bfloat16"))
    assert half == single  # exact at both precisions: every key, to the last bit
    assert single["rank"] == pytest.approx(naive["rank"]) and single["error"] == pytest.approx(naive["error"])
    assert 0 < single["error"] < 1
    table = metrics_speed.format_table([row])
    assert table.splitlines()[2].split("|")[-2].strip() == "True"


def test_the_engines_profile_names_the_product_among_their_operations(row):
    operations = row["float32"]["profile"]
    assert len(operations) == metrics_speed.PROFILE_ROWS and "aten::mm" in {op["operation"] for op in operations}
    assert [op["ms"] for op in operations] == sorted((op["ms"] for op in operations), reverse=True)
    assert "profile" not in row["bound_float32"] and "profile" in row["bfloat16"]


def test_a_separable_set_ranks_better_and_the_table_marks_untimed_bounds(row):
    options = metrics_speed.options(["--dim", "32", "--noise-scale", "2.0", "--block-size", "64"])
    separable = {method: metrics_speed.run_one(method, 300, options) for method in metrics_speed.PRECISIONS}
    assert separable["float32"]["metrics"] == separable["bfloat16"]["metrics"]
    assert separable["float32"]["metrics"]["error"] < row["float32"]["metrics"]["error"]
    table = metrics_speed.format_table([{"n": 300, "naive": None, **separable}])
    assert table.splitlines()[2].split("|")[5:7] == ["         - ", "          - "]


def test_the_gpu_check_reads_both_precisions_and_their_bounds_on_both_sets(row, tmp_path, monkeypatch):
    def fake_run(command, timeout):
        path = Path(command[command.index("--output") + 1])
        if command[1] == "bench/identity_max_speed.py":
            assert command[command.index("--images") + 1] == "1000000"
            pd.DataFrame({"way": ["index_reduce (the engine)"], "ms/block": [15.0], "equal": [True]}).to_csv(path)
            return
        if "--noise-scale" in command:  # the separable set: engines only, at 1M
            rows = [{"n": 1_000_000, **{precision: row[precision] for precision in metrics_speed.PRECISIONS}}]
        else:  # the hard set at 100k only
            assert command[command.index("--sizes") + 1 :][:2] == ["100000", "--profile"]
            rows = [row]
        path.write_text(json.dumps(rows, default=float))

    monkeypatch.setattr(gpu_check, "run", fake_run)
    found = gpu_check.metrics(tmp_path)
    single = found["hard_n300"]["float32"]
    assert single["to_bound"] == pytest.approx(row["float32"]["seconds"] / row["bound_float32"]["seconds"])
    assert single["profile"] == row["float32"]["profile"] and "bound_s" not in found["separable_n1000000"]["float32"]
    assert found["identical"] is True
    fastest = min(row[precision]["seconds"] for precision in ("float32", "bfloat16"))
    assert found["goal_met_separable"] == (fastest <= GOALS["metrics_1m_seconds"])
    assert "goal_met_hard" not in found  # judged at 1M only
    assert found["identity_max"][0]["way"] == "index_reduce (the engine)"


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
    assert [(run["trials"], run["k"]) for run in found["runs"]] == [  # both kinds at each k, then the next k
        (images, share) for share in (1, 2, 4) for images in ("default", "paper_112px")
    ]
    assert found["runs"][2]["trials_per_hour"] == pytest.approx(16 * 3600 / 50)
    assert found["best_k_default"] == 2 and found["best_k_paper_112px"] == 2
    assert all("search.final.seeds=0" in command for command in commands)
    search = compose_config("search", commands[3][2:-1]).search  # the overrides, without search.py and run dir
    assert list(search.train_overrides) == [
        *gpu_check.GPU_TRIAL,
        "data.table.image_size=112",
        "data.transforms.resize=120",
    ]
    assert not compose_config("search", commands[3][2:-1]).get("logger")
    assert len(pd.read_csv(tmp_path / "trials_per_gpu.csv")) == 6
    assert (search.trials_per_gpu, search.n_trials, search.strategy) == (2, 16, "random")
