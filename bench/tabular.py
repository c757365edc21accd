"""A tabular benchmark of the embedded problem (the way NAS-Bench-201 was built): every configuration of a discrete
sub-space of the paper's DPN space trained once to the maximum budget on ``experiment=showcase``, with its
validation and test metrics after every epoch.

The learning-rate schedule of every run spans the maximum budget, so epoch b of a run equals a b-epoch trial (the
continuation test, ``tests/test_train.py``, proves it): one run gives the objectives of every budget, and a search
over the table pays nothing but look-ups. The table (``<name>.csv``: one row per configuration and epoch) and its
spec (``<name>.json``: space, preset overrides, seed, budgets, build time, machine) live under ``bench/tables/``;
``bench/search_efficiency.py --problem table`` searches it.

    python bench/tabular.py build --name dpn_showcase               # resumable: finished runs are read back
    python bench/tabular.py summary --name dpn_showcase             # size, front, spread of the table

On 2 cores, two single-threaded shards finish sooner than one two-threaded process::

    OMP_NUM_THREADS=1 python bench/tabular.py build --shard 0/2 &
    OMP_NUM_THREADS=1 python bench/tabular.py build --shard 1/2

A run lives in ``outputs/tabular/<name>/<config id>/`` (checkpoints are not kept in the table); ``epochs.json``
there records its per-epoch metrics as soon as each epoch is validated.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import platform
import shutil
import subprocess
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pandas as pd
import pytorch_lightning as pl
from ConfigSpace import ConfigurationSpace

from fairnas.config import compose_config
from fairnas.io import write_csv_atomic, write_json_atomic
from fairnas.search import SearchSpace, config_id, load_space
from fairnas.search.hypervolume import hypervolume
from fairnas.search.pareto import non_dominated_mask
from fairnas.search.trial import native_config
from fairnas.tasks.train import train

REPOSITORY = Path(__file__).resolve().parents[1]
TABLES = REPOSITORY / "bench" / "tables"
SPACE = REPOSITORY / "searchspaces" / "dpn_table.yaml"
OBJECTIVES = ("error", "rank_disparity")
METRICS = ("error", "rank_disparity", "rank", "disparity", "error/g0", "error/g1", "rank/g0", "rank/g1")
EPOCHS_FILE = "epochs.json"
MAX_BUDGET = 4
SEED = 0


class EpochRecorder(pl.Callback):
    """Writes every validated epoch's val and test metrics to ``<output_dir>/epochs.json`` (atomically)."""

    def __init__(self, path: str):
        self.path, self.epochs = Path(path), []

    def on_validation_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        if trainer.sanity_checking or trainer.state.fn != "fit":
            return
        self.epochs.append({split: dict(pl_module.evaluations[split]) for split in ("val", "test")})
        write_json_atomic(self.path, self.epochs)


def grid(space: SearchSpace) -> Iterator[dict[str, Any]]:
    """Every configuration of a space of categorical / ordinal / constant hyperparameters, conditions respected
    (an inactive hyperparameter is absent), each once, in a fixed order."""
    configspace: ConfigurationSpace = space.configspace
    seen = set()
    names = list(configspace)
    choices = [_values(configspace[name]) for name in names]
    for values in itertools.product(*choices):
        candidate = dict(zip(names, values, strict=False))
        active = {name: value for name, value in candidate.items() if _is_active(configspace, name, candidate)}
        key = config_id(active)
        if key not in seen:
            seen.add(key)
            yield native_config(active)


def _values(hyperparameter) -> list[Any]:
    for attribute in ("choices", "sequence"):
        if hasattr(hyperparameter, attribute):
            return list(getattr(hyperparameter, attribute))
    if hasattr(hyperparameter, "value"):
        return [hyperparameter.value]
    raise ValueError(f"hyperparameter '{hyperparameter.name}' is not discrete; a table needs a grid")


def _is_active(configspace: ConfigurationSpace, name: str, values: dict[str, Any]) -> bool:
    for condition in configspace.parent_conditions_of[name]:
        parent = condition.parent.name
        if not _is_active(configspace, parent, values) or not condition.satisfied_by_value(values):
            return False
    return True


