"""Where trials run: in this process, on a local Dask cluster, or on an existing Dask scheduler.

Local Dask workers are started non-daemonic (``distributed.worker.daemon: False``) so a trial can start DataLoader
worker processes. Workers of an external cluster need the same setting in their own Dask config (e.g.
``DASK_DISTRIBUTED__WORKER__DAEMON=False``). A trial whose worker process dies (e.g. killed for memory) comes back as
an error and is recorded as crashed.

A local worker's environment is Dask's with two changes:

- the machine's cores are shared among the workers: ``OMP_NUM_THREADS`` (and its MKL and OpenBLAS twins) is the
  cores this process may use // ``n_workers``, where Dask gives every worker 1 (a value this process's environment
  holds wins, as Dask reads it). A call submitted ``alone`` (the only run of its batch, e.g. a study stage of one run)
  trains with all of those cores (or with ``OMP_NUM_THREADS`` threads, when this process's environment sets it);
- Dask's ``MALLOC_TRIM_THRESHOLD_=65536`` is left out: it makes glibc hand every freed tensor back to the system, and
  PyTorch then trains on the CPU about 2x slower (``bench/worker_speed.py``).

Dask's nanny writes its workers' start variables into the environment of the process that runs it, which the workers
it spawns later inherit; so an earlier Dask cluster of the same process leaves ``MALLOC_TRIM_THRESHOLD_`` there. The
pool takes that variable out while its workers start, and puts every such variable back as it was when it closes.

Several small trials per GPU: with ``trials_per_gpu`` k, the local cluster starts k workers per CUDA device this
process sees, each pinned to its device through ``CUDA_VISIBLE_DEVICES`` (a trial's ``cuda:0`` is then its worker's
device), so k trials share each GPU; ``n_workers`` is then k x the devices (leave it at 1, or give that number).
Workers of an existing scheduler are pinned by whoever starts them (``CUDA_VISIBLE_DEVICES`` in the job script).

An existing scheduler sets the concurrency itself: as many trials run at once as its workers have threads, counted
again whenever a trial finishes (so worker jobs that start later are used from the next finished trial on), and at
least ``n_workers`` (so a search told the number of worker jobs fills them from the start, while they still wait in
the cluster's queue). A
scheduler that does not answer within ``timeout`` seconds, or a scheduler file that no scheduler has written by
then (its wait is logged), stops with one line naming the address or file.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import time
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any, Protocol

from fairnas.search.security import check_address, tls_security
from fairnas.validation import Settings

log = logging.getLogger(__name__)
CAPACITY_RECHECK_S = 10.0
"""Seconds a pool on an existing scheduler waits for a finished call before its caller counts the workers again."""
NO_MALLOC_TRIM = {"distributed.nanny.pre-spawn-environ.MALLOC_TRIM_THRESHOLD_": None}
"""The Dask setting that starts workers without ``MALLOC_TRIM_THRESHOLD_`` (None unsets it) and keeps the rest of
Dask's start environment."""
THREAD_VARIABLES = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS")
"""The variables that size a worker's math libraries' thread pools (PyTorch reads ``OMP_NUM_THREADS``)."""


def available_cores() -> int:
    """The cores this process may run on (its CPU affinity, as a SLURM job's or a container's limit sets it)."""
    return len(os.sched_getaffinity(0))


def with_threads(threads: int, fn: Callable[..., Any], *args: Any) -> Any:
    """``fn(*args)`` with PyTorch's intra-op threads set to ``threads``, then set back."""
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        return fn(*args)
    finally:
        torch.set_num_threads(before)


@contextlib.contextmanager
def environment_restored(names: Iterable[str], unset: Iterable[str] = ()) -> Iterator[None]:
    """This process's environment variables ``names`` put back as they were before the block, and ``unset`` taken out
    during it: Dask's nanny writes its workers' start variables into the environment of the process that runs it,
    and the workers spawned here inherit that environment."""
    before = {name: os.environ.get(name) for name in [*names, *unset]}
    for name in unset:
        os.environ.pop(name, None)
    try:
        yield
    finally:
        for name, value in before.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


