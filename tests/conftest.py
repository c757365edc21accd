"""Shared fixtures: the real Hydra config composed once per test, forced onto the CPU and a tiny data set."""

from __future__ import annotations

import os

import pytest

os.environ.setdefault("WANDB_MODE", "offline")
os.environ.setdefault("WANDB_SILENT", "true")
# The golden sets (tests/golden/) were recorded on an AVX2 machine, and the kernels torch, oneDNN and MKL choose for
# AVX-512 round floats differently (a one-thread tiny search's rank disparity, the smoke study's claims). So the suite
# caps their instruction set at AVX2, in this process and in the commands it starts, unless the environment sets one.
AVX2_ONLY = {"ATEN_CPU_CAPABILITY": "avx2", "ONEDNN_MAX_CPU_ISA": "AVX2", "MKL_ENABLE_INSTRUCTIONS": "AVX2"}
for variable, isa in AVX2_ONLY.items():
    os.environ.setdefault(variable, isa)

TINY_DATA = [
    "data.table.n_identities=24",
    "data.table.images_per_identity=6",
    "data.table.image_size=32",
    "data.transforms.resize=36",
    "data.batch_size=16",
    "data.eval_batch_size=64",
    "embedding_dim=64",
    "trainer.accelerator=cpu",
    "trainer.enable_progress_bar=false",
    "trainer.enable_model_summary=false",
    "trainer.max_epochs=1",
]


def pytest_collection_modifyitems(config, items):
    """``gpu`` tests skip, with their reason, on machines without a CUDA device."""
    import torch

    if torch.cuda.is_available():
        return
    skip = pytest.mark.skip(reason="needs a CUDA device (marker gpu)")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


@pytest.fixture(scope="session")
def cache_dir(tmp_path_factory):
    """One synthetic-face cache for the whole session, so each tiny data set renders once."""
    return tmp_path_factory.mktemp("fairnas_cache")


@pytest.fixture
def tiny_config(tmp_path, cache_dir):
    """``tiny_config(*overrides)`` -> the composed training config on tiny synthetic data, logging to CSV."""
    from fairnas.config import compose_config

    def make(*overrides: str, output_dir=None):
        return compose_config(
            "train",
            [*TINY_DATA, f"paths.cache_dir={cache_dir}", "logger=csv", *overrides],
            output_dir=output_dir or tmp_path / "run",
        )

    return make


@pytest.fixture(scope="session")
def trained_run(tmp_path_factory, cache_dir):
    """One tiny DPN trained for one epoch on the tiny synthetic set, shared read-only by every test that needs a
    finished run: its run folder (``checkpoints/last.ckpt``, ``metrics.json``, ...)."""
    from fairnas.config import compose_config
    from fairnas.tasks.train import train

    run = tmp_path_factory.mktemp("trained") / "run"
    train(compose_config("train", [*TINY_DATA, f"paths.cache_dir={cache_dir}", "logger=none"], output_dir=run))
    return run


@pytest.fixture(scope="session")
def tabular(tmp_path_factory):
    """``fairnas.benchmarks.tabular`` and a tiny table built with it (6 configurations x 2 seeds x 2 epochs, the
    space of ``tests/test_bench_tabular.py``), built once for every bench test."""
    from fairnas.benchmarks import tabular as module
    from fairnas.tasks.train import train
    from tests.test_bench_tabular import build_tiny

    folder = tmp_path_factory.mktemp("table")
    build_tiny(module, folder, train, tmp_path_factory.mktemp("cache"))
    return module, folder