def build(
    name: str,
    overrides: Sequence[str],
    work_dir: Path,
    tables: Path = TABLES,
    space_file: Path = SPACE,
    max_budget: int = MAX_BUDGET,
    shard: tuple[int, int] = (0, 1),
) -> pd.DataFrame | None:
    """Train every configuration of ``space_file`` (those not finished before) and write the table and its spec.

    ``shard=(k, n)`` trains only every n-th configuration from the k-th, so n single-threaded processes share the
    cores; whichever finds every run finished writes the table (``None`` until then).
    """
    space = load_space(space_file)
    configs = list(grid(space))
    base = table_overrides(overrides, max_budget)
    start = time.perf_counter()
    for index, config in enumerate(configs[shard[0] :: shard[1]]):
        epochs = train_config(config, space, base, work_dir)
        print(
            f"[table] shard {shard[0]}/{shard[1]} run {index + 1} {config_id(config)} {config}: val error "
            f"{epochs[-1]['val']['error']:.3f} rank disparity {epochs[-1]['val']['rank_disparity']:.2f}",
            flush=True,
        )
    if not all((work_dir / config_id(config) / "seconds.json").is_file() for config in configs):
        return None
    table = pd.DataFrame(
        [row for config in configs for row in table_rows(config, train_config(config, space, base, work_dir), space)]
    )
    seconds = {
        config_id(config): json.loads((work_dir / config_id(config) / "seconds.json").read_text()) for config in configs
    }
    write_csv_atomic(table, tables / f"{name}.csv")
    write_json_atomic(
        tables / f"{name}.json",
        {
            "space": str(space_file.relative_to(REPOSITORY))
            if space_file.is_relative_to(REPOSITORY)
            else str(space_file),
            "objectives": list(OBJECTIVES),
            "max_budget": max_budget,
            "seed": SEED,
            "train_overrides": base,
            "configurations": len(configs),
            "train_seconds": {"total": sum(seconds.values()), "median": float(pd.Series(seconds).median())},
            "build_command": f"python bench/tabular.py build --name {name}",
            "this_invocation_seconds": time.perf_counter() - start,
            "shards": shard[1],
            "machine": f"{platform.machine()}, {os.cpu_count()} CPU cores",
            "commit": _commit(),
        },
    )
    return table


def table_overrides(overrides: Sequence[str], max_budget: int) -> list[str]:
    """The training overrides of every run of a table built with ``overrides`` (its spec records them)."""
    return [
        "experiment=showcase",
        "logger=none",
        "trainer.enable_progress_bar=false",
        *overrides,
        f"trainer.max_epochs={max_budget}",
        f"scheduler.horizon_epochs={max_budget}",
        f"seed={SEED}",
        "eval.test_every_epoch=true",
        "eval.test=false",
        "callbacks.model_checkpoint.save_top_k=0",
    ]


def train_config(config: dict[str, Any], space: SearchSpace, base: Sequence[str], work_dir: Path) -> list[dict]:
    """The per-epoch metrics of ``config``'s run, trained now unless a finished run is on disk."""
    run_dir = work_dir / config_id(config)
    record = run_dir / "seconds.json"
    if not record.is_file():
        shutil.rmtree(run_dir, ignore_errors=True)  # an interrupted run starts over
        overrides = [
            *base,
            *space.overrides(config),
            f"+callbacks.epoch_recorder._target_={EpochRecorder.__module__}.EpochRecorder",
            f"+callbacks.epoch_recorder.path={run_dir / EPOCHS_FILE}",
        ]
        started = time.perf_counter()
        train(compose_config("train", overrides, output_dir=run_dir))
        write_json_atomic(record, time.perf_counter() - started)
    return json.loads((run_dir / EPOCHS_FILE).read_text())


def table_rows(config: dict[str, Any], epochs: list[dict], space: SearchSpace) -> list[dict]:
    """One row per epoch: the configuration's hyperparameters, then ``<split>/<metric>``."""
    return [
        {
            "config_id": config_id(config),
            "config": json.dumps(config, sort_keys=True),
            "epoch": epoch,
            **{name: config.get(name) for name in space.keys},
            **{f"{split}/{metric}": float(metrics[split][metric]) for split in ("val", "test") for metric in METRICS},
        }
        for epoch, metrics in enumerate(epochs, start=1)
    ]


