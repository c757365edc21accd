"""Building a tabular benchmark of the embedded problem (the way NAS-Bench-201 was built): every configuration of a
discrete sub-space of the paper's DPN space trained to the maximum budget on ``experiment=showcase`` with ``seeds``
training seeds (0, 1, ...), with its validation and test metrics after every epoch.

The learning-rate schedule of every run spans the maximum budget, so epoch b of a run equals a b-epoch trial (the
continuation test, ``tests/test_train.py``, proves it): one run gives the objectives of every budget, and a search
over the table pays nothing but look-ups. The table (``<name>.csv``: one row per configuration and epoch) and its
spec (``<name>.json``: space, preset overrides, seeds, budgets, build time, machine) are written to ``tables``
(default: the shipped ones, :mod:`fairnas.benchmarks.tables`); ``bench/search_efficiency.py --problem table``
searches it. The table has a ``seed`` column: a search over it reads the row of the training seed its trial would
use (:class:`~fairnas.benchmarks.table_target.TableTarget`), so it sees the noise a live search sees.

:func:`build` trains through the ``train`` function it is given (``fairnas.training.run.train``), so this module
imports no command; ``bench/tabular.py build`` is the command that calls it::

    python bench/tabular.py build --name dpn_showcase_noisy --seeds 5    # resumable: finished runs are read back

Runs are trained seed by seed (every configuration with seed 0, then with seed 1, ...), so an interrupted build
holds whole seeds. A run lives in ``<work_dir>/<config id>/seed<s>/`` (checkpoints are not kept in the table);
``epochs.json`` there records its per-epoch metrics as soon as each epoch is validated. The single-seed table
``dpn_showcase`` (built before the ``seed`` column, its runs in ``<config id>/``) reads as seed 0.

A build too long for one sitting keeps its finished runs beside the tables as well, in the record
``<name>.runs.csv`` (the table's rows, rewritten under a lock after every run): commit it, and a build on another
machine, or after its run folders were lost, trains only the runs missing from it. The record is removed once the
table is written. Both hold each run's training seconds (``run_seconds``, on every row of the run), so a build that
extends a table (a larger ``--sobol`` design, more seeds) starts from the table when there is no record, and trains
only what it lacks.
"""

from __future__ import annotations

import json
import shutil
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import pandas as pd
import pytorch_lightning as pl
from filelock import FileLock
from omegaconf import DictConfig

from fairnas.benchmarks.design import grid
from fairnas.benchmarks.surrogate import TOP_SHARE
from fairnas.benchmarks.tables import TABLES, load_table, names, true_values
from fairnas.config import SPACES_DIR, compose_config
from fairnas.io import write_csv_atomic, write_json_atomic
from fairnas.provenance import machine, source_commit
from fairnas.search import SearchSpace, config_id, load_space

SPACE = SPACES_DIR / "dpn_table.yaml"
OBJECTIVES = ("error", "rank_disparity")
METRICS = ("error", "rank_disparity", "rank", "disparity", "error/g0", "error/g1", "rank/g0", "rank/g1")
EPOCHS_FILE = "epochs.json"
RECORD_SUFFIX = ".runs.csv"
MAX_BUDGET = 4
SEEDS = 5
Train = Callable[[DictConfig], Any]
"""``train(cfg)``: trains the run a composed ``train`` config describes into its ``output_dir``."""


class EpochRecorder(pl.Callback):
    """Writes every validated epoch's val and test metrics to ``<output_dir>/epochs.json`` (atomically)."""

    def __init__(self, path: str):
        self.path, self.epochs = Path(path), []

    def on_validation_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        if trainer.sanity_checking or trainer.state.fn != "fit":
            return
        self.epochs.append({split: dict(pl_module.evaluations[split]) for split in ("val", "test")})
        write_json_atomic(self.path, self.epochs)


