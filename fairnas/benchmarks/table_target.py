"""A search target over a tabular benchmark: noisy look-ups of a table's runs instead of training."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pandas as pd

from fairnas.search import config_id


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