def spawn_variables() -> tuple[list[str], list[str]]:
    """The variables a local Dask cluster's nanny writes into this process's environment under the current Dask
    config (``distributed.nanny.pre-spawn-environ``, and ``PYTHONHASHSEED``, which it sets to 6640 where it is unset
    or 0 for its workers' consistent hashing), and those of them the config unsets (None)."""
    import dask

    settings = dask.config.get("distributed.nanny.pre-spawn-environ")
    return [*settings, "PYTHONHASHSEED"], [name for name, value in settings.items() if value is None]


class TrialPool(Protocol):
    """Runs submitted calls and hands back results as they finish, ``capacity`` of them at once."""

    @property
    def capacity(self) -> int: ...

    def submit(self, token: Any, fn: Callable[..., Any], *args: Any, alone: bool = False) -> None:
        """Start ``fn(*args)``; ``alone``: the only call of its batch, so it may take every core."""
        ...

    def next_finished(self) -> tuple[Any, Any, BaseException | None] | None:
        """Block until a call finishes; return (token, result, None) or (token, None, error). A pool whose capacity
        can grow (workers joining a scheduler) returns None when nothing finished for a while, so the caller can
        fill the new workers before the running calls end."""
        ...

    def __len__(self) -> int: ...


class InlinePool:
    """Runs one call at a time, in this process, when its result is asked for."""

    capacity = 1

    def __init__(self) -> None:
        self._queue: deque[tuple[Any, Callable[..., Any], tuple]] = deque()

    def submit(self, token: Any, fn: Callable[..., Any], *args: Any, alone: bool = False) -> None:
        self._queue.append((token, fn, args))

    def next_finished(self) -> tuple[Any, Any, BaseException | None]:
        token, fn, args = self._queue.popleft()
        return token, fn(*args), None

    def __len__(self) -> int:
        return len(self._queue)


class DaskPool:
    """Runs up to ``capacity`` calls at once on a Dask cluster: ``workers`` of them on a cluster this process started
    (where a call submitted ``alone`` trains with ``alone_threads``), else as many as the scheduler's workers have
    threads now, and at least ``at_least``."""

    def __init__(self, client: Any, workers: int | None = None, *, at_least: int = 1, alone_threads: int | None = None):
        self._workers, self._at_least, self._alone_threads = workers, at_least, alone_threads
        self._client = client
        self._running: dict[Any, Any] = {}  # future -> token, in submission order

    def submit(self, token: Any, fn: Callable[..., Any], *args: Any, alone: bool = False) -> None:
        if alone and self._alone_threads is not None:  # more than a local worker's share of the cores
            fn, args = with_threads, (self._alone_threads, fn, *args)
        self._running[self._client.submit(fn, *args, pure=False)] = token

    def next_finished(self) -> tuple[Any, Any, BaseException | None] | None:
        from distributed import wait

        # On an existing scheduler workers may join while every call runs: give the caller a turn now and then.
        timeout = CAPACITY_RECHECK_S if self._workers is None else None
        try:
            done, _ = wait(list(self._running), timeout=timeout, return_when="FIRST_COMPLETED")
        except TimeoutError:
            return None
        future = next(future for future in self._running if future in done)  # the earliest submitted of those done
        token = self._running.pop(future)
        try:
            return token, future.result(), None
        except Exception as error:  # e.g. KilledWorker when a worker process dies
            return token, None, error
        finally:
            future.release()

    def __len__(self) -> int:
        return len(self._running)

    @property
    def capacity(self) -> int:
        if self._workers is not None:
            return self._workers
        return max(self._at_least, sum(self._client.nthreads().values()))

    @property
    def address(self) -> str:
        """The scheduler's address, for another pool on the same workers (a study's search)."""
        return self._client.scheduler.address


POOL_KEYS = (
    "n_workers",
    "trials_per_gpu",
    "dask_address",
    "dask_scheduler_file",
    "dask_timeout",
    "dask_tls",
    "dask_insecure",
)
"""The pool's keys, which the sections of ``search``, ``study`` and ``compare.py`` share."""


