"""The data path against the model, side by side in one run, on the showcase's data (``experiment=showcase``).

Three throughputs, in training images per second:

- ``file path``: the training loader that opens each image file per item (decode + resize in ``--workers``
  DataLoader workers), then the batch augmentation (random crop, flip, normalise) the data module applies on the
  model's device;
- ``in-memory path``: the training loader that gathers each batch from the split's decoded uint8 array (decoded once
  and cached before timing), then the same batch augmentation;
- ``training step``: forward, loss and backward and the optimiser step of the configured embedder and head on one
  batch already in memory (what the model consumes).

Loader rates count ``--images`` images after the first batch (several epochs of the showcase's training split).
Then the end-to-end comparison: ``python train.py`` of the same config against a bare PyTorch loop doing the same
work from the in-memory arrays (``bench/_bare_loop.py``: same model, optimiser, schedule, epochs, batches and
augmentation, validation after every epoch and a final test with flip TTA and fairnas's metrics; no Lightning,
loggers or checkpoints), each as a fresh process, ``--runs`` times alternately. Goals: the in-memory path delivers at
least 10x what the training step consumes; ``train.py`` takes at most 1.5x the bare loop. Every rate is the best of
``--repeats``, wall times the best of ``--runs`` (other processes on the same cores only ever slow a run down).

    python bench/data_loading.py
    python bench/data_loading.py --overrides data.table.n_identities=1600 --workers 0 1 2
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import torch
from hydra.utils import instantiate

from fairnas.config import compose_config
from fairnas.training.build import build_embedder, instantiate_partial

REPOSITORY = Path(__file__).resolve().parents[1]
MEMORY_GOAL, END_TO_END_GOAL = 10.0, 1.5


def data_module(cfg, in_memory: bool, workers: int = 0):
    """The config's data module, set up, on the in-memory or the file path."""
    datamodule = instantiate(cfg.data, seed=cfg.seed, in_memory=in_memory, num_workers=workers)
    datamodule.setup()
    return datamodule


def loading_rate(datamodule, images: int) -> float:
    """Training images/s of the data module's loader plus its batch augmentation, first batch excluded."""
    loader = datamodule.train_dataloader()
    delivered, epoch, start = 0, 0, None
    while delivered < images:
        loader.sampler.set_epoch(epoch)
        for batch in loader:
            batch = datamodule.on_after_batch_transfer(batch, 0)
            if start is None:
                start = time.perf_counter()
                continue
            delivered += len(batch["image"])
            if delivered >= images:
                break
        epoch += 1
    return delivered / (time.perf_counter() - start)


def training_rate(cfg, datamodule, steps: int) -> float:
    """Images/s of the training step (forward, loss, backward, optimiser step) on one augmented batch."""
    torch.manual_seed(cfg.seed)
    embedder = build_embedder(cfg)
    head = instantiate_partial(cfg.head, "head")(embedding_dim=cfg.embedding_dim, num_classes=datamodule.num_classes)
    loss_function = instantiate(cfg.loss)
    optimizer = instantiate_partial(cfg.optimizer, "optimizer")(params=[*embedder.parameters(), *head.parameters()])
    batch = datamodule.on_after_batch_transfer(next(iter(datamodule.train_dataloader())), 0)

    def step() -> None:
        output = head(embedder(batch["image"]), batch["label"])
        optimizer.zero_grad(set_to_none=True)
        (loss_function(output.logits, batch["label"]) + sum(output.aux_losses.values())).backward()
        optimizer.step()

    step()  # warm-up
    start = time.perf_counter()
    for _ in range(steps):
        step()
    return steps * len(batch["image"]) / (time.perf_counter() - start)


def bare_loop_spec(cfg, datamodule, overrides: list[str], folder: Path) -> Path:
    """The spec file of ``bench/_bare_loop.py``: the config's overrides and the decoded splits on disk."""
    arrays = {}
    for split in ("train", "val", "test"):
        arrays[f"{split}_label"] = datamodule.labels(split)
        arrays[f"{split}_group"] = datamodule.group_index(datamodule.splits[split])
    np.savez(folder / "labels.npz", **arrays)
    pixels = {split: str(datamodule.decoded_pixels(split).filename) for split in ("train", "val", "test")}
    spec = {
        "overrides": overrides,
        "output_dir": str(folder / "bare"),
        "labels": str(folder / "labels.npz"),
        "pixels": pixels,
        "group_order": list(datamodule.group_order),
    }
    (folder / "spec.json").write_text(json.dumps(spec))
    return folder / "spec.json"


