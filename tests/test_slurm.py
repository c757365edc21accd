"""Searches on a real one-node SLURM cluster (tests/slurm_cluster.py): docs/scale.md's commands over TLS (a Dask
scheduler with a scheduler file, an ``sbatch`` array of Dask workers, ``search.py`` pointed at the file),
dask-jobqueue's ``SLURMCluster``, a worker job cancelled mid-trial, and the search driver SIGKILLed and restarted
while the workers run on. Every trial is a one-epoch run on the tiny faces, held at a gate (tests/gate.py) where a
test needs it mid-run. Skipped, with the reason, where SLURM is not installed or cannot start."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pandas as pd
import pytest
import yaml

from tests.gate import waiting
from tests.layouts import write_folders
from tests.slurm_cluster import SlurmCluster, slurm_cluster, unavailable
from tests.test_run_lock import search_command

pytestmark = [pytest.mark.slurm, pytest.mark.integration]
REPO = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent  # the venv's `dask` command
WORKER = (  # docs/scale.md's worker job, every address on 127.0.0.1
    "DASK_DISTRIBUTED__WORKER__DAEMON=False dask worker --scheduler-file {file} {tls}--nthreads 1 --nworkers 1 "
    "--host 127.0.0.1 --no-dashboard"
)


def tls_flags(folder: Path | None) -> list[str]:
    """docs/scale.md's ``$TLS``: the credentials the scheduler and each worker present (none: plain TCP)."""
    if folder is None:
        return []
    return ["--tls-ca-file", f"{folder}/ca.pem", "--tls-cert", f"{folder}/cert.pem", "--tls-key", f"{folder}/key.pem"]


@pytest.fixture(scope="module")
def slurm() -> Iterator[SlurmCluster]:
    reason = unavailable()
    if reason:
        pytest.skip(reason)
    root = Path(tempfile.mkdtemp(prefix="fairnas-slurm-"))  # short: the munge socket path has a length limit
    try:
        with slurm_cluster(root) as cluster:
            yield cluster
    except RuntimeError as error:
        pytest.skip(f"SLURM could not start here: {str(error).splitlines()[0]}")
    finally:
        shutil.rmtree(root, ignore_errors=True)


def _env(**extra: str) -> dict[str, str]:
    path = os.pathsep.join([str(BIN), os.environ.get("PATH", "")])
    return {**os.environ, "PATH": path, "PYTHONPATH": str(REPO), "PYTHONHASHSEED": "0", "OMP_NUM_THREADS": "1", **extra}


@contextlib.contextmanager
def dask_scheduler(folder: Path, tls: Path | None = None) -> Iterator[Path]:
    """``dask scheduler --scheduler-file`` on 127.0.0.1 (as docs/scale.md starts it; with ``tls``, over TLS with the
    credentials in that folder); yields the file."""
    file = folder / "scheduler.json"
    with open(folder / "scheduler.log", "wb") as log:
        scheduler = subprocess.Popen(
            [
                "dask",
                "scheduler",
                "--scheduler-file",
                str(file),
                "--host",
                "127.0.0.1",
                "--port",
                "0",
                "--no-dashboard",
                *(["--protocol", "tls", *tls_flags(tls)] if tls is not None else []),
            ],
            env=_env(),
            stdout=log,
            stderr=subprocess.STDOUT,
        )
    try:
        deadline = time.monotonic() + 120
        while not file.exists():
            assert scheduler.poll() is None and time.monotonic() < deadline, (folder / "scheduler.log").read_text()
            time.sleep(0.2)
        yield file
    finally:
        scheduler.terminate()
        try:
            scheduler.wait(timeout=30)
        except subprocess.TimeoutExpired:
            scheduler.kill()
            scheduler.wait()


def submit_workers(slurm: SlurmCluster, folder: Path, file: Path, n: int = 2, tls: Path | None = None) -> str:
    """docs/scale.md's ``sbatch --array=1-n ... dask worker --scheduler-file [$TLS]``; the array's job id."""
    return slurm.sbatch(
        f"--array=1-{n}",
        "--cpus-per-task=1",
        f"--chdir={folder}",
        f"--output={folder}/worker-%A_%a.out",
        "--wrap",
        WORKER.format(file=file, tls="".join(f"{flag} " for flag in tls_flags(tls))),
        env=_env(),
    )


