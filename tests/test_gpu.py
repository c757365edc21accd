"""The GPU paths on a CUDA device (marker ``gpu``; skipped without one, with the reason): margin heads in float32
under bf16 autocast, the batched crops and flips on the GPU against the CPU, ``trainer=gpu`` end to end, the metric
engine on CUDA against the CPU with tied scores, and DDP over two GPUs against one process. ``bench/gpu_check.py``
runs them first."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import pytorch_lightning as pl
import torch

from fairnas.data.transforms import BatchTransform, TransformSettings
from fairnas.metrics.identification import face_identification_metrics
from fairnas.training.build import load_run
from tests.helpers import HEAD_NAMES, make_head

pytestmark = pytest.mark.gpu
REPO = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize("name", HEAD_NAMES)
def test_margin_heads_keep_cosines_and_logits_in_float32_under_cuda_bf16_autocast(name):
    torch.manual_seed(0)
    head = make_head(name, 64, 10)
    embeddings, labels = torch.randn(32, 64).bfloat16(), torch.randint(0, 10, (32,))
    reference = head(embeddings.float(), labels).logits  # the same bf16 inputs, float32 on the CPU
    head = head.cuda()
    with torch.autocast("cuda", dtype=torch.bfloat16):
        out = head(embeddings.cuda(), labels.cuda())
    assert out.logits.dtype == torch.float32
    torch.testing.assert_close(out.logits.cpu(), reference, rtol=1e-4, atol=1e-3)


def test_gpu_crops_and_flips_equal_the_cpu_ones():
    settings = TransformSettings(image_size=32, resize=40)
    pixels = torch.randint(0, 256, (64, 3, 40, 40), dtype=torch.uint8)
    index = torch.randperm(200)[:64]
    cpu = BatchTransform(settings, 200, seed=3)
    gpu = BatchTransform(settings, 200, seed=3)
    for epoch in (0, 1):
        torch.testing.assert_close(gpu.train(pixels.cuda(), index.cuda(), epoch).cpu(), cpu.train(pixels, index, epoch))
    torch.testing.assert_close(gpu.eval(pixels.cuda()).cpu(), cpu.eval(pixels))


def test_metric_engine_on_cuda_equals_the_cpu_with_tied_scores():
    """20,000 images, 400 distinct integer embeddings: many exact ties, and dot products exact in any summation
    order (also with TF32), so CUDA and CPU rank alike; only the averages' float sums may round differently."""
    rng = np.random.default_rng(0)
    distinct = rng.integers(-3, 4, size=(400, 32)).astype(np.float32)
    embeddings = distinct[rng.integers(0, 400, size=20_000)]
    identities, groups = rng.integers(0, 2_000, size=20_000), rng.integers(0, 3, size=20_000)
    cpu = face_identification_metrics(embeddings, identities, groups, normalize=False)
    cuda = face_identification_metrics(torch.as_tensor(embeddings, device="cuda"), identities, groups, normalize=False)
    assert cuda == pytest.approx(cpu, rel=1e-6)


def train(run: Path, cache: Path, *overrides: str) -> dict:
    command = [sys.executable, str(REPO / "train.py"), "experiment=smoke", "logger=none", f"paths.cache_dir={cache}"]
    done = subprocess.run(
        [*command, f"hydra.run.dir={run}", *overrides], cwd=run.parent, capture_output=True, text=True, timeout=600
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads((run / "metrics.json").read_text())


def test_trainer_gpu_trains_and_evaluates_the_smoke_data_in_bf16(tmp_path):
    metrics = train(tmp_path / "run", tmp_path / "cache", "trainer=gpu", "trainer.max_epochs=2")
    for split in ("val", "test"):
        assert 0.0 <= metrics[split]["error"] < 1.0 and math.isfinite(metrics[split]["rank_disparity"])


@pytest.mark.skipif(torch.cuda.device_count() < 2, reason="needs two CUDA devices")
def test_two_gpu_ddp_evaluates_like_one_process_on_the_same_weights(tmp_path):
    """DDP gathers every rank's embeddings before the metrics: the same numbers as one GPU on the saved weights."""
    ddp = train(tmp_path / "run", tmp_path / "cache", "trainer=ddp", "trainer.devices=2", "trainer.precision=32-true")
    loaded = load_run(tmp_path / "run")
    single = pl.Trainer(accelerator="gpu", devices=1, logger=False, enable_progress_bar=False)
    single.test(loaded.module, datamodule=loaded.data(), verbose=False)
    one = {key: value for key, value in loaded.module.evaluations["test"].items() if key != "epoch"}
    assert one["n_probes"] == ddp["test"]["n_probes"]
    for key, value in one.items():
        # cuDNN may pick other kernels for other batch sizes: a probe near a tie may rank one identity apart
        assert float(ddp["test"][key]) == pytest.approx(value, rel=1e-3, abs=2 / one["n_probes"]), key
