"""One writer per run folder: a command holds an exclusive lock on its output folder while it runs.

The lock is an ``flock`` on ``<folder>/.fairnas.lock`` (:mod:`filelock`), taken without waiting: a second process
on the folder stops at once with one line naming the folder and the holder, and changes nothing in it. The kernel
releases the lock when its holder ends, however it ends (SIGKILL included), so a folder left by a killed process
is taken over by the next run with no clean-up. ``<folder>/.fairnas.lock.json`` records the holder (host, process
id, start time, command) for that line; the holder removes it when it ends normally, so a record found on taking
the lock names a holder that did not, and the take-over is logged.

A run folder inside another one (a search's trials, a comparison's runs, SensitiveNets' baseline) waits for its
lock instead of refusing: only a run left behind by an earlier incarnation of the outer command can hold it (e.g.
a trial still running on a Dask worker after its search driver was killed), and it ends. A process may take a lock
it already holds again (the Hydra callback and the task function both take the command's folder).
"""

from __future__ import annotations

import contextlib
import datetime
import functools
import json
import logging
import os
import shutil
import socket
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar, cast

from filelock import FileLock, Timeout
from hydra.experimental.callback import Callback
from omegaconf import DictConfig, OmegaConf

from fairnas.io import write_json_atomic

log = logging.getLogger(__name__)

LOCK_FILE = ".fairnas.lock"
HOLDER_FILE = ".fairnas.lock.json"
LOCK_FILES = frozenset({LOCK_FILE, HOLDER_FILE})
RECORD_WAIT_S = 2.0  # how long a refused process waits for a brand-new holder to write its record
WAIT_POLL_S = 0.5
RANK_VARIABLES = ("RANK", "LOCAL_RANK", "SLURM_PROCID", "JSM_NAMESPACE_RANK")  # lightning_fabric's _get_rank order

Task = TypeVar("Task", bound=Callable[..., Any])


class RunFolderBusy(ValueError):
    """Another process holds the run folder (a ValueError: the commands print it as one ``error:`` line)."""


class _Hold:
    """This process's lock on one folder and how many times it is taken."""

    def __init__(self, folder: Path):
        self.folder = folder
        self.lock = FileLock(folder / LOCK_FILE, thread_local=False)
        self.depth = 1


_HOLDS: dict[Path, _Hold] = {}
_REGISTRY = threading.RLock()
if hasattr(os, "register_at_fork"):  # a forked child (a DataLoader worker) holds nothing: filelock closes its copies
    os.register_at_fork(after_in_child=_HOLDS.clear)


@contextlib.contextmanager
def run_folder_lock(folder: str | Path, *, wait: bool | None = None) -> Iterator[Path]:
    """Hold ``folder``'s lock (made with its parents if missing) for the block; yields the folder.

    Raises :class:`RunFolderBusy` naming the holder when another process holds it, unless ``wait`` (default: the
    folder lies inside another run folder), which waits for it. A folder this call made and the block left with
    nothing but the lock files in it (a run stopped by bad input) is removed again. A DDP process other than rank 0
    takes no lock: the rank-0 process that launched it holds it (:func:`secondary_rank`).
    """
    folder = Path(folder).resolve()
    if secondary_rank():
        yield folder
        return
    made = _first_missing(folder)
    wait = _nested(folder) if wait is None else wait
    acquire(folder, wait=wait)
    failed = True
    try:
        yield folder
        failed = False
    finally:
        if failed and made is not None:
            _discard(folder, LOCK_FILES, up_to=made)
        release(folder)


def locks_output_dir(task: Task) -> Task:
    """Decorator of a task function ``task(cfg)``: it runs holding the lock of ``cfg.output_dir``
    (:func:`run_folder_lock`)."""

    @functools.wraps(task)
    def locked(cfg: DictConfig, *args: Any, **kwargs: Any) -> Any:
        with run_folder_lock(cfg.output_dir):
            return task(cfg, *args, **kwargs)

    return cast(Task, locked)