def wait_for_workers(n: int, security=None, **where: str) -> None:
    from distributed import Client

    with Client(timeout="60s", security=security, **where) as client:
        client.wait_for_workers(n, timeout=300)


def _assert_complete(folder: Path, n_trials: int) -> pd.DataFrame:
    """trials.csv holds every trial once, each a success."""
    trials = pd.read_csv(folder / "trials.csv")
    assert len(trials) == n_trials and (trials["status"] == "success").all(), trials.to_string()
    assert trials["trial_id"].is_unique and not trials.duplicated(["config_id", "budget", "seed"]).any()
    return trials


def _run(command: list[str], folder: Path, log: Path) -> str:
    with open(log, "wb") as out:
        done = subprocess.run(command, cwd=folder, env=_env(), stdout=out, stderr=subprocess.STDOUT, timeout=540)
    assert done.returncode == 0, log.read_text()[-4000:]
    return log.read_text()


@pytest.mark.skipif(shutil.which("openssl") is None, reason="openssl is not installed")
def test_the_documented_commands_run_a_search_on_slurm_workers_over_tls(slurm, tmp_path, cache_dir):
    """docs/scale.md: TLS credentials, a TLS scheduler with a scheduler file, ``sbatch --array=1-2`` worker jobs with
    the same credentials, ``search.py search.dask_scheduler_file=... search.dask_tls=...`` (no n_workers: the two
    workers set the concurrency); every trial runs in a SLURM job, and a client of another authority is refused."""
    from distributed import Client

    from fairnas.search.security import make_credentials, tls_security

    folder, gate = tmp_path / "search", tmp_path / "go"
    tls, stranger = make_credentials(tmp_path / "tls"), make_credentials(tmp_path / "stranger")
    with dask_scheduler(tmp_path, tls) as file:
        array = submit_workers(slurm, tmp_path, file, tls=tls)
        wait_for_workers(2, security=tls_security(tls), scheduler_file=str(file))
        with pytest.raises((OSError, TimeoutError)):  # mutual TLS: no way in without the folder's certificate
            Client(scheduler_file=str(file), security=tls_security(stranger), timeout=5)
        jobs = slurm.running()
        command = search_command(
            folder, gate, cache_dir, f"search.dask_scheduler_file={file}", f"search.dask_tls={tls}", free=99, n_trials=4
        )
        _run(command, tmp_path, tmp_path / "search.log")
    _assert_complete(folder, 4)
    ran_in = [marker["slurm_job"] for marker in waiting(gate)]
    assert len(ran_in) == 4 and set(ran_in) == jobs and len(jobs) == 2, (ran_in, jobs, array)


