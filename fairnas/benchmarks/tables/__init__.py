"""The tabular benchmarks shipped with fairnas, and their query API (as NAS-Bench and YAHPO ship theirs).

A table ``<name>.csv`` holds one row per configuration, training seed and epoch: ``config_id``, ``config``,
``seed``, ``epoch``, the hyperparameters, then ``<split>/<metric>``. Its spec ``<name>.json`` records the space,
objectives, maximum budget, seeds (those every configuration has), training overrides, build time and machine, and,
for a table whose best quarter got more seeds, ``top_region`` (its share, seeds and configuration ids).
``bench/comparison/table_builder.py`` builds them; :class:`fairnas.benchmarks.table_target.TableTarget` searches one
with noisy look-ups.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

import pandas as pd

from fairnas.search.hypervolume import hypervolume

TABLES = Path(__file__).resolve().parent
"""The folder of the shipped tables."""


def names(tables: Path = TABLES) -> list[str]:
    """The tables of the folder ``tables`` (those with a spec), sorted."""
    return sorted(path.stem for path in tables.glob("*.json"))


def load_table(name: str, tables: Path = TABLES) -> tuple[pd.DataFrame, dict]:
    """The table ``<tables>/<name>.csv`` and its spec; a single-seed table built before the ``seed`` column reads as
    seed 0 (its spec's ``seed``)."""
    table, spec = pd.read_csv(tables / f"{name}.csv"), json.loads((tables / f"{name}.json").read_text())
    if "seed" not in table:
        table.insert(2, "seed", spec["seed"])
        spec["seeds"] = [spec["seed"]]
    return table, spec


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
