"""One writer per run folder (fairnas/run_lock.py): a second process on a folder is refused with one line and
changes nothing; a folder whose holder was SIGKILLed is taken over without clean-up; nesting and re-entry in one
process work. The command-line cases run real ``search.py`` and ``train.py`` processes, held mid-run at a gate
(tests/gate.py) while the second process tries the folder."""

from __future__ import annotations

import json
import logging
import os
import re
import signal
import socket
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pandas as pd
import pytest

from fairnas.run_lock import HOLDER_FILE, LOCK_FILE, RunFolderBusy, discard_if_unused, run_folder_lock
from tests.conftest import TINY_DATA
from tests.gate import waiting

REPO = Path(__file__).resolve().parents[1]
HOLD = textwrap.dedent(
    """
    import sys, time
    from pathlib import Path
    from fairnas.run_lock import run_folder_lock

    with run_folder_lock(sys.argv[1]):
        Path(sys.argv[2]).touch()
        time.sleep(600)
    """
)
BUSY = r"^error: (?P<folder>/\S+) is in use by another process \(host (?P<host>\S+), pid (?P<pid>\d+), started \S+\); "


def _env() -> dict[str, str]:
    return {**os.environ, "PYTHONHASHSEED": "0", "PYTHONPATH": str(REPO), "OMP_NUM_THREADS": "1"}


def _hold_in_subprocess(folder: Path, tmp_path: Path) -> subprocess.Popen:
    held = tmp_path / "held"
    holder = subprocess.Popen([sys.executable, "-c", HOLD, str(folder), str(held)], env=_env())
    deadline = time.monotonic() + 60
    while not held.exists():
        assert holder.poll() is None and time.monotonic() < deadline, "the holder did not start"
        time.sleep(0.05)
    return holder


def _snapshot(folder: Path) -> dict[str, tuple[int, int]]:
    return {str(p.relative_to(folder)): (p.stat().st_size, p.stat().st_mtime_ns) for p in folder.rglob("*")}


def test_a_held_folder_refuses_a_second_process_and_a_killed_holder_is_taken_over(tmp_path, caplog):
    folder = tmp_path / "run"
    holder = _hold_in_subprocess(folder, tmp_path)
    record = json.loads((folder / HOLDER_FILE).read_text())
    assert record["pid"] == holder.pid and record["host"] == socket.gethostname() and "started" in record
    before = _snapshot(folder)
    with pytest.raises(RunFolderBusy) as busy, run_folder_lock(folder):
        pass
    message = str(busy.value)
    assert "\n" not in message and f"{folder} is in use by another process (host {record['host']}, " in message
    assert f"pid {holder.pid}, started {record['started']})" in message
    assert _snapshot(folder) == before  # the refused process changed nothing
    assert not discard_if_unused(folder, set()) and folder.is_dir()  # a held folder is never cleaned up

    holder.send_signal(signal.SIGKILL)
    holder.wait()
    with caplog.at_level(logging.INFO, logger="fairnas.run_lock"), run_folder_lock(folder):
        assert json.loads((folder / HOLDER_FILE).read_text())["pid"] == os.getpid()
    assert f"took over from host {record['host']}, pid {holder.pid}" in caplog.text
    assert not (folder / HOLDER_FILE).exists() and (folder / LOCK_FILE).exists()  # a clean end leaves no record


def test_reentry_nesting_and_a_failed_start_in_one_process(tmp_path):
    outer = tmp_path / "search"
    with run_folder_lock(outer), run_folder_lock(outer):  # re-entry (the Hydra callback and the task function)
        with run_folder_lock(outer / "trials" / "a"):  # a nested run folder
            pass
        (outer / "result.csv").write_text("x\n")
    assert not (outer / HOLDER_FILE).exists()
    with pytest.raises(RunFolderBusy), run_folder_lock(outer):  # released: taken again, and the body's error passes
        raise RunFolderBusy("bad input")
    assert (outer / "result.csv").exists()  # a folder with results is kept

    fresh = tmp_path / "new" / "run"
    with pytest.raises(ValueError, match="bad input"), run_folder_lock(fresh):
        raise ValueError("bad input")
    assert not (tmp_path / "new").exists()  # a failed start leaves no folder behind


