"""n_workers=2 on a local Dask cluster: trials run in two non-daemonic worker processes; an existing scheduler: as
many trials at once as its workers have threads, and a wrong address or a missing scheduler file named in one line
before anything is written."""

import functools
import itertools
import json
import multiprocessing
import os
import socket
import threading
import time

import pandas as pd
import pytest

from fairnas.benchmarks.analytic import NoisyMultiFidelityProblem
from fairnas.search import SearchSettings, parallel, run_search
from fairnas.search.parallel import open_pool

ZDT1 = NoisyMultiFidelityProblem("zdt1", n_variables=3)


def zdt1_settings(**overrides):
    return SearchSettings(
        ZDT1.objectives, min_budget=1, max_budget=4, final={"seeds": 0}, **{"n_workers": 2, **overrides}
    )


def _recording_target(config, seed, budget, *, log_dir, seconds=0.3):
    start = time.time()
    time.sleep(seconds)
    process = multiprocessing.current_process()
    (log_dir / f"{os.getpid()}-{start}").write_text(f"{process.daemon},{start},{time.time()}")
    environ = {key: os.environ.get(key) for key in ("OMP_NUM_THREADS", "MALLOC_TRIM_THRESHOLD_")}
    (log_dir.parent / f"environ-{os.getpid()}.json").write_text(json.dumps(environ))
    return ZDT1(config, seed, budget)


