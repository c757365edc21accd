"""How fast a study or search trains its runs on this machine's CPU cores: one at a time in the process (all cores,
``n_workers=1``) against two at once on a local Dask cluster of one-thread workers (``n_workers=2``), once with the
environment fairnas gives those workers and once with Dask's own, whose ``MALLOC_TRIM_THRESHOLD_=65536`` makes glibc
hand every freed tensor back to the system (:data:`fairnas.search.parallel.NO_MALLOC_TRIM` leaves it out).

Every way trains the same ``--runs`` runs (seeds 1000, 1001, ...) of ``--overrides`` (by default the showcase's
default DPN) into a fresh folder; the table gives the wall seconds for all of them, seconds per run, and the runs an
hour as a ratio to one at a time. Run it alone on the machine (other processes on the cores distort every way):

    python bench/worker_speed.py                           # 4 runs of experiment=showcase, about 6 minutes on 2 cores
    python bench/worker_speed.py --runs 2 --overrides experiment=showcase backbone=timm backbone.name=resnet18
"""

from __future__ import annotations

import argparse
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from unittest import mock

import pandas as pd

from fairnas.search import parallel
from fairnas.training.run_pool import train_run

DASK_DEFAULT = {key: 65536 for key in parallel.NO_MALLOC_TRIM}
"""Dask's own setting (2026.8), which fairnas's pool overrides."""


def timed(workers: int, dask_default: bool, overrides: Sequence[str], runs: int, folder: Path) -> float:
    """Wall seconds to train ``runs`` runs of ``overrides`` through a pool of ``workers`` (local Dask workers with
    Dask's ``MALLOC_TRIM_THRESHOLD_`` when ``dask_default``)."""
    setting = DASK_DEFAULT if dask_default else parallel.NO_MALLOC_TRIM
    with mock.patch.object(parallel, "NO_MALLOC_TRIM", setting), parallel.open_pool(workers) as pool:
        start = time.perf_counter()
        for seed in range(runs):
            pool.submit(seed, train_run, folder / f"seed{seed}", [*overrides, f"seed={1000 + seed}", "logger=none"])
        while len(pool):
            _, _, error = pool.next_finished() or (None, None, None)
            if error is not None:
                raise error
        return time.perf_counter() - start


def main(argv: Sequence[str] | None = None) -> pd.DataFrame:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=4, help="runs each way trains (even: two workers share them)")
    parser.add_argument("--overrides", nargs="*", default=["experiment=showcase"], help="each run's training config")
    args = parser.parse_args(argv)
    if args.runs < 1:
        parser.error(f"--runs={args.runs}: at least 1")
    ways = {
        "one at a time, all cores (n_workers=1)": (1, False),
        "two one-thread Dask workers (n_workers=2)": (2, False),
        "two one-thread Dask workers, Dask's MALLOC_TRIM_THRESHOLD_": (2, True),
    }
    rows = []
    with tempfile.TemporaryDirectory() as scratch:
        for index, (way, (workers, dask_default)) in enumerate(ways.items()):
            seconds = timed(workers, dask_default, args.overrides, args.runs, Path(scratch) / str(index))
            rows.append({"way": way, "runs": args.runs, "wall s": seconds, "s per run": seconds / args.runs})
    table = pd.DataFrame(rows)
    table["runs an hour, ratio to one at a time"] = table["s per run"].iloc[0] / table["s per run"]
    print(table.to_markdown(index=False, floatfmt=".3g"))
    return table


if __name__ == "__main__":
    main()
