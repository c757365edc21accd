"""Per-step training cost of the AdvERM robustness-bias regulariser (thesis Sec. 2.9).

Each (backbone, head) trains through the real ``build_model`` + Lightning path on the embedded synthetic faces,
once without and once with ``regularizer=robustness_bias``; a callback times every optimiser step (forward,
backward, update). The regulariser needs the input gradient of the margin with ``create_graph`` and its
derivative (a double backward), so its overhead is reported as the ratio of median step times.

    python bench/robustness_overhead.py [--steps 12] [--batch-size 64] [--image-size 64] [--out results.json]
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time

import pytorch_lightning as pl
import torch

from fairnas.config import compose_config
from fairnas.io import write_json_atomic
from fairnas.training.build import build_model

CASES = [("dpn", "cosface"), ("dpn", "arcface"), ("dpn", "magface"), ("timm", "cosface")]
WARMUP_STEPS = 2


class StepTimer(pl.Callback):
    """Wall-clock seconds of each training batch (forward, backward, optimiser step)."""

    def __init__(self) -> None:
        self.seconds: list[float] = []

    def on_train_batch_start(self, trainer, module, batch, batch_idx) -> None:
        self._start = time.perf_counter()

    def on_train_batch_end(self, trainer, module, outputs, batch, batch_idx) -> None:
        self.seconds.append(time.perf_counter() - self._start)


def median_step_seconds(overrides: list[str], steps: int, cache_dir: str) -> float:
    with tempfile.TemporaryDirectory() as output_dir:
        cfg = compose_config("train", [*overrides, f"paths.cache_dir={cache_dir}"], output_dir=output_dir)
        pl.seed_everything(0)
        module, datamodule = build_model(cfg)
        timer = StepTimer()
        trainer = pl.Trainer(
            accelerator="cpu",
            max_epochs=1,
            limit_train_batches=steps + WARMUP_STEPS,
            limit_val_batches=0,
            logger=False,
            enable_checkpointing=False,
            enable_progress_bar=False,
            enable_model_summary=False,
            callbacks=[timer],
        )
        trainer.fit(module, datamodule=datamodule)
    return statistics.median(timer.seconds[WARMUP_STEPS:])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=12)
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--image-size", type=int, default=64)
    parser.add_argument("--cache-dir", default=None, help="synthetic-face cache (default: the config's)")
    parser.add_argument("--out", default=None, help="also write the results as JSON here")
    args = parser.parse_args()
    cache_dir = args.cache_dir or compose_config("train").paths.cache_dir
    data = [
        f"data.batch_size={args.batch_size}",
        f"data.table.image_size={args.image_size}",
        f"data.transforms.resize={args.image_size + args.image_size // 8}",
        "logger=none",
    ]
    print(
        f"torch {torch.__version__}, {torch.get_num_threads()} CPU threads, batch {args.batch_size}, "
        f"{args.image_size}x{args.image_size} images, median of {args.steps} steps"
    )
    print(f"{'backbone':<16}{'head':<9}{'plain ms':>10}{'AdvERM ms':>11}{'overhead':>10}")
    results = []
    for backbone, head in CASES:
        case = [*data, f"backbone={backbone}", f"head={head}"]
        plain = median_step_seconds(case, args.steps, cache_dir)
        regularised = median_step_seconds([*case, "regularizer=robustness_bias"], args.steps, cache_dir)
        name = "dpn (tiny)" if backbone == "dpn" else "resnet18 (timm)"
        results.append(
            {
                "backbone": name,
                "head": head,
                "plain_ms": 1e3 * plain,
                "adverm_ms": 1e3 * regularised,
                "overhead": regularised / plain,
            }
        )
        print(f"{name:<16}{head:<9}{1e3 * plain:>10.0f}{1e3 * regularised:>11.0f}{regularised / plain:>9.2f}x")
    if args.out:
        write_json_atomic(args.out, results)


if __name__ == "__main__":
    main()