def checked_pool(keys: Settings, section: Any) -> dict[str, Any]:
    """The pool's keys of ``section`` (a search's, a study's), checked with the same ranges wherever they are set, a
    bad one named in one line under ``keys``' prefix; returns the numbers and the flag converted."""
    if section.dask_address is not None and section.dask_scheduler_file is not None:
        raise ValueError(f"give {keys.prefix}dask_address or {keys.prefix}dask_scheduler_file, not both")
    if section.dask_tls is not None and not isinstance(section.dask_tls, str):
        keys.fail("dask_tls", section.dask_tls, "a folder path or null")
    trials_per_gpu = section.trials_per_gpu
    if trials_per_gpu is not None:
        trials_per_gpu = keys.integer("trials_per_gpu", trials_per_gpu, minimum=1, integral_floats=True)
        if section.dask_address is not None or section.dask_scheduler_file is not None:
            raise ValueError(
                f"{keys.prefix}trials_per_gpu pins local workers only; pin a scheduler's workers with "
                "CUDA_VISIBLE_DEVICES where they start, and leave trials_per_gpu null"
            )
    return {
        "n_workers": keys.integer("n_workers", section.n_workers, minimum=1, integral_floats=True),
        "trials_per_gpu": trials_per_gpu,
        "dask_timeout": keys.positive("dask_timeout", section.dask_timeout, "(seconds)"),
        "dask_insecure": keys.boolean("dask_insecure", section.dask_insecure),
    }


def open_pool_for(settings: Any) -> contextlib.AbstractContextManager[TrialPool]:
    """:func:`open_pool` from a section holding the pool's keys (:data:`POOL_KEYS`)."""
    return open_pool(
        settings.n_workers,
        trials_per_gpu=settings.trials_per_gpu,
        dask_address=settings.dask_address,
        dask_scheduler_file=settings.dask_scheduler_file,
        timeout=settings.dask_timeout,
        tls=settings.dask_tls,
        insecure=settings.dask_insecure,
    )


