"""A tabular benchmark of the embedded problem (the way NAS-Bench-201 was built): every configuration of a discrete
sub-space of the paper's DPN space trained to the maximum budget on ``experiment=showcase`` with ``--seeds`` training
seeds (0, 1, ...), with its validation and test metrics after every epoch.

The learning-rate schedule of every run spans the maximum budget, so epoch b of a run equals a b-epoch trial (the
continuation test, ``tests/test_train.py``, proves it): one run gives the objectives of every budget, and a search
over the table pays nothing but look-ups. The table (``<name>.csv``: one row per configuration and epoch) and its
spec (``<name>.json``: space, preset overrides, seeds, budgets, build time, machine) live under ``bench/tables/``;
``bench/search_efficiency.py --problem table`` searches it. The table has a ``seed`` column: a search over it
reads the row of the training seed its trial would use (``TableTarget``), so it sees the noise a live search sees.

    python bench/tabular.py build --name dpn_showcase_noisy --seeds 5    # resumable: finished runs are read back
    python bench/tabular.py summary --name dpn_showcase_noisy            # size, front, spread of the table

On 2 cores, two single-threaded shards finish sooner than one two-threaded process::

    OMP_NUM_THREADS=1 python bench/tabular.py build --name dpn_showcase_noisy --seeds 5 --shard 0/2 &
    OMP_NUM_THREADS=1 python bench/tabular.py build --name dpn_showcase_noisy --seeds 5 --shard 1/2

Runs are trained seed by seed (every configuration with seed 0, then with seed 1, ...), so an interrupted build
holds whole seeds. A run lives in ``outputs/tabular/<name>/<config id>/seed<s>/`` (checkpoints are not kept in the
table); ``epochs.json`` there records its per-epoch metrics as soon as each epoch is validated. The single-seed table
``dpn_showcase`` (built before the ``seed`` column, its runs in ``<config id>/``) reads as seed 0.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import platform
import shutil
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytorch_lightning as pl
from ConfigSpace import ConfigurationSpace

from fairnas.config import compose_config
from fairnas.io import write_csv_atomic, write_json_atomic
from fairnas.results import source_commit
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
SEEDS = 5


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
    seeds: int = 1,
) -> pd.DataFrame | None:
    """Train every configuration of ``space_file`` with seeds ``0 .. seeds-1`` (the runs not finished before) and
    write the table and its spec.

    ``shard=(k, n)`` trains only every n-th run from the k-th (runs ordered seed by seed), so n single-threaded
    processes share the cores; whichever finds every run finished writes the table (``None`` until then).
    """
    space = load_space(space_file)
    configs = list(grid(space))
    runs = [(config, seed) for seed in range(seeds) for config in configs]
    base = table_overrides(overrides, max_budget)
    start = time.perf_counter()
    for index, (config, seed) in enumerate(runs[shard[0] :: shard[1]]):
        epochs = train_config(config, seed, space, base, work_dir)
        print(
            f"[table] shard {shard[0]}/{shard[1]} run {index + 1} {config_id(config)} seed {seed} {config}: val error "
            f"{epochs[-1]['val']['error']:.3f} rank disparity {epochs[-1]['val']['rank_disparity']:.2f}",
            flush=True,
        )
    if not all((run_dir(work_dir, config, seed) / "seconds.json").is_file() for config, seed in runs):
        return None
    table = pd.DataFrame(
        [
            row
            for config, seed in runs
            for row in table_rows(config, seed, train_config(config, seed, space, base, work_dir), space)
        ]
    )
    seconds = pd.Series(
        [json.loads((run_dir(work_dir, config, seed) / "seconds.json").read_text()) for config, seed in runs]
    )
    write_csv_atomic(table, tables / f"{name}.csv")
    write_json_atomic(
        tables / f"{name}.json",
        {
            "space": str(space_file.relative_to(REPOSITORY))
            if space_file.is_relative_to(REPOSITORY)
            else str(space_file),
            "objectives": list(OBJECTIVES),
            "max_budget": max_budget,
            "seeds": list(range(seeds)),
            "train_overrides": base,
            "configurations": len(configs),
            "train_seconds": {"total": float(seconds.sum()), "median": float(seconds.median())},
            "build_command": f"python bench/tabular.py build --name {name} --seeds {seeds}",
            "this_invocation_seconds": time.perf_counter() - start,
            "shards": shard[1],
            "machine": f"{platform.machine()}, {os.cpu_count()} CPU cores",
            "commit": source_commit(),
        },
    )
    return table


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
    config: dict[str, Any], seed: int, space: SearchSpace, base: Sequence[str], work_dir: Path
) -> list[dict]:
    """The per-epoch metrics of ``config``'s run with ``seed``, trained now unless a finished run is on disk."""
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


