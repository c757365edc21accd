"""Data parallelism does not change the numbers: a 2-process DDP run (CPU, gloo) reports the validation and test
metrics a single process computes on the same weights, also when the splits do not divide by the ranks; it trains
with group-weighted draws (how the ranks share one draw: tests/test_group_sampling.py)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import pytorch_lightning as pl

from fairnas.training.build import load_run
from tests.conftest import TINY_DATA

REPO = Path(__file__).resolve().parents[1]


@pytest.mark.integration
def test_two_process_ddp_metrics_equal_one_process_on_the_same_weights(cache_dir, tmp_path):
    run = tmp_path / "run"
    done = subprocess.run(
        [
            sys.executable,
            str(REPO / "train.py"),
            *TINY_DATA,
            "data.table.images_per_identity=5",
            "data.table.n_groups=3",
            "data.table.n_identities=45",
            f"paths.cache_dir={cache_dir}",
            "logger=none",
            "trainer=ddp",
            "trainer.accelerator=cpu",
            "trainer.devices=2",
            "trainer.precision=32-true",
            "trainer.sync_batchnorm=false",
            "trainer.max_epochs=1",
            "data.group_sampling.weights={g0:1,g1:2,g2:4}",  # every rank draws its part of one weighted draw
            f"hydra.run.dir={run}",
        ],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    ddp = json.loads((run / "metrics.json").read_text())

    loaded = load_run(run)
    data = loaded.data()
    sizes = {split: len(data.splits[split]) for split in ("val", "test")}
    assert all(size % 2 == 1 for size in sizes.values()), sizes  # the sampler pads one rank's shard
    single = pl.Trainer(
        accelerator="cpu", devices=1, logger=False, enable_progress_bar=False, enable_model_summary=False
    )
    single.validate(loaded.module, datamodule=data, verbose=False)
    single.test(loaded.module, datamodule=data, verbose=False)
    for stage in ("val", "test"):
        one = {key: value for key, value in loaded.module.evaluations[stage].items() if key != "epoch"}
        assert one["n_probes"] == ddp[stage]["n_probes"]
        for key, value in one.items():
            assert float(ddp[stage][key]) == pytest.approx(value, rel=1e-6, abs=1e-9), (stage, key)