def build(
    name: str,
    overrides: Sequence[str],
    work_dir: Path,
    train: Train,
    tables: Path = TABLES,
    space_file: Path = SPACE,
    max_budget: int = MAX_BUDGET,
    shard: tuple[int, int] = (0, 1),
    seeds: int = 1,
    configs: Sequence[dict[str, Any]] | None = None,
    command: str | None = None,
    top_seeds: int | None = None,
    extends: str | None = None,
) -> pd.DataFrame | None:
    """Train every configuration of ``space_file`` (``configs`` when given, e.g. a space-filling design of a space
    too large for a grid: :mod:`fairnas.benchmarks.design`) with seeds ``0 .. seeds-1`` (the runs not finished
    before, with ``train``) and write the table and its spec, which records ``command``.

    ``top_seeds`` extends a built table where searches end: the configurations of its :func:`top_region` also get
    seeds ``seeds .. top_seeds-1``, trained after every other run (the spec lists them under ``top_region``).
    ``extends`` names the built table a new table ``name`` starts from (its runs are read back, its top region
    chosen), which stays as it is; by default a build extends the table ``name`` itself.

    ``shard=(k, n)`` trains only every n-th run from the k-th (runs ordered seed by seed), so n single-threaded
    processes share the cores; whichever finds every run finished writes the table (``None`` until then).
    """
    space = load_space(space_file)
    configs = list(grid(space)) if configs is None else list(configs)
    runs = [(config, seed) for seed in range(seeds) for config in configs]
    if extends is not None and not (tables / f"{extends}.json").is_file():
        built = names(tables)
        raise ValueError(f"--extends {extends}: no built table {tables / extends}.json; the tables there: {built}")
    extends = extends or name
    top = [] if top_seeds is None else top_region(tables, extends, configs, seeds)
    runs += [(config, seed) for seed in range(seeds, top_seeds or 0) for config in top]
    base = table_overrides(overrides, max_budget)
    record = Record(tables / f"{name}{RECORD_SUFFIX}", work_dir, tables / f"{extends}.csv")
    _check_extends(tables / f"{extends}.json", base)
    start = time.perf_counter()
    recorded_before = record.runs()  # read once: no other shard trains this shard's runs
    for index, (config, seed) in enumerate(runs[shard[0] :: shard[1]]):
        if (config_id(config), seed) in recorded_before:
            continue
        epochs = train_config(config, seed, space, base, work_dir, train)
        seconds = json.loads((run_dir(work_dir, config, seed) / "seconds.json").read_text())
        recorded = record.add(pd.DataFrame(table_rows(config, seed, epochs, space)).assign(run_seconds=seconds))
        print(
            f"[table] shard {shard[0]}/{shard[1]} run {index + 1} {config_id(config)} seed {seed} {config}: val error "
            f"{epochs[-1]['val']['error']:.3f} rank disparity {epochs[-1]['val']['rank_disparity']:.2f} "
            f"({recorded} of {len(runs)} runs recorded)",
            flush=True,
        )
    with FileLock(record.lock):  # one shard writes the table, from the record
        order = {(config_id(config), seed): position for position, (config, seed) in enumerate(runs)}
        rows = record.rows()
        rows = rows.assign(_run=[order.get(key, -1) for key in zip(rows["config_id"], rows["seed"], strict=True)])
        rows = rows[rows["_run"] >= 0]
        if rows["_run"].nunique() < len(runs):
            return None
        rows = rows.sort_values(["_run", "epoch"], kind="stable")
        seconds = rows.drop_duplicates("_run")["run_seconds"]  # a table built before they were kept has none
        table = rows.drop(columns=["_run"]).reset_index(drop=True)
        write_csv_atomic(table, tables / f"{name}.csv")
        write_json_atomic(
            tables / f"{name}.json",
            {
                "space": str(space_file.relative_to(SPACES_DIR.parent))
                if space_file.is_relative_to(SPACES_DIR.parent)
                else str(space_file),
                "objectives": list(OBJECTIVES),
                "max_budget": max_budget,
                "seeds": list(range(seeds)),
                **({"top_region": top_spec(top, top_seeds)} if top_seeds is not None else {}),
                "train_overrides": list(base),
                "configurations": len(configs),
                "train_seconds": {"total": float(seconds.sum()), "median": float(seconds.median())},
                "build_command": command or f"python bench/tabular.py build --name {name} --seeds {seeds}",
                "this_invocation_seconds": time.perf_counter() - start,
                "shards": shard[1],
                "machine": machine(),
                "commit": source_commit(),
            },
        )
        record.path.unlink(missing_ok=True)
    return table


def top_region(tables: Path, name: str, configs: Sequence[dict[str, Any]], seeds: int) -> list[dict[str, Any]]:
    """The ``configs`` in the :data:`~fairnas.benchmarks.surrogate.TOP_SHARE` of the built table ``name`` lowest in
    mean validation error at its maximum budget over seeds ``0 .. seeds-1``: the surrogate's top region, chosen from
    those seeds alone, so runs added there do not move it. A table that has a top region already (its spec's
    ``top_region``) keeps it: a region chosen once stays, however many seeds its configurations get later. Stops
    with one line when the table is not built."""
    if not (tables / f"{name}.csv").is_file():
        raise ValueError(f"--top-seeds extends a built table, and {tables / name}.csv is not built yet")
    table, spec = load_table(name, tables)
    if "top_region" in spec:
        chosen = set(spec["top_region"]["config_ids"])
    else:
        error = true_values(table, ["error"], spec["max_budget"], seeds=range(seeds))["error"]
        chosen = set(error.index[error <= error.quantile(TOP_SHARE)])
    return [config for config in configs if config_id(config) in chosen]


