"""A study's training runs, each one a ``train`` run in its own folder, dispatched through the search's pool.

Every run of a study is independent of the others of its stage, so a stage hands all of them to a pool at once
(:func:`fairnas.search.parallel.open_pool`: in this process, a local Dask cluster of ``study.n_workers``, or an
existing Dask scheduler) and collects them as they finish. A finished run is read back instead of trained
(:func:`fairnas.tasks.runs.train_once`, which also refuses a folder holding a run with other overrides). A run that
fails, or whose worker dies, is recorded as crashed with its message; the claims it feeds leave it out and say so.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable
from pathlib import Path

import pandas as pd

from fairnas.search.parallel import TrialPool
from fairnas.search.trial import is_out_of_space
from fairnas.study.runs import RunSpec, run_row
from fairnas.tasks.runs import train_once

log = logging.getLogger(__name__)


def train_run(run_dir: Path, overrides: list[str]) -> dict:
    """Train (or read back) one run; its metrics, or ``{"error": message}`` when it fails (what runs on a worker)."""
    try:
        return train_once(run_dir, overrides)
    except Exception as error:  # any failure of one run, out-of-memory included: recorded, the study goes on
        if is_out_of_space(error):  # the machine's fault: the study stops and the run is retried on resume
            raise
        return {"error": f"{type(error).__name__}: {str(error).splitlines()[0] if str(error) else ''}"}


def run_all(
    specs: Iterable[RunSpec],
    *,
    output_dir: Path,
    overrides: Callable[[RunSpec], list[str]],
    pool: Callable[[], TrialPool],
    stage: str,
) -> pd.DataFrame:
    """Every spec's run (each folder once), through ``pool()`` (asked for only when a run is left to train): one row
    per spec (:func:`~fairnas.study.runs.run_row`)."""
    specs = list(dict.fromkeys(specs))
    results: dict[Path, dict] = {}
    pending = []
    for spec in specs:
        if spec.folder in results:
            continue
        finished = _finished(output_dir / spec.folder, overrides(spec))
        if finished is not None:
            results[spec.folder] = finished
        else:
            results[spec.folder] = {}
            pending.append(spec)
    if pending:
        workers, queue = pool(), list(pending)
        log.info("study %s: %d runs to train (%d read back)", stage, len(pending), len(specs) - len(pending))
        started: dict[Path, float] = {}
        while queue or len(workers):
            while queue and len(workers) < workers.capacity:
                spec = queue.pop(0)
                started[spec.folder] = time.perf_counter()
                workers.submit(spec.folder, train_run, output_dir / spec.folder, overrides(spec))
            folder, metrics, error = workers.next_finished()
            if error is not None and is_out_of_space(error):
                raise error
            if error is not None:  # the worker itself died
                metrics = {"error": f"{type(error).__name__}: {error}".splitlines()[0]}
            results[folder] = metrics
            status = f"crashed ({metrics['error']})" if "error" in metrics else "done"
            log.info("study %s: %s %s in %.0f s", stage, folder, status, time.perf_counter() - started[folder])
    return pd.DataFrame([run_row(spec, results[spec.folder], stage) for spec in specs])


def _finished(run_dir: Path, overrides: list[str]) -> dict | None:
    """A finished run's metrics, read back (None when it is not finished)."""
    if not (run_dir / "metrics.json").is_file():
        return None
    return train_run(run_dir, overrides)  # reads it back, after checking it ran with these overrides
