"""Faults, counted: what a search loses, repeats or leaves unreadable when

1. ``driver``: its driver process is SIGKILLed at random points (``--kills`` times; each restart resumes the folder);
   ``driver-in-write``: the same, each kill waiting from its random point until a write is under way,
2. ``worker``: a local Dask worker process is SIGKILLed during a trial (``search.n_workers=2``),
3. ``disk-full``: the file system fills while a trial's record is written (a small tmpfs; needs root);
   ``disk-full-training``: ``search.py`` on tiny faces whose checkpoints fill a 20 MB tmpfs (needs root).

    PYTHONHASHSEED=0 python bench/faults.py --kills 20
    PYTHONHASHSEED=0 python bench/faults.py --cases driver --kills 5 --seed 1

Each search is ``run_search`` (trials.csv, search.json, pareto_front.csv, hypervolume.csv, SMAC's smac3/) on the
analytic problem (``fairnas.benchmarks.analytic``), whose trials take milliseconds, so the driver spends most of its
time writing, with its folder held by ``fairnas.run_lock`` as ``search.py`` holds it. After every fault the files
are read back; at the end the search runs to completion and its trials.csv is compared with every earlier one.
Counted: **lost** (a trial recorded after a fault and missing or changed later), **repeated** (a trial recorded
twice, by config, budget and seed, or a trial id used twice), **unreadable** (a file that does not parse after a
fault), and, for information, **re-run** (evaluations beyond one per recorded trial: a trial running at the fault
runs again) and **mid-write** (faults that left a writer's temporary file behind, i.e. landed inside a write).
Goal: 0 lost, 0 repeated, 0 unreadable. Everything is written under a temporary folder, removed at the end.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import textwrap
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pandas as pd

REPOSITORY = Path(__file__).resolve().parents[1]
CASES = ("driver", "driver-in-write", "worker", "disk-full", "disk-full-training")
TINY_FACES = [  # a few seconds per trial: the smoke preset's 24 identities of 32 px faces, on the CPU
    "experiment=smoke",
    "trainer.accelerator=cpu",
    "trainer.enable_progress_bar=false",
    "trainer.enable_model_summary=false",
]
FILES = ("trials.csv", "search.json", "pareto_front.csv", "hypervolume.csv")
SCRIPT = textwrap.dedent(
    """
    import contextlib, os, sys, time
    from pathlib import Path
    from fairnas.benchmarks.analytic import NoisyMultiFidelityProblem
    from fairnas.search import SearchSettings, config_id, run_search
    from fairnas.run_lock import run_folder_lock

    output_dir, calls, n_trials, n_workers, pause, fill_at, fill = (sys.argv + [""] * 8)[1:8]
    problem = NoisyMultiFidelityProblem("zdt1", n_variables=3)

    def target(config, seed, budget):
        with open(calls, "a") as log:
            log.write(f"{config_id(config)},{budget},{seed},{os.getpid()}\\n")
        n_calls = sum(1 for _ in open(calls))
        Path(f"{calls}.running.{os.getpid()}").write_text(str(n_calls))
        time.sleep(float(pause))
        if n_calls == int(fill_at):  # fill the output file system: the next write is this trial's record
            with contextlib.suppress(OSError), open(fill, "wb") as filler:
                while True:
                    filler.write(b"\\0" * 65536)
                    filler.flush()
        return problem(config, seed, budget)

    if __name__ == "__main__":  # (Dask's spawned workers import this file too)
        settings = SearchSettings(problem.objectives, min_budget=1, max_budget=4, n_trials=int(n_trials),
                                  n_workers=int(n_workers), final={"seeds": 0})
        with run_folder_lock(output_dir):
            run_search(target, problem.configspace(), settings, output_dir=output_dir)
    """
)


class Search:
    """One search folder (``<folder>``, default ``<root>/search``) and the command that runs (or resumes) it; its
    script, log and the log of target calls live in ``root``."""

    def __init__(
        self,
        root: Path,
        n_trials: int,
        *,
        folder: Path | None = None,
        n_workers: int = 1,
        pause: float = 0.0,
        fill_at: int = 0,
    ):
        self.root = root
        self.folder = folder or root / "search"
        self.calls = root / "calls.csv"
        self.script = root / "search_script.py"
        self.script.write_text(SCRIPT)
        self.n_trials = n_trials
        self.args = [str(self.folder), str(self.calls), str(n_trials), str(n_workers), str(pause), str(fill_at)]
        self.snapshots: list[pd.DataFrame] = []
        self.unreadable: Counter[str] = Counter()
        self.mid_write = 0
        self.faults = 0

    def start(self, fill: Path | None = None) -> subprocess.Popen:
        env = {**os.environ, "PYTHONHASHSEED": "0", "PYTHONPATH": str(REPOSITORY), "OMP_NUM_THREADS": "1"}
        command = [sys.executable, str(self.script), *self.args, str(fill or self.root / "unused")]
        with open(self.root / "stderr.log", "ab") as log:
            return subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL, stderr=log)

    def finish(self) -> None:
        """Run to the end; it must succeed."""
        process = self.start()
        if process.wait(timeout=1800) != 0:
            raise RuntimeError((self.root / "stderr.log").read_text()[-3000:])

    def after_fault(self) -> None:
        """Read every file back, keep trials.csv, count temporary files left inside the folder (then remove them,
        as they would otherwise count again)."""
        self.faults += 1
        for name in FILES:
            path = self.folder / name
            if not path.exists():
                continue
            try:
                frame = json.loads(path.read_text()) if name.endswith(".json") else pd.read_csv(path)
            except (ValueError, OSError, pd.errors.ParserError):
                self.unreadable[name] += 1
                continue
            if name == "trials.csv":
                self.snapshots.append(frame)
        left = [path for path in self.folder.glob(".*") if path.name not in (".fairnas.lock", ".fairnas.lock.json")]
        self.mid_write += bool(left)
        for path in left:
            path.unlink()

    def counts(self) -> dict[str, int]:
        final = pd.read_csv(self.folder / "trials.csv")
        twice = final.duplicated(["config_id", "budget", "seed"]).sum() + final["trial_id"].duplicated().sum()
        keys = ["trial_id", "config_id", "budget", "seed", "status", "f1", "f2"]
        recorded = {tuple(row) for row in final[keys].itertuples(index=False)}
        lost = set()
        for snapshot in self.snapshots:
            lost |= {tuple(row) for row in snapshot[keys].itertuples(index=False)} - recorded
        evaluations = len(self.calls.read_text().splitlines()) if self.calls.exists() else 0
        return {
            "faults": self.faults,
            "trials": len(final),
            "lost": len(lost) + max(0, self.n_trials - len(final)),
            "repeated": int(twice),
            "unreadable": sum(self.unreadable.values()),
            "re-run": evaluations - len(final),
            "mid-write": self.mid_write,
            "crashed": int((final["status"] == "crashed").sum()),
        }


def driver_kills(root: Path, kills: int, rng: random.Random, *, in_write: bool = False) -> dict[str, int]:
    """SIGKILL the driver ``kills`` times, each at a random moment of its run (``in_write``: at the first moment
    after it that a write is under way, seen by its temporary file), then let it finish."""
    search = Search(root, n_trials=10 * kills + 20)
    for _ in range(kills):
        process = search.start()
        rows = _rows(search.folder / "trials.csv")
        while _rows(search.folder / "trials.csv") == rows and process.poll() is None:  # the loop writes
            time.sleep(0.01)
        time.sleep(rng.uniform(0.0, 1.5))
        while in_write and process.poll() is None and not _writing(search.folder):
            pass  # spin: a write lasts milliseconds
        if process.poll() is not None:
            if process.returncode != 0:  # a restart that could not resume the folder
                raise RuntimeError((root / "stderr.log").read_text()[-3000:])
            break  # finished before this kill
        process.send_signal(signal.SIGKILL)
        process.wait()
        search.after_fault()
    search.finish()
    return search.counts()


def _writing(folder: Path) -> bool:
    """Whether a writer's temporary file (``fairnas.io.atomic_path``: ``.<name>.<random><suffix>``) is in ``folder``."""
    with contextlib.suppress(OSError):
        return any(name.startswith(".") and not name.startswith(".fairnas.lock") for name in os.listdir(folder))
    return False