@pytest.mark.integration
def test_two_local_dask_workers_evaluate_trials_concurrently(tmp_path, monkeypatch):
    # as an earlier Dask cluster of this process leaves it (its nanny writes its start variables here)
    monkeypatch.setenv("MALLOC_TRIM_THRESHOLD_", "65536")
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)  # unpinned: the workers share the cores
    hash_seed_before = os.environ.get("PYTHONHASHSEED")
    log_dir = tmp_path / "calls"
    log_dir.mkdir()
    result = run_search(
        functools.partial(_recording_target, log_dir=log_dir),
        ZDT1.configspace(),
        zdt1_settings(n_trials=8),
        output_dir=tmp_path / "search",
    )
    trials = pd.read_csv(tmp_path / "search" / "trials.csv")
    assert len(trials) == 8 and (trials["status"] == "success").all()
    assert not trials.duplicated(["config_id", "budget"]).any() and set(result.trials["budget"]) <= {1.0, 2.0, 4.0}
    calls = [(path.name.split("-")[0], *path.read_text().split(",")) for path in log_dir.iterdir()]
    assert len(calls) == 8
    assert len({pid for pid, *_ in calls}) == 2 and str(os.getpid()) not in {pid for pid, *_ in calls}
    assert all(daemon == "False" for _, daemon, _, _ in calls)  # DataLoader workers may start
    intervals = sorted((float(start), float(end)) for _, _, start, end in calls)
    assert any(next_start < end for (_, end), (next_start, _) in itertools.pairwise(intervals))
    # the cores shared by the workers, and glibc's own memory trimming: Dask's MALLOC_TRIM_THRESHOLD_=65536 trains
    # 2x slower
    environ = [json.loads(path.read_text()) for path in tmp_path.glob("environ-*.json")]
    share = str(max(1, parallel.available_cores() // 2))  # the machine's cores shared by the 2 workers
    assert environ and all(value == {"OMP_NUM_THREADS": share, "MALLOC_TRIM_THRESHOLD_": None} for value in environ)
    # this process's environment is given back as it was
    assert os.environ["MALLOC_TRIM_THRESHOLD_"] == "65536" and "OMP_NUM_THREADS" not in os.environ
    assert os.environ.get("PYTHONHASHSEED") == hash_seed_before  # Dask's nanny writes 6640 over an unset or 0


@pytest.fixture(scope="module")
def external_scheduler():
    import dask
    from distributed import LocalCluster

    with (
        dask.config.set({"distributed.worker.daemon": False}),
        LocalCluster(n_workers=2, threads_per_worker=1, dashboard_address=":0") as cluster,
    ):
        yield cluster.scheduler_address


def _torch_threads():
    import torch

    return torch.get_num_threads()


@pytest.mark.integration
def test_a_call_alone_on_a_local_pool_trains_with_every_core_the_others_with_a_workers_share(monkeypatch):
    """A stage of one run (e.g. a study's sweep of one model) is not held to one worker's share of the cores, unless
    the environment pins the threads (as runs compared across pools do)."""
    cores = 4  # as on a machine of 4 cores, so that a share (2) and every core differ on any machine
    monkeypatch.setattr(parallel, "available_cores", lambda: cores)
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    with open_pool(2) as pool:
        pool.submit("shared", _torch_threads)
        assert pool.next_finished() == ("shared", 2, None)
        pool.submit("alone", _torch_threads, alone=True)
        assert pool.next_finished() == ("alone", cores, None)
        pool.submit("after", _torch_threads)  # either worker: its own share again
        assert pool.next_finished() == ("after", 2, None)
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    with open_pool(2) as pool:
        pool.submit("pinned", _torch_threads, alone=True)
        assert pool.next_finished() == ("pinned", 1, None)


def _visible_devices_and_threads() -> tuple[str, int]:
    import torch

    return os.environ.get("CUDA_VISIBLE_DEVICES", ""), torch.get_num_threads()


@pytest.mark.integration
def test_trials_per_gpu_pins_that_many_local_workers_to_each_visible_gpu(monkeypatch):
    """Two trials per GPU on a machine seen as two GPUs ("3" and "5", as CUDA_VISIBLE_DEVICES names them): four
    one-thread workers, two seeing only device 3 and two only device 5, each with a quarter of the cores."""
    monkeypatch.setattr(parallel, "visible_gpus", lambda: ["3", "5"])
    monkeypatch.setattr(parallel, "available_cores", lambda: 8)
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    with open_pool(1, trials_per_gpu=2) as pool:
        assert pool.capacity == 4
        seen = pool._client.run(_visible_devices_and_threads)
    assert sorted(seen.values()) == [("3", 2), ("3", 2), ("5", 2), ("5", 2)]


@pytest.mark.parametrize(
    ("gpus", "keys", "message"),
    [
        ([], {}, r"^trials_per_gpu=2: no CUDA device is visible here .*leave trials_per_gpu null"),
        (
            ["0", "1"],
            {"n_workers": 3},
            r"^n_workers=3 with trials_per_gpu=2 on 2 GPU\(s\): leave n_workers at 1 or set it to 4$",
        ),
    ],
)
def test_trials_per_gpu_without_a_gpu_or_with_another_worker_count_stops_in_one_line(gpus, keys, message, monkeypatch):
    monkeypatch.setattr(parallel, "visible_gpus", lambda: gpus)
    with pytest.raises(ValueError, match=message), open_pool(keys.get("n_workers", 1), trials_per_gpu=2):
        pass


def test_trials_per_gpu_is_checked_with_the_search_settings_and_refused_beside_a_scheduler():
    assert (
        SearchSettings(objectives=["error"], min_budget=1, max_budget=4, n_trials=2, trials_per_gpu=2.0).trials_per_gpu
        == 2
    )
    with pytest.raises(ValueError, match=r"^search\.trials_per_gpu=0 must be a positive integer$"):
        SearchSettings(objectives=["error"], min_budget=1, max_budget=4, n_trials=2, trials_per_gpu=0)
    with pytest.raises(ValueError, match=r"^search\.trials_per_gpu pins local workers only"):
        SearchSettings(
            objectives=["error"], min_budget=1, max_budget=4, trials_per_gpu=1, dask_address="tcp://127.0.0.1:8786"
        )


def test_with_threads_sets_the_threads_for_the_call_and_back():
    import torch

    before = torch.get_num_threads()
    assert parallel.with_threads(before + 1, _torch_threads) == before + 1
    assert torch.get_num_threads() == before


def test_train_all_submits_the_only_run_of_a_call_alone(tmp_path, monkeypatch):
    from fairnas.training.run_pool import Job, train_all

    class Recording(parallel.InlinePool):
        capacity = 2
        submitted: list = []

        def submit(self, token, fn, *args, alone=False):
            self.submitted.append((token, alone))
            super().submit(token, lambda *_: {"error": "not trained"}, *args)

    pool = Recording()
    train_all({"only": Job(tmp_path / "a", [])}, lambda: pool, "one")
    train_all({"first": Job(tmp_path / "b", []), "second": Job(tmp_path / "c", [])}, lambda: pool, "two")
    # resumed: one run read back, one left; it trains as it would have uninterrupted, with a worker's share
    monkeypatch.setattr("fairnas.training.run_pool.train_run", lambda run_dir, *_: {"read": "back"})
    (tmp_path / "d").mkdir()
    (tmp_path / "d" / "metrics.json").write_text("{}")
    train_all({"done": Job(tmp_path / "d", []), "left": Job(tmp_path / "e", [])}, lambda: pool, "resumed")
    assert pool.submitted == [("only", True), ("first", False), ("second", False), ("left", False)]


@pytest.mark.integration
@pytest.mark.parametrize("connection", ["address", "scheduler_file"])
def test_an_existing_dask_scheduler_runs_the_trials(tmp_path, external_scheduler, connection):
    if connection == "address":
        where = {"dask_address": external_scheduler}
    else:  # what `dask scheduler --scheduler-file` writes, as on a SLURM cluster
        (tmp_path / "scheduler.json").write_text(json.dumps({"type": "Scheduler", "address": external_scheduler}))
        where = {"dask_scheduler_file": str(tmp_path / "scheduler.json")}
    settings = zdt1_settings(strategy="random", n_trials=4, **where)
    result = run_search(ZDT1, ZDT1.configspace(), settings, output_dir=tmp_path / "search")
    assert len(result.trials) == 4 and (result.trials["status"] == "success").all()


@pytest.mark.integration
def test_an_existing_scheduler_runs_as_many_trials_at_once_as_its_workers_have_threads(tmp_path, external_scheduler):
    log_dir = tmp_path / "calls"
    log_dir.mkdir()
    with open_pool(1, dask_address=external_scheduler) as pool:
        assert pool.capacity == 2  # the scheduler's two single-threaded workers, not n_workers
    settings = zdt1_settings(strategy="random", n_trials=6, n_workers=1, dask_address=external_scheduler)
    run_search(
        functools.partial(_recording_target, log_dir=log_dir), ZDT1.configspace(), settings, output_dir=tmp_path / "s"
    )
    intervals = sorted(tuple(map(float, path.read_text().split(",")[1:])) for path in log_dir.iterdir())
    assert len(intervals) == 6 and any(next_start < end for (_, end), (next_start, _) in itertools.pairwise(intervals))


@pytest.mark.integration
def test_a_worker_that_joins_while_every_trial_runs_gets_a_trial_before_they_end(tmp_path, monkeypatch):
    import dask
    from distributed import LocalCluster

    monkeypatch.setattr(parallel, "CAPACITY_RECHECK_S", 0.5)
    log_dir = tmp_path / "calls"
    log_dir.mkdir()
    target = functools.partial(_recording_target, log_dir=log_dir, seconds=20)
    with (
        dask.config.set({"distributed.worker.daemon": False}),
        LocalCluster(n_workers=1, threads_per_worker=1, dashboard_address=":0") as cluster,
    ):  # a scheduler with one worker; a second joins two seconds into the first trial, as a queued job would
        settings = zdt1_settings(strategy="random", n_trials=2, n_workers=1, dask_address=cluster.scheduler_address)
        threading.Timer(2.0, cluster.scale, args=(2,)).start()
        run_search(target, ZDT1.configspace(), settings, output_dir=tmp_path / "search")
    (first_start, first_end), (second_start, _) = sorted(
        tuple(map(float, path.read_text().split(",")[1:])) for path in log_dir.iterdir()
    )
    assert second_start < first_end  # the second trial ran on the new worker while the first was still running


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def test_an_unreachable_scheduler_stops_with_one_line_before_anything_is_written(tmp_path):
    address = f"tcp://127.0.0.1:{_free_port()}"  # nothing listens there
    settings = zdt1_settings(strategy="random", n_trials=2, dask_address=address, dask_timeout=3)
    started = time.monotonic()
    with pytest.raises(ValueError, match=rf"^dask_address={address}: no Dask scheduler answered within 3 s") as error:
        run_search(ZDT1, ZDT1.configspace(), settings, output_dir=tmp_path / "search")
    assert "\n" not in str(error.value) and time.monotonic() - started < 30
    assert not (tmp_path / "search").exists()  # no search.json, no smac3/


@pytest.mark.integration
def test_a_scheduler_file_is_waited_for_with_a_message_then_named(tmp_path, external_scheduler, monkeypatch):
    messages = []  # what the search logs (read from its logger's calls: an earlier test's logging config may mute it)
    monkeypatch.setattr(parallel.log, "warning", lambda message, *args: messages.append(message % args))
    missing = tmp_path / "never.json"
    settings = zdt1_settings(strategy="random", n_trials=2, dask_scheduler_file=str(missing), dask_timeout=1)
    with pytest.raises(ValueError, match="no scheduler wrote it within 1 s"):
        run_search(ZDT1, ZDT1.configspace(), settings, output_dir=tmp_path / "search")
    assert messages == [f"waiting up to 1 s for a Dask scheduler to write {missing}"]
    assert not (tmp_path / "search").exists()

    late = tmp_path / "late.json"  # a scheduler that writes its file while the search waits
    writer = threading.Timer(1.0, lambda: late.write_text(json.dumps({"address": external_scheduler})))
    writer.start()
    settings = zdt1_settings(strategy="random", n_trials=2, dask_scheduler_file=str(late), dask_timeout=30)
    result = run_search(ZDT1, ZDT1.configspace(), settings, output_dir=tmp_path / "search")
    writer.join()
    assert len(result.trials) == 2 and (result.trials["status"] == "success").all()


def _dies_for_large_x0(config, seed, budget):
    if config["x0"] > 0.5:
        os._exit(1)  # like a worker killed by the kernel's out-of-memory killer
    return ZDT1(config, seed, budget)


@pytest.mark.slow  # waits for the nanny to restart the dead worker
def test_a_trial_that_kills_its_worker_is_recorded_as_crashed(tmp_path):
    settings = zdt1_settings(strategy="random", n_trials=4)
    result = run_search(_dies_for_large_x0, ZDT1.configspace(), settings, output_dir=tmp_path / "search")
    trials = result.trials
    died = trials["x0"] > 0.5
    assert len(trials) == 4 and died.any()
    assert (trials.loc[died, "status"] == "crashed").all() and (trials.loc[~died, "status"] == "success").all()
    assert trials.loc[died, "error_message"].str.startswith("KilledWorker").all()