def load_table(name: str, tables: Path = TABLES) -> tuple[pd.DataFrame, dict]:
    """The table ``<tables>/<name>.csv`` and its spec."""
    return pd.read_csv(tables / f"{name}.csv"), json.loads((tables / f"{name}.json").read_text())


class TableTarget:
    """A search target that looks the objectives up instead of training: ``target(config, seed, budget)`` returns
    the validation (or ``split``) metrics of ``config``'s run after ``budget`` epochs. The table holds one training
    seed per configuration, so the search's seed changes only the search."""

    def __init__(self, table: pd.DataFrame, objectives: Sequence[str], split: str = "val"):
        self._rows = {(row["config_id"], int(row["epoch"])): row for row in table.to_dict("records")}
        self._columns = {name: f"{split}/{name}" for name in objectives}

    def __call__(self, config: dict[str, Any], seed: int, budget: float) -> dict[str, float]:
        return self.lookup(config_id(config), budget)

    def lookup(self, identifier: str, budget: float) -> dict[str, float]:
        """The objectives of the configuration whose ``config_id`` is ``identifier`` after ``budget`` epochs."""
        row = self._rows[(identifier, int(round(budget)))]
        return {name: float(row[column]) for name, column in self._columns.items()}


def front_hypervolume(
    table: pd.DataFrame,
    objectives: Sequence[str],
    max_budget: int,
    reference_point: Sequence[float],
    split: str = "val",
) -> float:
    """Hypervolume of the table's own front at the maximum budget: the best any search of the table can reach."""
    final = table[table["epoch"] == max_budget]
    return hypervolume(final[[f"{split}/{name}" for name in objectives]].to_numpy(dtype=float), reference_point)


def summary(table: pd.DataFrame, spec: dict) -> str:
    """Size, the validation front at the maximum budget and the spread of the objectives."""
    final = table[table["epoch"] == spec["max_budget"]]
    columns = [f"val/{name}" for name in spec["objectives"]]
    front = final[non_dominated_mask(final[columns].to_numpy(dtype=float))].sort_values(columns[0])
    lines = [
        f"{spec['configurations']} configurations x {spec['max_budget']} epochs; training "
        f"{spec['train_seconds']['total'] / 60:.0f} min (median {spec['train_seconds']['median']:.0f} s)",
        final[columns].describe().round(3).to_string(),
        "validation front at the maximum budget:",
        front[["config", *columns]].to_string(index=False),
    ]
    return "\n".join(lines)


def _commit() -> str:
    done = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=REPOSITORY, capture_output=True, text=True)
    return done.stdout.strip()


def _shard(text: str) -> tuple[int, int]:
    """``K/N`` with 0 <= K < N."""
    k, _, n = text.partition("/")
    if not (k.isdigit() and n.isdigit() and int(k) < int(n)):
        raise argparse.ArgumentTypeError(f"--shard must be K/N with 0 <= K < N, got {text!r}")
    return int(k), int(n)


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("command", choices=["build", "summary"])
    parser.add_argument("--name", default="dpn_showcase")
    parser.add_argument("--work-dir", type=Path, help="run folders (default outputs/tabular/<name>)")
    parser.add_argument("--tables", type=Path, default=TABLES, help="folder of the table and its spec")
    parser.add_argument("--space", type=Path, default=SPACE, help="the discrete space file to tabulate")
    parser.add_argument("--max-budget", type=int, default=MAX_BUDGET, help="epochs of every run")
    parser.add_argument("--overrides", nargs="*", default=[], help="train.py overrides after experiment=showcase")
    parser.add_argument(
        "--shard",
        type=_shard,
        default=(0, 1),
        metavar="K/N",
        help="train every N-th configuration from the K-th (run N processes, K = 0..N-1)",
    )
    args = parser.parse_args(argv)
    if args.command == "build":
        work_dir = args.work_dir or REPOSITORY / "outputs" / "tabular" / args.name
        if (
            build(args.name, args.overrides, work_dir, args.tables, args.space.resolve(), args.max_budget, args.shard)
            is None
        ):
            print(f"[table] shard {args.shard[0]}/{args.shard[1]} done; other shards still running")
            return
    print(summary(*load_table(args.name, args.tables)))


if __name__ == "__main__":
    main()