def top_spec(top: Sequence[dict[str, Any]], top_seeds: int) -> dict[str, Any]:
    """The spec's record of a :func:`top_region` extension: its share, seeds and configuration ids."""
    return {"share": TOP_SHARE, "seeds": list(range(top_seeds)), "config_ids": sorted(map(config_id, top))}


def _check_extends(spec_file: Path, base: Sequence[str]) -> None:
    """A build that would extend the table of ``spec_file`` trains its runs as that table's were (``base``), or
    stops before training with one line naming the table."""
    if spec_file.is_file() and json.loads(spec_file.read_text())["train_overrides"] != list(base):
        raise ValueError(
            f"the table {spec_file.with_suffix('.csv')} was built with other training overrides or epochs "
            f"({spec_file.name}: train_overrides); give the new table another --name"
        )


class Record:
    """The finished runs of a build (``<tables>/<name>.runs.csv``): the table's rows of each run, with the run's
    training seconds as ``run_seconds``. Shards of one build share it; a lock in ``work_dir`` orders their writes.
    Without a record, the built ``table`` (when there is one) holds the finished runs."""

    def __init__(self, path: Path, work_dir: Path, table: Path):
        self.path, self.lock, self.table = path, work_dir / ".record.lock", table
        work_dir.mkdir(parents=True, exist_ok=True)

    def rows(self) -> pd.DataFrame:
        for path in (self.path, self.table):
            if path.is_file():
                return pd.read_csv(path, dtype={"config_id": str, "config": str})
        return pd.DataFrame(columns=["config_id", "seed"])

    def runs(self, rows: pd.DataFrame | None = None) -> set[tuple[str, int]]:
        """The (config id, seed) of every recorded run (of ``rows``, default the record's)."""
        rows = self.rows() if rows is None else rows
        return set(zip(rows["config_id"], rows["seed"].astype(int), strict=True))

    def add(self, run_rows: pd.DataFrame) -> int:
        """Add one run's rows (unless another shard did); the number of runs recorded."""
        with FileLock(self.lock):
            rows = self.rows()
            runs = self.runs(rows)
            if not self.runs(run_rows) <= runs:
                rows = run_rows if rows.empty else pd.concat([rows, run_rows], ignore_index=True)
                write_csv_atomic(rows, self.path)
                runs |= self.runs(run_rows)
            return len(runs)


def table_overrides(overrides: Sequence[str], max_budget: int) -> list[str]:
    """The training overrides of every run of a table built with ``overrides`` (its spec records them; the seed
    comes after them, per run)."""
    return [
        "experiment=showcase",
        "logger=none",
        "trainer.enable_progress_bar=false",
        *overrides,
        f"trainer.max_epochs={max_budget}",
        f"scheduler.horizon_epochs={max_budget}",
        "eval.test_every_epoch=true",
        "eval.test=false",
        "callbacks.model_checkpoint.save_top_k=0",
    ]


def run_dir(work_dir: Path, config: dict[str, Any], seed: int) -> Path:
    return work_dir / config_id(config) / f"seed{seed}"


def train_config(
    config: dict[str, Any], seed: int, space: SearchSpace, base: Sequence[str], work_dir: Path, train: Train
) -> list[dict]:
    """The per-epoch metrics of ``config``'s run with ``seed``, trained now (with ``train``) unless a finished run is
    on disk."""
    folder = run_dir(work_dir, config, seed)
    record = folder / "seconds.json"
    if not record.is_file():
        shutil.rmtree(folder, ignore_errors=True)  # an interrupted run starts over
        overrides = [
            *base,
            *space.overrides(config),
            f"seed={seed}",
            f"+callbacks.epoch_recorder._target_={EpochRecorder.__module__}.EpochRecorder",
            f"+callbacks.epoch_recorder.path={folder / EPOCHS_FILE}",
        ]
        started = time.perf_counter()
        train(compose_config("train", overrides, output_dir=folder))
        write_json_atomic(record, time.perf_counter() - started)
    return json.loads((folder / EPOCHS_FILE).read_text())


def table_rows(config: dict[str, Any], seed: int, epochs: list[dict], space: SearchSpace) -> list[dict]:
    """One row per epoch: the configuration's hyperparameters, the seed, then ``<split>/<metric>``."""
    return [
        {
            "config_id": config_id(config),
            "config": json.dumps(config, sort_keys=True),
            "seed": seed,
            "epoch": epoch,
            **{name: config.get(name) for name in space.keys},
            **{f"{split}/{metric}": float(metrics[split][metric]) for split in ("val", "test") for metric in METRICS},
        }
        for epoch, metrics in enumerate(epochs, start=1)
    ]