def secondary_rank() -> bool:
    """Whether this process is a distributed (DDP) process other than the global rank 0, by the environment
    variables Lightning reads (``RANK``, ``LOCAL_RANK``, ``SLURM_PROCID``, ``JSM_NAMESPACE_RANK``: the first set one,
    and ``NODE_RANK``). Lightning's launcher re-runs the command for ranks 1.. in the same run folder."""
    rank = next((os.environ[key] for key in RANK_VARIABLES if os.environ.get(key)), "0")
    return _int(rank) > 0 or _int(os.environ.get("NODE_RANK", "0")) > 0


def _int(text: str) -> int:
    try:
        return int(text)
    except ValueError:
        return 0


def acquire(folder: Path, *, wait: bool = False) -> None:
    """Take ``folder``'s lock (again, if this process holds it); the first take writes the holder record."""
    with _REGISTRY:
        hold = _HOLDS.get(folder)
        if hold is not None:
            hold.depth += 1
            return
    hold = _Hold(folder)
    _lock(hold, wait=wait)
    try:
        previous = read_holder(folder)
        if previous is not None:
            log.info("%s: took over from %s, which ended without releasing it", folder, _holder_text(previous))
        write_json_atomic(folder / HOLDER_FILE, _this_holder())
    except BaseException:
        hold.lock.release(force=True)
        raise
    with _REGISTRY:
        _HOLDS[folder] = hold


def _lock(hold: _Hold, *, wait: bool) -> None:
    """flock ``hold``'s lock file: one attempt, then (``wait``) until it is free."""
    for attempt in range(3):
        hold.folder.mkdir(parents=True, exist_ok=True)
        try:
            hold.lock.acquire(timeout=0)
            return
        except Timeout:
            if not wait:
                raise RunFolderBusy(_busy_message(hold.folder)) from None
            holder = _holder_text(read_holder(hold.folder, wait_s=RECORD_WAIT_S))
            log.info("%s: waiting for the process that holds it (%s)", hold.folder, holder)
            hold.lock.acquire(timeout=-1, poll_interval=WAIT_POLL_S)
            return
        except FileNotFoundError:  # the folder was removed (a failed start) between mkdir and open: again
            if attempt == 2:
                raise


def release(folder: Path) -> None:
    """Give back one take of ``folder``'s lock; the last removes the holder record, then unlocks."""
    with _REGISTRY:
        hold = _HOLDS.get(folder)
        if hold is None:  # discarded with its folder
            return
        hold.depth -= 1
        if hold.depth > 0:
            return
        del _HOLDS[folder]
        try:
            (folder / HOLDER_FILE).unlink(missing_ok=True)
        finally:
            hold.lock.release(force=True)


def discard_if_unused(folder: str | Path, removable: set[str]) -> bool:
    """Remove ``folder`` if no other process holds it and it holds nothing but ``removable`` names and the lock
    files; whether it was removed. A folder another process holds is never touched."""
    folder = Path(folder).resolve()
    if not folder.is_dir():
        return False
    try:
        acquire(folder)
    except RunFolderBusy:
        return False
    try:
        return _discard(folder, removable | LOCK_FILES, up_to=folder)
    finally:
        release(folder)


def read_holder(folder: Path, wait_s: float = 0.0) -> dict[str, Any] | None:
    """The holder record in ``folder`` (waiting up to ``wait_s`` for one to appear), or None."""
    deadline = time.monotonic() + wait_s
    while True:
        with contextlib.suppress(OSError, ValueError):
            record = json.loads((folder / HOLDER_FILE).read_text())
            if isinstance(record, dict):
                return record
        if time.monotonic() >= deadline:
            return None
        time.sleep(0.05)


