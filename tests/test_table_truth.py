"""A real table as the judge of a search: the order a search reads each configuration's seeds in, and its answer
judged on the seeds it never read (fairnas.benchmarks.answer_quality, fairnas.benchmarks.table_target), on a
small table written in the shipped tables' columns, where one configuration has more seeds than the other."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from fairnas.benchmarks.answer_quality import Truth, quality
from fairnas.benchmarks.table_target import TableTarget
from fairnas.search import config_id

CONFIGS = {"many": {"op0": 0}, "few": {"op0": 1}}
SEEDS = {"many": [0, 1, 2, 3, 4, 5], "few": [0, 1, 2, 3]}


def value(name: str, seed: int) -> float:
    """The error of ``name``'s run with ``seed``: every seed its own value, so a look-up tells which it read."""
    return (0.2 if name == "many" else 0.5) + seed / 100


@pytest.fixture
def table() -> pd.DataFrame:
    rows = []
    for name, config in CONFIGS.items():
        for seed in SEEDS[name]:
            for epoch in (1, 2):
                error = value(name, seed) + (0.1 if epoch == 1 else 0.0)
                rows.append(
                    {
                        "config_id": config_id(config),
                        "config": json.dumps(config),
                        "seed": seed,
                        "epoch": epoch,
                        "val/error": error,
                        "val/rank_disparity": 1.0 + seed,
                    }
                )
    return pd.DataFrame(rows)


def test_a_search_reads_the_seeds_every_configuration_has_first_in_an_order_of_its_own_seed(table):
    truth = Truth(table, ["error", "rank_disparity"], 2)
    assert truth.common_seeds == [0, 1, 2, 3] and truth.seeds == [0, 1, 2, 3, 4, 5]
    orders = [truth.seed_order(seed) for seed in range(20)]
    assert all(sorted(order[:4]) == [0, 1, 2, 3] and sorted(order[4:]) == [4, 5] for order in orders)
    assert len({tuple(order) for order in orders}) > 5 and truth.seed_order(3) == orders[3]
    few = config_id(CONFIGS["few"])
    assert truth.config_order(few, orders[3]) == orders[3][:4]


def test_each_training_seed_reads_each_configuration_s_next_seed_and_a_fifth_is_refused_where_only_four_exist(table):
    truth = Truth(table, ["error", "rank_disparity"], 2)
    order = truth.seed_order(7)
    target = TableTarget(table, ["error", "rank_disparity"], seed_order=order)
    for position, training_seed in enumerate([11, 3, 8, 20]):
        for name in CONFIGS:
            table_seed = truth.config_order(config_id(CONFIGS[name]), order)[position]
            assert target(CONFIGS[name], training_seed, 2)["error"] == pytest.approx(value(name, table_seed))
    assert target.assigned == {11: 0, 3: 1, 8: 2, 20: 3}
    assert target(CONFIGS["many"], 99, 2)["error"] == pytest.approx(value("many", order[4]))
    with pytest.raises(ValueError, match=r"configuration \w+ has 4 training seeds in the table; .* number 5"):
        target(CONFIGS["few"], 99, 2)


def test_the_answer_is_judged_on_the_same_seeds_whatever_the_search_read(table):
    """The judging seeds are fixed per search seed (each configuration's from position ``readable`` of its order),
    so answers that read 1 or 3 seeds are judged alike; a search that read more than ``readable`` is not judged."""
    truth = Truth(table, ["error", "rank_disparity"], 2, readable=3)
    order = truth.seed_order(4)
    returned = pd.DataFrame(
        {"error": [0.2, 0.5], "rank_disparity": [1.0, 1.0]}, index=[config_id(c) for c in CONFIGS.values()]
    )
    judged = truth.judge_held_out(returned, search_seed=4)
    for name, config in CONFIGS.items():
        judges = truth.config_order(config_id(config), order)[3:]  # "few": one seed, "many": three
        assert len(judges) == (1 if name == "few" else 3)
        assert judged.loc[config_id(config), "error"] == pytest.approx(np.mean([value(name, s) for s in judges]))
    one, three = (quality(returned, truth, (1.0, 10.0), 1.0, search_seed=4, read=read) for read in (1, 3))
    assert one["heldout_true_share"] == three["heldout_true_share"] > 0 and one["answer_size"] == 2
    too_many = quality(returned, truth, (1.0, 10.0), 1.0, search_seed=4, read=4)
    assert np.isnan(too_many["heldout_true_share"]) and too_many["true_share"] > 0
    assert Truth(table, ["error"], 2).readable == 2  # default: half the seeds every configuration has
    with pytest.raises(ValueError, match="readable=4: a search must read at least one seed and leave one"):
        Truth(table, ["error"], 2, readable=4)
