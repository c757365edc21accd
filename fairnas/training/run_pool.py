"""Training runs dispatched through the search's pool: each one an ordinary ``train`` run in its own folder.

Runs that do not depend on each other (a study stage's, a comparison's baselines, then its mitigations) go to a pool
at once (:func:`fairnas.search.parallel.open_pool`: in this process, a local Dask cluster of ``n_workers``, or an
existing Dask scheduler) and are collected as they finish. A finished run is read back instead of trained
(:func:`fairnas.training.run.train_once`, which also refuses a folder holding a run with other overrides). A run that
fails, or whose worker dies, comes back as ``{"error": message}``; what that means is the caller's to say.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Hashable, Mapping
from dataclasses import dataclass
from pathlib import Path

from fairnas.search.parallel import TrialPool
from fairnas.search.trial import is_out_of_space
from fairnas.training.run import train_once

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Job:
    """One run: its folder, its training overrides, and ``same_config`` (a finished run found by the caller whose
    overrides compose the same training config: read back as it is)."""

    run_dir: Path
    overrides: list[str]
    same_config: bool = False


def train_run(run_dir: Path, overrides: list[str], same_config: bool = False) -> dict:
    """Train (or read back) one run; its metrics, or ``{"error": message}`` when it fails (what runs on a worker)."""
    try:
        return train_once(run_dir, overrides, same_config=same_config)
    except Exception as error:  # any failure of one run, out-of-memory included: recorded, the caller decides
        if is_out_of_space(error):  # the machine's fault: the caller stops and the run is retried on resume
            raise
        return {"error": f"{type(error).__name__}: {str(error).splitlines()[0] if str(error) else ''}"}


def train_all(jobs: Mapping[Hashable, Job], pool: Callable[[], TrialPool], label: str) -> dict[Hashable, dict]:
    """Every job's metrics by its key: finished runs read back, the others trained through ``pool()`` (asked for only
    when a run is left to train), as many at once as it has capacity."""
    results: dict[Hashable, dict] = {}
    pending = []
    for key, job in jobs.items():
        if (job.run_dir / "metrics.json").is_file():  # reads it back, after checking it ran with these overrides
            results[key] = train_run(job.run_dir, job.overrides, job.same_config)
        else:
            pending.append(key)
    if not pending:
        return results
    workers, queue = pool(), list(pending)
    # a call of one run may take every core of a local pool; decided by the call's runs, not by the ones left to
    # train, so that a resumed call trains with the threads an uninterrupted one would (their floats round alike)
    alone = len(jobs) == 1
    log.info(
        "%s: %d runs to train (%d read back)%s",
        label,
        len(pending),
        len(jobs) - len(pending),
        ", alone in the pool: every core" if alone else "",
    )
    started: dict[Hashable, float] = {}
    while queue or len(workers):
        while queue and len(workers) < workers.capacity:
            key = queue.pop(0)
            job = jobs[key]
            started[key] = time.perf_counter()
            workers.submit(key, train_run, job.run_dir, job.overrides, job.same_config, alone=alone)
        finished = workers.next_finished()
        if finished is None:  # nothing finished yet: fill the workers that joined
            continue
        key, metrics, error = finished
        if error is not None and is_out_of_space(error):
            raise error
        if error is not None:  # the worker itself died
            metrics = {"error": f"{type(error).__name__}: {error}".splitlines()[0]}
        results[key] = metrics
        status = f"crashed ({metrics['error']})" if "error" in metrics else "done"
        log.info("%s: %s %s in %.0f s", label, key, status, time.perf_counter() - started[key])
    return results