def load_table(name: str, tables: Path = TABLES) -> tuple[pd.DataFrame, dict]:
    """The table ``<tables>/<name>.csv`` and its spec; a single-seed table built before the ``seed`` column reads as
    seed 0 (its spec's ``seed``)."""
    table, spec = pd.read_csv(tables / f"{name}.csv"), json.loads((tables / f"{name}.json").read_text())
    if "seed" not in table:
        table.insert(2, "seed", spec["seed"])
        spec["seeds"] = [spec["seed"]]
    return table, spec


class TableTarget:
    """A search target that looks the objectives up instead of training: ``target(config, seed, budget)`` returns
    the validation (or ``split``) metrics of ``config``'s run after ``budget`` epochs with the table seed its training
    seed stands for. The first distinct training seed a search asks for reads the table's seed ``seed_order[0]``, the
    next new one ``seed_order[1]``, and so on (default order: the table's seeds ascending): each new training seed is a
    fresh training run, as in a live search, up to the number of seeds the table holds. ``assigned`` maps the
    training seeds seen so far to their table seeds; :meth:`assign` replays them in order when a search resumes."""

    def __init__(
        self, table: pd.DataFrame, objectives: Sequence[str], split: str = "val", seed_order: Sequence[int] = ()
    ):
        self._rows = {(row["config_id"], int(row["seed"]), int(row["epoch"])): row for row in table.to_dict("records")}
        self._columns = {name: f"{split}/{name}" for name in objectives}
        self.seed_order = [int(seed) for seed in seed_order] or sorted(int(seed) for seed in table["seed"].unique())
        self.assigned: dict[int, int] = {}

    def __call__(self, config: dict[str, Any], seed: int, budget: float) -> dict[str, float]:
        return self.lookup(config_id(config), budget, self.assign(seed))

    def assign(self, seed: int) -> int:
        """The table seed of training seed ``seed`` (the next unused one of ``seed_order`` when it is new)."""
        if seed not in self.assigned:
            if len(self.assigned) == len(self.seed_order):
                raise ValueError(
                    f"the table holds {len(self.seed_order)} training seeds; training seed {seed} would be one more"
                )
            self.assigned[seed] = self.seed_order[len(self.assigned)]
        return self.assigned[seed]

    def lookup(self, identifier: str, budget: float, table_seed: int | None = None) -> dict[str, float]:
        """The objectives of the configuration whose ``config_id`` is ``identifier`` after ``budget`` epochs, from the
        run with ``table_seed`` (default: the first of ``seed_order``)."""
        seed = self.seed_order[0] if table_seed is None else table_seed
        row = self._rows[(identifier, seed, int(round(budget)))]
        return {name: float(row[column]) for name, column in self._columns.items()}


