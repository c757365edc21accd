"""``python search.py``: the face search end to end on tiny synthetic data, and its input checks."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from fairnas import reporting
from fairnas.config import compose_config
from fairnas.tasks.cli import run_cli
from fairnas.tasks.search import run_face_search
from tests.conftest import TINY_DATA
from tests.helpers import assert_matches_golden

REPO = Path(__file__).resolve().parents[1]


def search_config(tmp_path, cache_dir, *overrides, train=()):
    train_overrides = [*TINY_DATA, f"paths.cache_dir={cache_dir}", "logger=none", *train]
    return compose_config(
        "search",
        [
            "search.train_overrides=[" + ",".join(f"'{o}'" for o in train_overrides) + "]",
            "search.min_budget=1",
            "search.max_budget=2",
            "search.name=tiny",
            "search.final.seeds=0",
            *overrides,
        ],
        output_dir=tmp_path / "search",
    )


def test_search_writes_every_output_and_continues_across_fidelities(tmp_path, cache_dir):
    cfg = search_config(tmp_path, cache_dir, "search.total_budget=7", "search.final.top_k=2", "search.final.seeds=2")
    result = run_face_search(cfg)

    out = tmp_path / "search"
    trials = pd.read_csv(out / "trials.csv")
    assert len(trials) == len(result.trials) >= 3
    assert {"error", "rank_disparity", "budget", "seed", "status", "wall_time_s", "op0", "head"} <= set(trials)
    assert (trials["status"] == "success").all()
    assert set(trials["budget"]) == {1.0, 2.0}
    for name in ("pareto_front.csv", "pareto_front.png", "hypervolume.csv", "final_front.csv", "final_trials.csv"):
        assert (out / name).is_file(), name
    assert (out / "smac3").is_dir()
    assert any((out / "wandb").glob("offline-run-*"))

    promoted = [json.loads(p.read_text()) for p in out.glob("trials/*/seed*/epochs2/trial.json")]
    continued = [t for t in promoted if t["continued_from_epoch"] == 1]
    assert continued and all(t["epochs_run"] == 1 for t in continued)
    # A trial validates once, after its last epoch, and skips the test split; the final seeds evaluate it.
    for row in trials.to_dict("records"):
        run = out / "trials" / row["config_id"] / f"seed{row['seed']}" / f"epochs{int(row['budget'])}"
        metrics = json.loads((run / "metrics.json").read_text())
        assert metrics["test"] is None and metrics["val"]["epoch"] == row["budget"]
        assert metrics["val"]["error"] == pytest.approx(row["error"])

    # The final stage: the 2 best full-budget configurations re-trained with 2 fresh seeds each, val and test.
    final_runs = pd.read_csv(out / "final_trials.csv")
    candidates = pd.read_csv(out / "final_candidates.csv")
    assert len(candidates) == min(2, trials[trials["budget"] == 2]["config_id"].nunique())
    assert len(final_runs) == 2 * len(candidates) and (final_runs["status"] == "success").all()
    assert not set(final_runs["seed"]) & set(trials["seed"])  # fresh: not the runs whose results selected them
    final = pd.read_csv(out / "final_front.csv")
    assert len(final) == len(result.final.front) >= 1 and (final["n_seeds"] == 2).all()
    assert {"error_mean", "error_se", "rank_disparity_mean", "rank_disparity_se", "test/error_mean"} <= set(final)
    for row in final_runs.to_dict("records"):
        run_dir = out / "trials" / row["config_id"] / f"seed{row['seed']}" / "epochs2"
        run = json.loads((run_dir / "trial.json").read_text())
        assert run["seed"] == row["seed"] and run["continued_from_epoch"] == 0
        metrics = json.loads((run_dir / "metrics.json").read_text())
        assert metrics["val"]["error"] == pytest.approx(row["error"])
        assert metrics["test"]["error"] == pytest.approx(row["test/error"])
    first = final_runs[final_runs["config_id"] == final["config_id"][0]]
    assert final["error_mean"][0] == pytest.approx(first["error"].mean())
    assert final["error_se"][0] == pytest.approx(first["error"].sem())

    again = run_face_search(cfg)  # a finished search and final stage: read back, nothing trained
    assert len(pd.read_csv(out / "final_trials.csv")) == len(final_runs)
    assert again.final is not None and again.final.front.equals(result.final.front)


@pytest.mark.integration
def test_the_tiny_search_reproduces_the_golden_set(tmp_path, cache_dir):
    """``search.py`` on tiny faces in a fresh process of one thread (an in-process run rounds differently after
    other tests, and other thread counts round differently): the trials and final-stage runs recorded before the
    strategies became a registry, to the last digit."""
    train = [*TINY_DATA, f"paths.cache_dir={cache_dir}", "logger=none"]
    command = [
        sys.executable,
        str(REPO / "search.py"),
        "search.train_overrides=[" + ",".join(f"'{o}'" for o in train) + "]",
    ]
    command += ["search.min_budget=1", "search.max_budget=2", "search.name=tiny", "search.total_budget=7"]
    command += ["search.final.top_k=2", "search.final.seeds=2", f"hydra.run.dir={tmp_path / 'search'}", "logger=none"]
    env = {**os.environ, "PYTHONHASHSEED": "0", "WANDB_MODE": "offline", "OMP_NUM_THREADS": "1"}
    done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=900, cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    timing = ["wall_time_s", "finished_at"]  # the only columns that differ between two runs of one search
    for name in ("trials.csv", "final_trials.csv"):
        trials = pd.read_csv(tmp_path / "search" / name).drop(columns=timing)
        assert_matches_golden(trials, f"tiny_search_{name}")


@pytest.mark.parametrize(
    ("override", "message"),
    [
        ("search.objectives=[error,unfairness]", "unfairness"),
        ("search.min_budget=3", "min_budget"),
        ("search.eta=1", "eta"),
        ("search.space=searchspaces/nope.yaml", "search.space: space file 'searchspaces/nope.yaml' does not exist"),
    ],
)
def test_bad_search_input_fails_before_any_trial(tmp_path, cache_dir, capsys, override, message):
    cfg = search_config(tmp_path, cache_dir, override)
    with pytest.raises(SystemExit) as exit_info:
        run_cli(run_face_search, cfg)
    assert exit_info.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error: ") and message in err[0]
    assert not (tmp_path / "search" / "trials").exists()


def test_a_trial_logger_without_its_package_is_refused_before_any_trial(tmp_path, cache_dir, capsys, monkeypatch):
    """The trials' own loggers (``train_overrides``), not only the search's: without the package each trial would
    crash alike (on a GPU image without wandb all 12 did)."""
    monkeypatch.setitem(reporting.LOGGER_PACKAGES, "CSVLogger", ("no_such_logger_package",))
    cfg = search_config(tmp_path, cache_dir, train=["logger=csv"])
    with pytest.raises(SystemExit) as exit_info:
        run_cli(run_face_search, cfg)
    err = capsys.readouterr().err.strip().splitlines()
    assert exit_info.value.code == 2 and len(err) == 1 and "logger.csv" in err[0] and "no_such_logger_package" in err[0]
    assert not (tmp_path / "search" / "trials").exists()


def test_space_key_missing_from_training_config_is_named(tmp_path, cache_dir, capsys):
    space = tmp_path / "space.yaml"
    space.write_text("hyperparameters:\n  width: {type: integer, lower: 1, upper: 4, key: backbone.width}\n")
    cfg = search_config(tmp_path, cache_dir, f"search.space={space}")
    with pytest.raises(SystemExit):
        run_cli(run_face_search, cfg)
    assert "backbone.width" in capsys.readouterr().err


def test_resuming_with_other_train_overrides_is_refused_before_any_trial(tmp_path, cache_dir, capsys):
    run_face_search(search_config(tmp_path, cache_dir, "search.n_trials=1", "search.total_budget=null"))
    out = tmp_path / "search"
    runs = sorted(out.glob("trials/*/seed*/epochs*"))
    cfg = search_config(tmp_path, cache_dir, "search.n_trials=2", "search.total_budget=null", train=["dropout=0.1"])
    with pytest.raises(SystemExit) as exit_info:
        run_cli(run_face_search, cfg)
    assert exit_info.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "train_overrides" in err[0]
    assert len(pd.read_csv(out / "trials.csv")) == 1 and sorted(out.glob("trials/*/seed*/epochs*")) == runs


def test_a_trial_whose_weights_go_non_finite_at_its_last_step_is_crashed_and_off_the_front(tmp_path, cache_dir):
    """NaN weights after the last optimiser step reach validation: the trial must crash, never score (0, 0)."""
    poison = (
        "+callbacks.poison._target_=tests.helpers.NonFiniteWeightsAtLastStep",
        "+callbacks.poison.head=CosFaceHead",
    )
    result = run_face_search(
        search_config(
            tmp_path,
            cache_dir,
            "search.strategy=random",
            "search.n_trials=4",
            "search.min_budget=1",
            "search.max_budget=1",
            "logger=none",
            train=poison,
        )
    )
    trials = result.trials
    poisoned = trials["head"] == "cosface"
    assert poisoned.any() and (~poisoned).any()
    assert (trials.loc[poisoned, "status"] == "crashed").all() and (trials.loc[~poisoned, "status"] == "success").all()
    assert trials.loc[poisoned, "error_message"].str.startswith("NonFiniteEmbeddingsError: embeddings: ").all()
    assert (trials.loc[poisoned, ["error", "rank_disparity"]] == 1000.0).all().all()
    assert not set(result.pareto_front["config_id"]) & set(trials.loc[poisoned, "config_id"])