def worker_kill(root: Path) -> dict[str, int]:
    """SIGKILL the local Dask worker process running the 5th trial, mid-trial; the search goes on."""
    search = Search(root, n_trials=10, n_workers=2, pause=1.0)
    process = search.start()
    deadline = time.monotonic() + 600
    victim = None
    while victim is None:
        if process.poll() is not None or time.monotonic() > deadline:
            raise RuntimeError((root / "stderr.log").read_text()[-3000:])
        for marker in root.glob("calls.csv.running.*"):
            with contextlib.suppress(ValueError, OSError):
                if int(marker.read_text()) == 5:
                    victim = int(marker.name.rsplit(".", 1)[1])
        time.sleep(0.02)
    os.kill(victim, signal.SIGKILL)
    search.faults += 1
    if process.wait(timeout=600) != 0:
        raise RuntimeError((root / "stderr.log").read_text()[-3000:])
    search.after_fault()
    search.faults -= 1
    return search.counts()


@contextlib.contextmanager
def tmpfs(root: Path, size: str) -> Iterator[Path]:
    """A tmpfs of ``size`` (e.g. ``2m``) mounted at ``root/tmpfs`` for the block (mounting needs root)."""
    if os.geteuid() != 0:
        raise PermissionError("mounting a tmpfs needs root")
    mount = root / "tmpfs"
    mount.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(mount)], check=True, capture_output=True)
    try:
        yield mount
    finally:
        subprocess.run(["umount", str(mount)], check=False, capture_output=True)