@contextlib.contextmanager
def open_pool(
    n_workers: int,
    *,
    trials_per_gpu: int | None = None,
    dask_address: str | None = None,
    dask_scheduler_file: str | None = None,
    timeout: float = 60.0,
    tls: str | None = None,
    insecure: bool = False,
) -> Iterator[TrialPool]:
    """A pool for ``n_workers`` concurrent trials (in-process when 1 and no scheduler is given), for
    ``trials_per_gpu`` trials on each visible GPU, or for the workers of an existing scheduler (``dask_address`` or
    ``dask_scheduler_file``: their threads, at least ``n_workers``)."""
    if dask_address is not None and dask_scheduler_file is not None:
        raise ValueError("give dask_address or dask_scheduler_file, not both")
    devices = None if trials_per_gpu is None else gpu_slots(trials_per_gpu, n_workers)
    if devices is not None:
        n_workers = len(devices)
    if dask_address is None and dask_scheduler_file is None and n_workers == 1:
        yield InlinePool()
        return

    import dask
    from distributed import Client, LocalCluster

    if dask_address is not None or dask_scheduler_file is not None:
        with connect(dask_address, dask_scheduler_file, timeout, tls=tls, insecure=insecure) as client:
            yield DaskPool(client, at_least=n_workers)
        return
    cores = available_cores()
    pinned = os.environ.get("OMP_NUM_THREADS", "")  # read before the nanny writes the workers' share here
    alone_threads = int(pinned) if pinned.isdigit() and int(pinned) > 0 else cores
    share = {f"distributed.nanny.pre-spawn-environ.{name}": max(1, cores // n_workers) for name in THREAD_VARIABLES}
    with (
        # non-daemonic workers (also those the nanny restarts); a trial that kills its worker is
        # recorded as crashed instead of being retried on the next worker
        dask.config.set(
            {
                "distributed.worker.daemon": False,
                "distributed.scheduler.allowed-failures": 0,
                **NO_MALLOC_TRIM,
                **share,
            }
        ),
        environment_restored(*spawn_variables()),
        (
            LocalCluster(n_workers=n_workers, threads_per_worker=1, processes=True, dashboard_address=":0")
            if devices is None
            else pinned_cluster(devices)
        ) as cluster,
        Client(cluster) as client,
    ):
        yield DaskPool(client, n_workers, alone_threads=alone_threads)


def visible_gpus() -> list[str]:
    """The CUDA devices this process sees, named as ``CUDA_VISIBLE_DEVICES`` names them (else 0 .. count - 1)."""
    import torch

    count = torch.cuda.device_count()
    named = [name.strip() for name in os.environ.get("CUDA_VISIBLE_DEVICES", "").split(",") if name.strip()]
    return named[:count] if named else [str(index) for index in range(count)]


def gpu_slots(trials_per_gpu: int, n_workers: int) -> list[str]:
    """The device of each local worker, ``trials_per_gpu`` per visible GPU, dealt round-robin; a one-line
    ValueError without a GPU, or when ``n_workers`` is neither 1 nor the number of slots."""
    gpus = visible_gpus()
    if not gpus:
        raise ValueError(
            f"trials_per_gpu={trials_per_gpu}: no CUDA device is visible here (torch.cuda.device_count() is 0); "
            "leave trials_per_gpu null to run on the CPU"
        )
    slots = [gpus[index % len(gpus)] for index in range(trials_per_gpu * len(gpus))]
    if n_workers not in (1, len(slots)):
        raise ValueError(
            f"n_workers={n_workers} with trials_per_gpu={trials_per_gpu} on {len(gpus)} GPU(s): leave n_workers at 1 "
            f"or set it to {len(slots)}"
        )
    return slots


def pinned_cluster(devices: list[str]) -> Any:
    """A local Dask cluster of one one-thread worker per entry of ``devices``, each seeing only that CUDA device."""
    from distributed import Nanny, Scheduler, SpecCluster

    workers = {
        index: {"cls": Nanny, "options": {"nthreads": 1, "env": {"CUDA_VISIBLE_DEVICES": device}}}
        for index, device in enumerate(devices)
    }
    scheduler = {"cls": Scheduler, "options": {"host": "127.0.0.1", "port": 0, "dashboard_address": ":0"}}
    return SpecCluster(workers=workers, scheduler=scheduler, silence_logs=logging.WARNING)


def connect(
    address: str | None, scheduler_file: str | None, timeout: float, *, tls: str | None = None, insecure: bool = False
) -> Any:
    """A Dask client of the scheduler at ``address``, or of the one whose ``scheduler_file`` (as ``dask scheduler
    --scheduler-file`` writes it) appears within ``timeout`` seconds, with the TLS credentials of the folder ``tls``
    (:mod:`fairnas.search.security`; a plain ``tcp://`` address off this machine needs ``insecure``); a one-line
    ValueError when none answers."""
    from distributed import Client

    security = tls_security(tls) if tls is not None else None
    where = f"dask_address={address}"
    if scheduler_file is not None:
        address = scheduler_address(Path(scheduler_file), timeout)
        where = f"dask_scheduler_file={scheduler_file} (address {address})"
    assert address is not None
    check_address(address, insecure=insecure, tls=tls, where=where)
    try:
        return Client(address=address, timeout=timeout, security=security)
    except (OSError, TimeoutError) as error:
        reason = str(error).splitlines()[0] if str(error) else type(error).__name__
        raise ValueError(
            f"{where}: no Dask scheduler answered within {timeout:g} s ({reason}); start one there "
            "(dask scheduler --host ...) or give the address it printed"
        ) from None


def scheduler_address(path: Path, timeout: float) -> str:
    """The address in a scheduler file, waiting up to ``timeout`` seconds for a scheduler to write it."""
    deadline = time.monotonic() + timeout
    if not path.is_file():
        log.warning("waiting up to %g s for a Dask scheduler to write %s", timeout, path)
    while not path.is_file():
        if time.monotonic() > deadline:
            raise ValueError(
                f"dask_scheduler_file={path}: no scheduler wrote it within {timeout:g} s; start "
                f"`dask scheduler --scheduler-file {path}` first, or wait longer (dask_timeout)"
            )
        time.sleep(min(1.0, timeout / 10))
    try:
        return str(json.loads(path.read_text())["address"])
    except (ValueError, KeyError, TypeError):
        raise ValueError(f"dask_scheduler_file={path}: not a Dask scheduler file (JSON with an address)") from None