def test_the_worked_example_searches_folder_faces_with_the_shipped_job_scripts(slurm, tmp_path, cache_dir):
    """docs/scale.md's worked example at its smallest: ``experiment=folders_paper`` on a folder data set, the driver
    job of docs/slurm/search_driver.sbatch (a TLS scheduler and search.py with ``search=paper``) and a worker of
    docs/slurm/dask_workers.sbatch, submitted as shipped; the search's W&B run is left offline for ``wandb sync``."""
    from fairnas.search.security import make_credentials

    data, output = write_folders(tmp_path / "faces"), tmp_path / "search"
    tiny = ["trainer=cpu", "backbone.preset=tiny", "data.batch_size=16", "data.eval_batch_size=64", "embedding_dim=16"]
    tiny += ["data.transforms.image_size=32", "data.transforms.resize=36", f"paths.cache_dir={cache_dir}"]
    env = _env(
        FAIRNAS_DATA=str(data),
        FAIRNAS_TLS=str(make_credentials(tmp_path / "tls")),
        FAIRNAS_SCHEDULER_FILE=str(tmp_path / "scheduler.json"),
        FAIRNAS_NAME="tiny",
        FAIRNAS_REPO=str(REPO),
        FAIRNAS_OUTPUT=str(output),
        FAIRNAS_TRAIN_OVERRIDES=" ".join(tiny),
        FAIRNAS_SCHEDULER_ARGS="--host 127.0.0.1",
        FAIRNAS_WORKER_ARGS="--host 127.0.0.1 --no-dashboard",
        WANDB_MODE="offline",
    )
    budgets = ["search.strategy=random", "search.n_trials=2", "search.min_budget=1", "search.max_budget=1"]
    driver = slurm.sbatch(
        "--cpus-per-task=1",  # the one-node cluster has 2 CPUs: the driver and one worker
        f"--output={tmp_path}/driver.out",
        str(REPO / "docs" / "slurm" / "search_driver.sbatch"),
        *budgets,
        "search.final.seeds=0",
        env=env,
    )
    slurm.sbatch(
        "--array=1-1", f"--output={tmp_path}/worker.out", str(REPO / "docs" / "slurm" / "dask_workers.sbatch"), env=env
    )
    deadline = time.monotonic() + 600
    while driver in slurm.jobs() and time.monotonic() < deadline:
        time.sleep(1)
    slurm.cancel_all()
    log = (tmp_path / "driver.out").read_text()
    trials = _assert_complete(output, 2)
    assert trials["config"].str.contains('"head": "').all() and "search done: 2 trials" in log, log[-3000:]
    trained = yaml.safe_load(next((output / "trials").rglob("config.yaml")).read_text())  # a trial's own config
    assert trained["data"]["root"] == str(data) and trained["data"]["table"]["attribute"] == "gender"
    assert trained["trainer"]["max_epochs"] == 1 and trained["data"]["transforms"]["image_size"] == 32
    assert list((output / "wandb").glob("offline-run-*-summary"))  # what wandb sync uploads


def test_a_search_through_dask_jobqueue_slurmcluster_over_tls(slurm, tmp_path, cache_dir, monkeypatch):
    """docs/scale.md: ``SLURMCluster(..., protocol="tls://", security=cluster_security(folder)).scale(jobs=2)``, then
    ``search.dask_address=cluster.scheduler_address search.dask_tls=folder``; a client of another authority is
    refused."""
    from distributed import Client

    from fairnas.search.security import cluster_security, make_credentials, tls_security

    dask_jobqueue = pytest.importorskip("dask_jobqueue", reason="the slurm extra: pip install -e '.[slurm]'")
    for name, value in _env(SLURM_CONF=slurm.env["SLURM_CONF"]).items():
        monkeypatch.setenv(name, value)
    folder, gate = tmp_path / "search", tmp_path / "go"
    tls, stranger = make_credentials(tmp_path / "tls"), make_credentials(tmp_path / "stranger")
    with dask_jobqueue.SLURMCluster(
        protocol="tls://",
        security=cluster_security(tls),
        cores=1,
        processes=1,
        memory="3GB",  # the nanny restarts a worker above it: torch and a training step need more than 1 GB
        walltime="00:30:00",
        python=sys.executable,
        scheduler_options={"host": "127.0.0.1", "dashboard_address": None},
        worker_extra_args=["--host", "127.0.0.1"],
        job_script_prologue=["export DASK_DISTRIBUTED__WORKER__DAEMON=False"],
        job_extra_directives=[f"--chdir={tmp_path}"],
        log_directory=str(tmp_path / "jobqueue"),
    ) as cluster:
        cluster.scale(jobs=2)
        address = cluster.scheduler_address
        assert address.startswith("tls://127.0.0.1:")
        wait_for_workers(2, security=tls_security(tls), address=address)
        with pytest.raises((OSError, TimeoutError)):  # mutual TLS: no way in without the folder's certificate
            Client(address, security=tls_security(stranger), timeout=5)
        jobs = slurm.running()
        command = search_command(
            folder, gate, cache_dir, f"search.dask_address={address}", f"search.dask_tls={tls}", free=99
        )
        _run(command, tmp_path, tmp_path / "search.log")
    _assert_complete(folder, 3)
    ran_in = {marker["slurm_job"] for marker in waiting(gate)}
    assert ran_in <= jobs and len(jobs) == 2 and None not in ran_in