def test_a_nested_run_folder_waits_for_its_holder_instead_of_refusing(tmp_path):
    """A trial of a search whose earlier driver was killed may still run on a Dask worker: the new driver's trial
    waits for it to end."""
    outer, inner = tmp_path / "search", tmp_path / "search" / "trials" / "a"
    with run_folder_lock(outer):
        pass  # leaves outer/.fairnas.lock: inner is nested
    holder = _hold_in_subprocess(inner, tmp_path)
    threading.Timer(1.0, holder.kill).start()
    start = time.monotonic()
    with run_folder_lock(inner):
        assert holder.poll() is not None and time.monotonic() - start >= 0.9


def test_a_ddp_rank_other_than_zero_takes_no_lock(tmp_path, monkeypatch):
    folder = tmp_path / "run"
    holder = _hold_in_subprocess(folder, tmp_path)
    try:
        monkeypatch.setenv("LOCAL_RANK", "1")  # Lightning re-runs the command for rank 1 in the same folder
        with run_folder_lock(folder):
            pass
        monkeypatch.setenv("LOCAL_RANK", "0")
        with pytest.raises(RunFolderBusy), run_folder_lock(folder):
            pass
    finally:
        holder.kill()
        holder.wait()


# ---------------------------------------------------------------------------------------------- real commands


def search_command(
    folder: Path, gate: Path, cache_dir: Path, *settings: str, free: int = 0, n_trials: int = 3
) -> list[str]:
    """``python search.py`` of ``n_trials`` one-epoch random-search trials on the tiny faces into ``folder``, each
    trial held at ``gate`` (tests/gate.py) unless fewer than ``free`` trials reached it before; more ``settings``."""
    train = [
        *TINY_DATA,
        f"paths.cache_dir={cache_dir}",
        "logger=none",
        "+callbacks.gate._target_=tests.gate.Gate",
        f"+callbacks.gate.path={gate}",
        f"+callbacks.gate.free={free}",
    ]
    return [
        sys.executable,
        str(REPO / "search.py"),
        "search.train_overrides=[" + ",".join(f"'{o}'" for o in train) + "]",
        "search.strategy=random",
        f"search.n_trials={n_trials}",
        "search.total_budget=null",
        "search.min_budget=1",
        "search.max_budget=1",
        "search.final.seeds=0",
        "logger=none",
        *settings,
        f"hydra.run.dir={folder}",
    ]


def _train_command(folder: Path, gate: Path, cache_dir: Path) -> list[str]:
    return [
        sys.executable,
        str(REPO / "train.py"),
        *TINY_DATA,
        f"paths.cache_dir={cache_dir}",
        "logger=none",
        "trainer.max_epochs=3",
        "resume=auto",
        "+callbacks.gate._target_=tests.gate.Gate",
        f"+callbacks.gate.path={gate}",
        "+callbacks.gate.epoch=1",  # after epoch 0's checkpoint
        f"hydra.run.dir={folder}",
    ]


def _start(command: list[str], log: Path, cwd: Path) -> subprocess.Popen:
    with open(log, "wb") as out:
        return subprocess.Popen(command, cwd=cwd, env=_env(), stdout=out, stderr=subprocess.STDOUT)


def _wait_at_gate(process: subprocess.Popen, gate: Path, log: Path, count: int = 1) -> None:
    deadline = time.monotonic() + 300
    while len(waiting(gate)) < count:
        assert process.poll() is None, log.read_text()[-3000:]
        assert time.monotonic() < deadline, "the run never reached the gate"
        time.sleep(0.1)


def _refused(command: list[str], folder: Path, holder: subprocess.Popen, cwd: Path) -> None:
    """The same command again while ``holder`` runs: one ``error:`` line naming the folder and holder, exit 2, and
    the folder exactly as it was."""
    before = _snapshot(folder)
    second = subprocess.run(command, cwd=cwd, env=_env(), capture_output=True, text=True, timeout=300)
    lines = second.stderr.strip().splitlines()
    assert second.returncode == 2 and len(lines) == 1, second.stderr[-3000:]
    match = re.match(BUSY, lines[0])
    assert match and Path(match["folder"]) == folder.resolve(), lines[0]
    assert (match["host"], int(match["pid"])) == (socket.gethostname(), holder.pid)
    assert _snapshot(folder) == before  # .hydra/, the job log, the lock record: untouched


