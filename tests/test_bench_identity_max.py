"""``bench/identity_max_speed.py``: the ways it times give the engine's per-identity maximum exactly."""

from __future__ import annotations

import torch

from bench import identity_max_speed


def test_every_way_gives_the_engines_per_identity_maximum_also_for_an_identity_without_images():
    identities = torch.tensor([3, 0, 3, 1, 0, 3, 3, 1, 0])  # identity 2 has no image
    results = {name: way() for name, way in identity_max_speed.identity_maxima(identities, block_size=5).items()}
    engine = results["index_reduce (the engine)"]
    assert engine.shape == (4, 5) and torch.isneginf(engine[2]).all()
    assert all(torch.equal(result, engine) for result in results.values())
    assert identity_max_speed.padded_rows(torch.tensor([2, 0, 1])).tolist() == [[0, 1], [3, 3], [2, 3]]


def test_the_table_times_each_way_against_the_engine():
    table = identity_max_speed.main(["--images", "400", "--block-size", "16", "--repeats", "1"])
    assert list(table["way"]) == list(identity_max_speed.identity_maxima(torch.tensor([0, 1]), 1))
    assert table["equal"].all() and table["ratio to the engine"].iloc[0] == 1.0 and (table["ms/block"] > 0).all()