def test_a_worker_job_cancelled_mid_trial_loses_and_repeats_nothing(slurm, tmp_path, cache_dir):
    """``scancel`` of one worker job while both run a trial: the scheduler moves its trial to the other worker,
    and trials.csv records every trial once, each a success."""
    folder, gate = tmp_path / "search", tmp_path / "go"
    with dask_scheduler(tmp_path) as file:
        submit_workers(slurm, tmp_path, file)
        wait_for_workers(2, scheduler_file=str(file))
        command = search_command(
            folder, gate, cache_dir, "search.n_workers=2", f"search.dask_scheduler_file={file}", n_trials=4
        )
        with open(tmp_path / "search.log", "wb") as log:
            driver = subprocess.Popen(command, cwd=tmp_path, env=_env(), stdout=log, stderr=subprocess.STDOUT)
        try:
            _wait_for(lambda: len(waiting(gate)) >= 2, driver, tmp_path / "search.log")  # both workers mid-trial
            cancelled = waiting(gate)[0]
            job = cancelled["slurm_job"]
            slurm.run("scancel", job)
            _wait_for(lambda: job not in slurm.running(), driver, tmp_path / "search.log")
            gate.touch()
            assert driver.wait(timeout=540) == 0, (tmp_path / "search.log").read_text()[-4000:]
        finally:
            driver.kill()
    trials = _assert_complete(folder, 4)
    run = Path(cancelled["run_dir"])  # <search>/trials/<config id>/seed<s>/epochs<b>
    assert (trials["config_id"] == run.parents[1].name).sum() == 1  # its trial ran again elsewhere, recorded once


def test_the_driver_killed_mid_search_resumes_with_the_workers_still_running(slurm, tmp_path, cache_dir):
    """SIGKILL of ``search.py`` while two trials run on SLURM workers; the same command again, the workers still
    up and those trials still running: every trial recorded once."""
    folder, gate = tmp_path / "search", tmp_path / "go"
    with dask_scheduler(tmp_path) as file:
        submit_workers(slurm, tmp_path, file)
        wait_for_workers(2, scheduler_file=str(file))
        command = search_command(
            folder, gate, cache_dir, "search.n_workers=2", f"search.dask_scheduler_file={file}", free=2, n_trials=4
        )
        log = tmp_path / "first.log"
        with open(log, "wb") as out:
            driver = subprocess.Popen(command, cwd=tmp_path, env=_env(), stdout=out, stderr=subprocess.STDOUT)
        try:
            trials_csv = folder / "trials.csv"
            _wait_for(lambda: len(waiting(gate)) >= 4 and _rows(trials_csv) >= 2, driver, log)
        finally:
            driver.send_signal(signal.SIGKILL)
            driver.wait()
        before = pd.read_csv(trials_csv)
        assert len(before) == 2 and len(slurm.running()) == 2  # the workers run on, two trials held at the gate

        log = tmp_path / "second.log"
        with open(log, "wb") as out:
            second = subprocess.Popen(command, cwd=tmp_path, env=_env(), stdout=out, stderr=subprocess.STDOUT)
        try:
            _wait_for(lambda: "resuming search" in log.read_text(), second, log)
            time.sleep(2)  # its first trials are submitted while the killed driver's still hold the workers
            gate.touch()
            assert second.wait(timeout=540) == 0, log.read_text()[-4000:]
        finally:
            second.kill()
    assert f"took over from host {os.uname().nodename}, pid {driver.pid}" in log.read_text()
    trials = _assert_complete(folder, 4)
    pd.testing.assert_frame_equal(trials.iloc[:2], before)


def _rows(path: Path) -> int:
    try:
        return len(pd.read_csv(path))
    except (OSError, ValueError):
        return 0


def _wait_for(condition, process: subprocess.Popen, log: Path, timeout_s: float = 300) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert process.poll() is None, log.read_text()[-4000:]
        assert time.monotonic() < deadline, f"timed out; {log.read_text()[-4000:]}"
        time.sleep(0.2)