@pytest.mark.integration
def test_two_searches_on_one_folder_the_second_refuses_and_the_first_loses_nothing(tmp_path, cache_dir):
    folder, gate = tmp_path / "search", tmp_path / "go"
    command = search_command(folder, gate, cache_dir)
    first = _start(command, tmp_path / "first.log", tmp_path)
    try:
        _wait_at_gate(first, gate, tmp_path / "first.log")  # the first trial is training
        _refused(command, folder, first, tmp_path)
        gate.touch()
        assert first.wait(timeout=300) == 0, (tmp_path / "first.log").read_text()[-3000:]
    finally:
        first.kill()
    trials = pd.read_csv(folder / "trials.csv")
    assert len(trials) == 3 and (trials["status"] == "success").all()
    assert trials["trial_id"].is_unique and not trials.duplicated(["config_id", "budget"]).any()
    assert len(list(folder.glob("trials/*/seed*/epochs1/trial.json"))) == 3


@pytest.mark.integration
def test_two_train_resume_auto_on_one_folder_the_second_refuses_and_the_first_finishes(tmp_path, cache_dir):
    folder, gate = tmp_path / "run", tmp_path / "go"
    command = _train_command(folder, gate, cache_dir)
    first = _start(command, tmp_path / "first.log", tmp_path)
    try:
        _wait_at_gate(first, gate, tmp_path / "first.log")  # epoch 0 done, its checkpoint written
        _refused(command, folder, first, tmp_path)
        gate.touch()
        assert first.wait(timeout=300) == 0, (tmp_path / "first.log").read_text()[-3000:]
    finally:
        first.kill()
    assert json.loads((folder / "metrics.json").read_text())["epochs_trained"] == 3
    assert not (folder / HOLDER_FILE).exists()


@pytest.mark.integration
def test_a_search_killed_by_sigkill_is_taken_over_and_resumed_without_clean_up(tmp_path, cache_dir):
    folder, gate = tmp_path / "search", tmp_path / "go"
    command = search_command(folder, gate, cache_dir, free=1)  # the first trial passes, the second waits
    first = _start(command, tmp_path / "first.log", tmp_path)
    try:
        _wait_at_gate(first, gate, tmp_path / "first.log", count=2)
    finally:
        first.send_signal(signal.SIGKILL)
        first.wait()
    before = pd.read_csv(folder / "trials.csv")
    assert len(before) == 1 and (folder / HOLDER_FILE).exists()

    gate.touch()
    second = subprocess.run(command, cwd=tmp_path, env=_env(), capture_output=True, text=True, timeout=300)
    assert second.returncode == 0, second.stderr[-3000:]
    assert f"{folder.resolve()}: took over from host {socket.gethostname()}, pid {first.pid}" in second.stdout
    trials = pd.read_csv(folder / "trials.csv")
    assert len(trials) == 3 and trials["trial_id"].is_unique and not trials.duplicated(["config_id", "budget"]).any()
    pd.testing.assert_frame_equal(trials.iloc[:1], before)


@pytest.mark.integration
def test_a_train_killed_by_sigkill_resumes_with_auto_without_clean_up(tmp_path, cache_dir):
    folder, gate = tmp_path / "run", tmp_path / "go"
    command = _train_command(folder, gate, cache_dir)
    first = _start(command, tmp_path / "first.log", tmp_path)
    try:
        _wait_at_gate(first, gate, tmp_path / "first.log")
    finally:
        first.send_signal(signal.SIGKILL)
        first.wait()
    assert (folder / HOLDER_FILE).exists() and not (folder / "metrics.json").exists()

    gate.touch()
    second = subprocess.run(command, cwd=tmp_path, env=_env(), capture_output=True, text=True, timeout=300)
    assert second.returncode == 0, second.stderr[-3000:]
    assert f"{folder.resolve()}: took over from host {socket.gethostname()}, pid {first.pid}" in second.stdout
    assert "Restoring states from the checkpoint path" in second.stderr
    assert json.loads((folder / "metrics.json").read_text())["epochs_trained"] == 3
