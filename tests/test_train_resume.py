"""``resume=auto``: a run killed mid-epoch continues from its last end-of-epoch checkpoint when the same command
runs again, and ends as the uninterrupted run does."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

from fairnas.training.run import train
from tests.conftest import TINY_DATA

REPO = Path(__file__).resolve().parents[1]
# Three epochs, a fixed schedule horizon, and augmentation and dropout draws that a continuation must repeat.
RUN = ["logger=none", "trainer.max_epochs=3", "scheduler.horizon_epochs=3", "data.transforms.hflip=0.5", "dropout=0.3"]


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        (["resume=always"], r"^resume='always'; allowed: null, auto$"),
        (
            ["resume=auto", "resume_from=/runs/a/last.ckpt"],
            r"^resume=auto conflicts with resume_from=/runs/a/last\.ckpt",
        ),
    ],
)
def test_bad_resume_is_one_line_naming_the_key(tiny_config, tmp_path, overrides, message):
    with pytest.raises(ValueError, match=message):
        train(tiny_config(*overrides, output_dir=tmp_path / "run"))
    assert not (tmp_path / "run" / "config.yaml").exists()


@pytest.mark.parametrize(
    "data_path",
    [
        pytest.param(["data.in_memory=true"], id="in_memory"),
        pytest.param(["data.in_memory=false", "data.num_workers=2"], id="file_path_2_workers"),
        pytest.param(["data.in_memory=true", "data.group_sampling.weights={g0:1,g1:3}"], id="group_weighted"),
    ],
)
@pytest.mark.integration
def test_killed_run_resumed_with_auto_equals_the_uninterrupted_run(cache_dir, tmp_path, data_path):
    """All three runs are ``python train.py`` processes: the same command is what a user re-runs, and in-process
    runs could differ from a subprocess in thread settings an earlier test changed (float summation order). With
    persistent DataLoader workers a resumed run once replayed the previous epoch's batches (see the README's
    "Resuming an interrupted run"); the file-path case guards against that."""
    overrides = [*TINY_DATA, f"paths.cache_dir={cache_dir}", *RUN, *data_path, "resume=auto"]
    run, direct = tmp_path / "run", tmp_path / "direct"
    last = run / "checkpoints" / "last.ckpt"
    with open(tmp_path / "stderr.txt", "wb") as stderr:
        process = subprocess.Popen(_command(overrides, run), cwd=tmp_path, stdout=subprocess.DEVNULL, stderr=stderr)
        while process.poll() is None and not last.exists():  # end of epoch 1 of 3
            time.sleep(0.01)
        process.send_signal(signal.SIGKILL)
        process.wait()
    assert process.returncode == -signal.SIGKILL, (tmp_path / "stderr.txt").read_text()
    assert not (run / "metrics.json").exists()
    assert torch.load(last, weights_only=True)["epoch"] < 2  # killed before the last epoch's end

    resumed_log, direct_log = (_run(overrides, folder, tmp_path) for folder in (run, direct))
    assert f"Restoring states from the checkpoint path at {last}" in resumed_log
    assert "Restoring states" not in direct_log  # nothing to resume: the same command starts the run
    resumed, uninterrupted = (json.loads((folder / "metrics.json").read_text()) for folder in (run, direct))
    assert resumed["epochs_trained"] == uninterrupted["epochs_trained"] == 3
    for stage in ("val", "test"):
        assert resumed[stage] == pytest.approx(uninterrupted[stage], rel=1e-5)


def _command(overrides: list[str], run_dir: Path) -> list[str]:
    return [sys.executable, str(REPO / "train.py"), *overrides, f"hydra.run.dir={run_dir}"]


def _run(overrides: list[str], run_dir: Path, cwd: Path) -> str:
    """Run ``python train.py`` to the end; its log (stdout and stderr)."""
    done = subprocess.run(_command(overrides, run_dir), cwd=cwd, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout + done.stderr