def disk_full(root: Path) -> dict[str, int]:
    """The 6th trial fills a 2 MB tmpfs holding the search folder before returning, so writing its record fails;
    the folder is read back, the space freed, and the search resumed."""
    with tmpfs(root, "2m") as mount:
        search = Search(root, n_trials=12, folder=mount / "search", fill_at=6)
        process = search.start(fill=mount / "filler")
        code = process.wait(timeout=600)
        error = (root / "stderr.log").read_text()
        if code == 0 or "No space left on device" not in error:
            raise RuntimeError(f"expected the search to stop on a full disk; exit {code}: {error[-2000:]}")
        search.after_fault()
        (mount / "filler").unlink()
        search.finish()
        return search.counts()


def disk_full_in_training(root: Path) -> dict[str, int]:
    """``search.py`` on tiny faces (3 one-epoch trials) writing to a 200 MB tmpfs that a filler file leaves 4 MB of,
    less than a checkpoint. A full disk stops the search with one line and leaves the trial unrecorded; the filler is
    deleted and the same command runs again, until it finishes (at most 6 times). A trial recorded as crashed counts
    as lost: a resumed search never runs it again."""
    with tmpfs(root, "200m") as mount:
        filler = mount / "filler"
        with open(filler, "wb") as file:
            file.write(b"\0" * (shutil.disk_usage(mount).free - 4 * 2**20))
        train = [*TINY_FACES, f"paths.cache_dir={root / 'cache'}", "logger=none"]
        command = [
            sys.executable,
            str(REPOSITORY / "search.py"),
            "search.train_overrides=[" + ",".join(f"'{o}'" for o in train) + "]",
            "search.strategy=random",
            "search.n_trials=3",
            "search.total_budget=null",
            "search.min_budget=1",
            "search.max_budget=1",
            "search.final.seeds=0",
            "logger=none",
            f"hydra.run.dir={mount / 'search'}",
        ]
        env = {**os.environ, "PYTHONHASHSEED": "0", "OMP_NUM_THREADS": "1", "WANDB_MODE": "offline"}
        stops = []
        for _ in range(6):
            done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=1800, cwd=root)
            if done.returncode == 0:
                break
            last = done.stderr.strip().splitlines()[-1]
            if "No space left" not in last and "no space left" not in last:
                raise RuntimeError(done.stderr[-3000:])
            stops.append(last)
            filler.unlink(missing_ok=True)  # free the space for the resumed search
        else:
            raise RuntimeError(f"the search did not finish in 6 attempts: {stops}")
        final = pd.read_csv(mount / "search" / "trials.csv")
        crashed = final["status"] == "crashed"
        print(
            f"{len(stops)} stops on the full disk, e.g. {stops[:1]}; then {len(final)} trials, "
            f"{int(crashed.sum())} crashed"
        )
        return {
            "faults": len(stops),
            "trials": len(final),
            "lost": int(crashed.sum()) + max(0, 3 - len(final)),
            "repeated": int(final.duplicated(["config_id", "budget", "seed"]).sum()),
            "unreadable": 0,
            "re-run": 0,
            "mid-write": 0,
            "crashed": int(crashed.sum()),
        }


def _rows(path: Path) -> int:
    try:
        return len(pd.read_csv(path))
    except (OSError, ValueError):
        return 0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", nargs="+", choices=CASES, default=list(CASES))
    parser.add_argument("--kills", type=int, default=20, help="driver kills (default 20)")
    parser.add_argument("--seed", type=int, default=0, help="seed of the kill times")
    args = parser.parse_args()
    rows = []
    for case in args.cases:
        root = Path(tempfile.mkdtemp(prefix=f"fairnas-faults-{case}-"))
        try:
            if case in ("driver", "driver-in-write"):
                counts = driver_kills(root, args.kills, random.Random(args.seed), in_write=case == "driver-in-write")
            elif case == "worker":
                counts = worker_kill(root)
            elif case == "disk-full":
                counts = disk_full(root)
            else:
                counts = disk_full_in_training(root)
            rows.append({"case": case, **counts})
        except PermissionError as error:
            rows.append({"case": case, "skipped": str(error)})
        finally:
            shutil.rmtree(root, ignore_errors=True)
        print(pd.DataFrame(rows[-1:]).to_string(index=False), flush=True)
    print()
    print(pd.DataFrame(rows).to_markdown(index=False))


if __name__ == "__main__":
    main()