def wall_time(command: list[str]) -> tuple[float, str]:
    """Seconds a command took, and its standard output."""
    start = time.perf_counter()
    done = subprocess.run(command, cwd=REPOSITORY, capture_output=True, text=True)
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(command[:3])} failed:\n{done.stderr[-3000:]}")
    return time.perf_counter() - start, done.stdout


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--overrides", nargs="*", default=[], help="train.py overrides after experiment=showcase")
    parser.add_argument("--images", type=int, default=6000, help="images timed per loader rate")
    parser.add_argument("--steps", type=int, default=20, help="timed training steps")
    parser.add_argument("--repeats", type=int, default=3, help="measurements per rate; the best is reported")
    parser.add_argument("--workers", type=int, nargs="+", default=[0, 1], help="file path worker counts")
    parser.add_argument("--runs", type=int, default=2, help="end-to-end runs of each; 0 skips the comparison")
    args = parser.parse_args(argv)

    results: dict = {}
    with tempfile.TemporaryDirectory() as folder:
        folder = Path(folder)
        overrides = ["experiment=showcase", "logger=none", *args.overrides]
        cfg = compose_config("train", overrides, output_dir=folder / "run")
        memory = data_module(cfg, in_memory=True)
        start = time.perf_counter()
        pixels = {split: memory.decoded_pixels(split) for split in ("train", "val", "test")}
        decoded_seconds = time.perf_counter() - start  # 0 when a previous run cached them
        size = cfg.data.transforms
        print(
            f"{os.cpu_count()} CPU cores, torch threads {torch.get_num_threads()}, "
            f"load average {os.getloadavg()[0]:.1f}; {len(memory.splits['train'])} training images, "
            f"{size.resize} px -> crop {size.image_size} px, batch {cfg.data.batch_size}; decoded arrays "
            f"{sum(p.nbytes for p in pixels.values()) / 2**20:.1f} MiB ({decoded_seconds:.1f} s to decode and cache)"
        )

        consumption = max(training_rate(cfg, memory, args.steps) for _ in range(args.repeats))
        rates = {"in-memory path": max(loading_rate(memory, args.images) for _ in range(args.repeats))}
        for workers in args.workers:
            files = data_module(cfg, in_memory=False, workers=workers)
            rates[f"file path, {workers} worker(s)"] = max(
                loading_rate(files, args.images) for _ in range(args.repeats)
            )
        print(f"\n{'images/s':32} | {'rate':>9} | {'x training step':>15}")
        print("-" * 62)
        for name, rate in [("training step (consumption)", consumption), *rates.items()]:
            print(f"{name:32} | {rate:9.0f} | {rate / consumption:15.1f}")
        ratio = rates["in-memory path"] / consumption
        over_files = rates["in-memory path"] / rates[f"file path, {args.workers[0]} worker(s)"]
        print(
            f"in-memory path / training step = {ratio:.1f} (goal >= {MEMORY_GOAL:.0f}); in-memory / file path "
            f"({args.workers[0]} workers) = {over_files:.1f}"
        )
        results.update(consumption=consumption, rates=rates)

        if args.runs:
            spec = bare_loop_spec(cfg, memory, overrides, folder)
            train_command = [
                sys.executable,
                "train.py",
                "experiment=showcase",
                *args.overrides,
                f"hydra.run.dir={folder / 'train'}",
            ]  # the default logger: W&B, offline
            bare_command = [sys.executable, str(REPOSITORY / "bench" / "_bare_loop.py"), str(spec)]
            times: dict[str, list[float]] = {"python train.py": [], "bare loop": []}
            for _ in range(args.runs):
                times["python train.py"].append(wall_time(train_command)[0])
                seconds, output = wall_time(bare_command)
                times["bare loop"].append(seconds)
            trained = json.loads((folder / "train" / "metrics.json").read_text())
            bare = json.loads(output.splitlines()[-1])
            best = {name: min(values) for name, values in times.items()}
            print(f"\n{'end to end (process start included)':36} | best of {args.runs} | all runs (s)")
            for name, values in times.items():
                print(f"{name:36} | {best[name]:7.1f} s | {', '.join(f'{value:.1f}' for value in values)}")
            ratio = best["python train.py"] / best["bare loop"]
            print(f"python train.py / bare loop = {ratio:.2f} (goal <= {END_TO_END_GOAL})")
            for name, metrics in (("python train.py", trained), ("bare loop", bare)):
                print(
                    f"{name}: "
                    + ", ".join(
                        f"{split} error {metrics[split]['error']:.4f} rank disparity "
                        f"{float(metrics[split]['rank_disparity']):.3f}"
                        for split in ("val", "test")
                    )
                )
            results.update(times=times, end_to_end_ratio=ratio)
    print(f"load average at the end (1/5/15 min): {' '.join(f'{load:.1f}' for load in os.getloadavg())}")
    return results


if __name__ == "__main__":
    main()