def true_values(
    table: pd.DataFrame,
    objectives: Sequence[str],
    max_budget: int,
    split: str = "val",
    seeds: Sequence[int] | None = None,
) -> pd.DataFrame:
    """Every configuration's objectives at the maximum budget, averaged over the table's ``seeds`` (default all):
    the 'true' value a search's answer is judged at (one column per objective, indexed by ``config_id``)."""
    final = table[table["epoch"] == max_budget]
    if seeds is not None:
        final = final[final["seed"].isin(list(seeds))]
    columns = {f"{split}/{name}": name for name in objectives}
    return final.groupby("config_id")[list(columns)].mean().rename(columns=columns)


def front_hypervolume(
    table: pd.DataFrame,
    objectives: Sequence[str],
    max_budget: int,
    reference_point: Sequence[float],
    split: str = "val",
) -> float:
    """Hypervolume of the front of the table's true values (means over its seeds) at the maximum budget: the best a
    search's answer can reach in truth."""
    values = true_values(table, objectives, max_budget, split)
    return hypervolume(values[list(objectives)].to_numpy(dtype=float), reference_point)


def summary(table: pd.DataFrame, spec: dict) -> str:
    """Size, the front of the true values (means over seeds) at the maximum budget, the spread of the objectives
    and, with several seeds, their seed noise."""
    objectives, max_budget = spec["objectives"], spec["max_budget"]
    values = true_values(table, objectives, max_budget)
    front = values[non_dominated_mask(values.to_numpy(dtype=float))].sort_values(objectives[0])
    configs = table.drop_duplicates("config_id").set_index("config_id")["config"]
    final = table[table["epoch"] == max_budget]
    lines = [
        f"{spec['configurations']} configurations x {len(spec['seeds'])} seeds x {max_budget} epochs; training "
        f"{spec['train_seconds']['total'] / 60:.0f} min (median run {spec['train_seconds']['median']:.0f} s)",
        values.describe().round(3).to_string(),
    ]
    if len(spec["seeds"]) > 1:
        noise = final.groupby("config_id")[[f"val/{name}" for name in objectives]].std().median()
        lines.append("median seed s.d. per configuration: " + ", ".join(f"{k} {v:.3f}" for k, v in noise.items()))
    lines += ["front of the means at the maximum budget:", front.assign(config=configs[front.index]).to_string()]
    return "\n".join(lines)


LEARNS = 0.9
"""Mean validation error below which a configuration counts as learning (chance is about 0.997)."""