class RunLockCallback(Callback):
    """Hydra callback: takes the lock of the command's run folder before Hydra writes its ``.hydra/`` files and
    job log there, so a second process on the folder stops with one line before it changes anything.

    Only for the commands in ``tasks`` (their ``task_name``), and when the command's ``output_dir`` is Hydra's run
    folder; the task function's own lock (:func:`locks_output_dir`) covers an ``output_dir`` elsewhere. Held until
    the job ends, or until the one-line error of bad input is printed (:func:`release_job_folders`).
    """

    def __init__(self, tasks: list[str]):
        self.tasks = list(tasks)

    def on_run_start(self, config: DictConfig, **kwargs: Any) -> None:
        if config.get("task_name") not in self.tasks or secondary_rank():
            return
        folder = _run_folder(config)
        if folder is None:
            return
        try:
            acquire(folder)
        except RunFolderBusy as busy:
            print(f"error: {busy}", file=sys.stderr)
            sys.exit(2)
        _JOB_HOLDS.append(folder)

    def on_job_end(self, config: DictConfig, job_return: Any, **kwargs: Any) -> None:
        release_job_folders()


_JOB_HOLDS: list[Path] = []  # the run folders RunLockCallback holds for the job


def release_job_folders() -> None:
    """Give back the run folders :class:`RunLockCallback` took for the job: at its end, or after bad input (a job that
    stops with SystemExit never reaches ``on_job_end``, and its holder record would stay behind)."""
    while _JOB_HOLDS:
        release(_JOB_HOLDS.pop())


def _run_folder(config: DictConfig) -> Path | None:
    """Hydra's run folder when it is the command's ``output_dir`` (by default ``${hydra:runtime.output_dir}``,
    which is set only once the run starts), else None."""
    folder = Path(str(OmegaConf.select(config, "hydra.run.dir"))).resolve()
    container = OmegaConf.to_container(config, resolve=False)
    raw = container.get("output_dir") if isinstance(container, dict) else None
    if raw is None:
        return None
    if str(raw) == "${hydra:runtime.output_dir}":
        return folder
    try:
        output_dir = Path(str(OmegaConf.select(config, "output_dir"))).resolve()
    except Exception:  # an interpolation only the running job can resolve: the task function's lock covers it
        return None
    return folder if output_dir == folder else None


def _busy_message(folder: Path) -> str:
    holder = read_holder(folder, wait_s=RECORD_WAIT_S)
    return (
        f"{folder} is in use by another process ({_holder_text(holder)}); wait for it to end, or write to another "
        "folder"
    )


def _holder_text(holder: dict[str, Any] | None) -> str:
    if holder is None:
        return "holder not recorded"
    return f"host {holder.get('host')}, pid {holder.get('pid')}, started {holder.get('started')}"


def _this_holder() -> dict[str, Any]:
    return {
        "host": socket.gethostname(),
        "pid": os.getpid(),
        "started": datetime.datetime.now().astimezone().isoformat(timespec="seconds"),
        "command": " ".join([Path(sys.argv[0]).name, *sys.argv[1:]]) if sys.argv else "",
    }


def _nested(folder: Path) -> bool:
    """Whether ``folder`` lies inside another run folder (one with a lock file)."""
    return any((parent / LOCK_FILE).exists() for parent in folder.parents)


def _first_missing(folder: Path) -> Path | None:
    """The outermost of ``folder`` and its parents that does not exist yet (None: ``folder`` exists)."""
    missing = None
    for path in (folder, *folder.parents):
        if path.exists():
            return missing
        missing = path
    return missing


def _discard(folder: Path, removable: set[str] | frozenset[str], *, up_to: Path) -> bool:
    """With ``folder``'s lock held: remove it if it holds nothing but ``removable`` names, then its parents up to
    ``up_to`` that are left empty; whether it was removed. Its holds in this process end with it."""
    if not folder.is_dir() or not {entry.name for entry in folder.iterdir()} <= removable:
        return False
    shutil.rmtree(folder, ignore_errors=True)
    for parent in folder.parents:
        if not parent.is_relative_to(up_to):
            break
        with contextlib.suppress(OSError):
            parent.rmdir()
    with _REGISTRY:
        hold = _HOLDS.pop(folder, None)
    if hold is not None:
        hold.lock.release(force=True)
    return True
