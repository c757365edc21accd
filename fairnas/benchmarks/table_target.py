"""A search target over a tabular benchmark: noisy look-ups of a table's runs instead of training."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pandas as pd

from fairnas.search import config_id


class TableTarget:
    """A search target that looks the objectives up instead of training: ``target(config, seed, budget)`` returns
    the validation (or ``split``) metrics of ``config``'s run after ``budget`` epochs with the table seed its training
    seed stands for. The first distinct training seed a search asks for reads each configuration's first seed of
    ``seed_order`` (default: the table's seeds ascending), the next new one its second, and so on: each new training
    seed is a fresh training run, as in a live search, up to the number of seeds the configuration holds (a table
    whose best quarter got more seeds holds more for those). ``assigned`` maps the training seeds seen so far to
    their position in that order; :meth:`assign` replays them in order when a search resumes."""

    def __init__(
        self, table: pd.DataFrame, objectives: Sequence[str], split: str = "val", seed_order: Sequence[int] = ()
    ):
        self._rows = {(row["config_id"], int(row["seed"]), int(row["epoch"])): row for row in table.to_dict("records")}
        self._columns = {name: f"{split}/{name}" for name in objectives}
        self.seed_order = [int(seed) for seed in seed_order] or sorted(int(seed) for seed in table["seed"].unique())
        seeds: dict[str, set[int]] = {}
        for identifier, seed in zip(table["config_id"], table["seed"], strict=True):
            seeds.setdefault(identifier, set()).add(int(seed))
        self._orders = {identifier: [s for s in self.seed_order if s in held] for identifier, held in seeds.items()}
        self.assigned: dict[int, int] = {}

    def __call__(self, config: dict[str, Any], seed: int, budget: float) -> dict[str, float]:
        identifier = config_id(config)
        return self.lookup(identifier, budget, self.table_seed(identifier, self.assign(seed)))

    def assign(self, seed: int) -> int:
        """The position of training seed ``seed`` in the order of new training seeds (the next one when it is new)."""
        if seed not in self.assigned:
            if len(self.assigned) == len(self.seed_order):
                raise ValueError(
                    f"the table holds {len(self.seed_order)} training seeds; training seed {seed} would be one more"
                )
            self.assigned[seed] = len(self.assigned)
        return self.assigned[seed]

    def table_seed(self, identifier: str, position: int) -> int:
        """The table seed the ``position``-th training seed of a search reads of configuration ``identifier``."""
        order = self._orders.get(identifier, [])
        if position >= len(order):
            raise ValueError(
                f"configuration {identifier} has {len(order)} training seeds in the table; a search's training seed "
                f"number {position + 1} would be one more"
            )
        return order[position]

    def lookup(self, identifier: str, budget: float, table_seed: int | None = None) -> dict[str, float]:
        """The objectives of the configuration whose ``config_id`` is ``identifier`` after ``budget`` epochs, from the
        run with ``table_seed`` (default: its first of ``seed_order``)."""
        seed = self.table_seed(identifier, 0) if table_seed is None else table_seed
        row = self._rows[(identifier, seed, int(round(budget)))]
        return {name: float(row[column]) for name, column in self._columns.items()}