def landscape(table: pd.DataFrame, spec: dict, split: str = "val", knob: str = "group_alpha") -> str:
    """Does the table's space trade error against rank disparity, and how much do the operations add to ``knob``?

    Over the configurations that learn (mean error below :data:`LEARNS`), at the maximum budget: Spearman's rank
    correlation of the means; the front of the means, and how many of its configurations are told apart, walking it
    in order of error and keeping a configuration when its paired difference (over the table's seeds) from the last
    one kept exceeds 2 standard errors in either objective; the share of the variance of each objective between the
    knob's values and between the operation triples; the best triple at each value of the knob, and Kendall's tau
    between the triples' error rankings at each pair of values."""
    from scipy.stats import kendalltau, spearmanr

    objectives, max_budget = list(spec["objectives"]), spec["max_budget"]
    final = table[table["epoch"] == max_budget]
    columns = [f"{split}/{name}" for name in objectives]
    means = final.groupby("config_id")[columns].mean()
    learning = means[means[columns[0]] < LEARNS]
    configs = final.drop_duplicates("config_id").set_index("config_id").loc[learning.index]
    rho = spearmanr(learning[columns[0]], learning[columns[1]]).statistic
    front = learning[non_dominated_mask(learning.to_numpy(dtype=float))].sort_values(columns[0])
    per_seed = final.pivot_table(index="seed", columns="config_id", values=columns)
    kept = [front.index[0]]
    for candidate in front.index[1:]:
        margins = []
        for column in columns:
            difference = per_seed[column][candidate] - per_seed[column][kept[-1]]
            margins.append(abs(difference.mean()) / difference.sem() if difference.sem() > 0 else np.inf)
        if max(margins) > 2:
            kept.append(candidate)
    triples = configs[["op0", "op1", "op2"]].astype(str).agg("-".join, axis=1)
    lines = [
        f"{len(learning)} of {len(means)} configurations learn ({split}, {len(spec['seeds'])} seeds, means):",
        f"Spearman(error, rank disparity) = {rho:.2f}",
        f"front of the means: {len(front)} configurations, {len(kept)} of them apart by more than 2 s.e. (paired):",
        front.assign(config=configs.loc[front.index, "config"], kept=front.index.isin(kept)).round(3).to_string(),
    ]
    for column in columns:
        total = ((learning[column] - learning[column].mean()) ** 2).sum()
        for name, groups in ((knob, configs[knob]), ("operations", triples)):
            between = learning.groupby(groups)[column].agg(["mean", "size"])
            share = (between["size"] * (between["mean"] - learning[column].mean()) ** 2).sum() / total
            lines.append(f"{column}: share of the variance between the values of {name}: {share:.2f}")
    ranking = learning.assign(triple=triples, knob=configs[knob])
    for value, rows in ranking.groupby("knob"):
        best = {column: rows.sort_values(column).iloc[0]["triple"] for column in columns}
        lines.append(f"{knob}={value}: lowest {columns[0]} {best[columns[0]]}, lowest {columns[1]} {best[columns[1]]}")
    values = sorted(ranking["knob"].unique())
    for a, b in itertools.combinations(values, 2):
        pair = ranking.pivot_table(index="triple", columns="knob", values=columns[0]).dropna(subset=[a, b])
        lines.append(
            f"Kendall's tau of the triples' {columns[0]} at {knob}={a} and {b}: "
            f"{kendalltau(pair[a], pair[b]).statistic:.2f} ({len(pair)} triples)"
        )
    return "\n".join(lines)


def parse_shard(text: str) -> tuple[int, int]:
    """``K/N`` with 0 <= K < N."""
    k, _, n = text.partition("/")
    if not (k.isdigit() and n.isdigit() and int(k) < int(n)):
        raise argparse.ArgumentTypeError(f"--shard must be K/N with 0 <= K < N, got {text!r}")
    return int(k), int(n)


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("command", choices=["build", "summary", "landscape"])
    parser.add_argument("--name", default="dpn_showcase_noisy")
    parser.add_argument("--work-dir", type=Path, help="run folders (default outputs/tabular/<name>)")
    parser.add_argument("--tables", type=Path, default=TABLES, help="folder of the table and its spec")
    parser.add_argument("--space", type=Path, default=SPACE, help="the discrete space file to tabulate")
    parser.add_argument("--max-budget", type=int, default=MAX_BUDGET, help="epochs of every run")
    parser.add_argument("--seeds", type=int, default=SEEDS, help="training seeds 0 .. N-1 per configuration")
    parser.add_argument("--overrides", nargs="*", default=[], help="train.py overrides after experiment=showcase")
    parser.add_argument(
        "--shard",
        type=parse_shard,
        default=(0, 1),
        metavar="K/N",
        help="train every N-th configuration from the K-th (run N processes, K = 0..N-1)",
    )
    args = parser.parse_args(argv)
    if args.command == "build":
        work_dir = args.work_dir or REPOSITORY / "outputs" / "tabular" / args.name
        if (
            build(
                args.name,
                args.overrides,
                work_dir,
                args.tables,
                args.space.resolve(),
                args.max_budget,
                args.shard,
                args.seeds,
            )
            is None
        ):
            print(f"[table] shard {args.shard[0]}/{args.shard[1]} done; other shards still running")
            return
    if args.command == "landscape":
        for split in ("val", "test"):
            print(landscape(*load_table(args.name, args.tables), split=split), "\n")
        return
    print(summary(*load_table(args.name, args.tables)))


if __name__ == "__main__":
    main()
