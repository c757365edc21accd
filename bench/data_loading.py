"""Data-loading throughput beside the training step's consumption rate, on the same machine.

Loading: images/s delivered by the data module's training loader (JPEG decoding, then the training augmentation:
resize, random crop, horizontal flip, normalisation; batches of 64) with 0, 1 and 2 DataLoader workers, timed after
the first batch so that worker start-up is left out. Consumption: images/s of the training step (forward, CosFace
loss, backward, SGD step) of the tiny searchable DPN on batches of 64 already in memory. Loading keeps up with
training when its rate is at or above the consumption rate (with the workers' cores to spare). Every rate is the
best of ``--repeats`` runs, which damps the effect of other processes competing for the cores.

The default data set is CelebA-sized JPEGs (178 x 218, the size of img_align_celeba) re-encoded from the synthetic
faces and read in the generic format; ``--overrides`` points the benchmark at real data instead, e.g.
``--overrides data=celeba data.root=/data/celeba``.

    python bench/data_loading.py [--images 2000] [--batches 15] [--steps 10] [--repeats 3] [--workers 0 1 2]
                                 [--overrides ...]
"""

from __future__ import annotations

import argparse
import itertools
import os
import tempfile
import time
from pathlib import Path

import torch
from hydra.utils import instantiate
from PIL import Image

from fairnas.config import compose_config
from fairnas.data.sources import synthetic_faces
from fairnas.models import FaceEmbedder

CELEBA_SIZE = (178, 218)  # width, height of img_align_celeba
IMAGES_PER_IDENTITY = 10


def write_jpeg_faces(root: Path, n_images: int) -> None:
    """About ``n_images`` synthetic faces, re-encoded as CelebA-sized JPEGs, in the generic format."""
    table = synthetic_faces(root / "cache", n_identities=max(n_images // IMAGES_PER_IDENTITY, 10),
                            images_per_identity=IMAGES_PER_IDENTITY, image_size=128)
    frame = table.frame[["path", "identity", "split", "group"]].copy()
    (root / "images").mkdir()
    for index, source in enumerate(table.frame["path"]):
        frame.loc[index, "path"] = f"images/{index:06d}.jpg"
        with Image.open(table.root / source) as face:
            face.convert("RGB").resize(CELEBA_SIZE).save(root / frame.loc[index, "path"], quality=95)
    frame.to_csv(root / "metadata.csv", index=False)


def loading_rate(cfg, workers: int, batches: int) -> float:
    """Images per second from the training loader with ``workers`` workers, first batch excluded."""
    datamodule = instantiate(cfg.data, seed=0, num_workers=workers)
    datamodule.setup()
    iterator = iter(datamodule.train_dataloader())
    next(iterator)
    start, images = time.perf_counter(), 0
    for batch in itertools.islice(iterator, batches):
        images += len(batch["image"])
    rate = images / (time.perf_counter() - start)
    del iterator
    return rate if images else float("nan")


def training_rate(cfg, num_classes: int, steps: int) -> float:
    """Images per second through the training step of the configured backbone and head, batch in memory."""
    size, batch = cfg.data.transforms.image_size, cfg.data.batch_size
    embedder = FaceEmbedder(instantiate(cfg.backbone), embedding_dim=cfg.embedding_dim)
    head = instantiate(cfg.head)(embedding_dim=cfg.embedding_dim, num_classes=num_classes)
    optimizer = instantiate(cfg.optimizer)(params=[*embedder.parameters(), *head.parameters()])
    images, labels = torch.randn(batch, 3, size, size), torch.randint(0, num_classes, (batch,))

    def step() -> None:
        optimizer.zero_grad()
        output = head(embedder(images), labels)
        (torch.nn.functional.cross_entropy(output.logits, labels) + sum(output.aux_losses.values())).backward()
        optimizer.step()

    step()  # warm-up
    start = time.perf_counter()
    for _ in range(steps):
        step()
    return steps * batch / (time.perf_counter() - start)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--images", type=int, default=2000, help="size of the generated JPEG data set")
    parser.add_argument("--batches", type=int, default=15, help="timed batches per worker count")
    parser.add_argument("--steps", type=int, default=10, help="timed training steps")
    parser.add_argument("--repeats", type=int, default=3, help="runs per rate; the best is reported")
    parser.add_argument("--workers", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--overrides", nargs="*", default=[], help="train.py overrides, e.g. data=celeba ...")
    args = parser.parse_args()

    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        overrides = args.overrides
        if not any(override.startswith("data=") for override in overrides):
            write_jpeg_faces(tmp / "faces", args.images)
            overrides = ["data=generic", f"data.root={tmp / 'faces'}", *overrides]
        cfg = compose_config("train", ["backbone=dpn", "head=cosface", "optimizer=sgd", "data.batch_size=64",
                                       *overrides], output_dir=tmp / "run")
        print(f"CPU cores {os.cpu_count()}, torch threads {torch.get_num_threads()}, batch {cfg.data.batch_size}, "
              f"images {cfg.data.transforms.resize}px -> crop {cfg.data.transforms.image_size}px, "
              f"best of {args.repeats}, load average at the start {os.getloadavg()[0]:.1f}")
        rates = {workers: max(loading_rate(cfg, workers, args.batches) for _ in range(args.repeats))
                 for workers in args.workers}
        datamodule = instantiate(cfg.data, seed=0, num_workers=0)
        datamodule.setup()
        consumption = max(training_rate(cfg, datamodule.num_classes, args.steps) for _ in range(args.repeats))

    print(f"{'':30} | {'images/s':>9}")
    print("-" * 42)
    for workers, rate in rates.items():
        print(f"{f'loading, {workers} worker(s)':30} | {rate:9.0f}")
    print(f"{'training step (' + cfg.backbone.get('preset', 'timm') + ' backbone)':30} | {consumption:9.0f}")
    print(f"load average at the end (1/5/15 min): {' '.join(f'{load:.1f}' for load in os.getloadavg())}")


if __name__ == "__main__":
    main()
