"""The bare in-memory training loop that ``bench/data_loading.py`` times against ``python train.py``.

The same work as a ``train.py`` run of the config, without Lightning, loggers or checkpoints: the same embedder
(backbone + neck), margin head, loss, optimiser and learning-rate schedule, the same seed, epochs, batch order and
augmentation (fairnas's decoded arrays and batch transform), validation after every epoch and a final test, each
with flip test-time augmentation and fairnas's identification metrics. Its process start and imports count too.

    python bench/_bare_loop.py <spec.json>     # written by bench/data_loading.py: overrides and the decoded splits
"""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path

import numpy as np
import torch
from hydra.utils import instantiate

from fairnas.config import compose_config
from fairnas.data.dataset import epoch_order
from fairnas.data.transforms import BatchTransform, TransformSettings
from fairnas.metrics import face_identification_metrics, group_names
from fairnas.models import FaceEmbedder
from fairnas.models.neck import normalized_embedding


def load_split(spec: dict, split: str) -> tuple[torch.Tensor, np.ndarray, np.ndarray]:
    """The split's decoded pixels (read into memory once), labels and group indices."""
    arrays = np.load(spec["labels"])
    return (torch.from_numpy(np.load(spec["pixels"][split])), arrays[f"{split}_label"], arrays[f"{split}_group"])


@torch.no_grad()
def evaluate(embedder, transform: BatchTransform, pixels: torch.Tensor, labels, groups, cfg, group_order) -> dict:
    embedder.eval()
    batch = cfg.data.eval_batch_size
    embeddings = torch.cat(
        [
            normalized_embedding(embedder, transform.eval(pixels[start : start + batch]), cfg.eval.tta_flip)
            for start in range(0, len(pixels), batch)
        ]
    )
    embedder.train()
    return face_identification_metrics(
        embeddings,
        labels,
        group_names(groups, group_order),
        group_order=group_order,
        rank_by=cfg.eval.rank_by,
        normalize=False,
    )


def main(spec_file: str) -> dict:
    spec = json.loads(Path(spec_file).read_text())
    cfg = compose_config("train", spec["overrides"], output_dir=spec["output_dir"])
    torch.manual_seed(cfg.seed)
    train_pixels, train_labels, _ = load_split(spec, "train")
    evaluation = {split: load_split(spec, split) for split in ("val", "test")}
    embedder = FaceEmbedder(instantiate(cfg.backbone), embedding_dim=cfg.embedding_dim, dropout=cfg.dropout)
    head = instantiate(cfg.head)(embedding_dim=cfg.embedding_dim, num_classes=int(train_labels.max()) + 1)
    loss_function = instantiate(cfg.loss)
    optimizer = instantiate(cfg.optimizer)(params=[*embedder.parameters(), *head.parameters()])
    batch_size, epochs = min(cfg.data.batch_size, len(train_pixels)), cfg.trainer.max_epochs
    steps_per_epoch = len(train_pixels) // batch_size
    scheduler = instantiate(cfg.scheduler)(
        optimizer, steps_per_epoch=steps_per_epoch, horizon_epochs=cfg.scheduler.get("horizon_epochs") or epochs
    )
    settings = TransformSettings(**cfg.data.transforms)
    transform = BatchTransform(settings, len(train_pixels), seed=cfg.seed)
    labels = torch.from_numpy(train_labels)
    metrics = {}
    for epoch in range(epochs):
        order = epoch_order(len(train_pixels), cfg.seed, epoch)
        for step in range(steps_per_epoch):
            index = order[step * batch_size : (step + 1) * batch_size]
            output = head(embedder(transform.train(train_pixels[index], index, epoch)), labels[index])
            loss = loss_function(output.logits, labels[index]) + sum(output.aux_losses.values())
            if not math.isfinite(loss.item()):
                raise FloatingPointError(f"non-finite loss at epoch {epoch}, step {step}")
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            optimizer.step()
            if scheduler is not None:
                scheduler.step()
        metrics["val"] = evaluate(embedder, transform, *evaluation["val"], cfg, spec["group_order"])
    metrics["test"] = evaluate(embedder, transform, *evaluation["test"], cfg, spec["group_order"])
    return metrics


if __name__ == "__main__":
    result = main(sys.argv[1])
    print(
        json.dumps({split: {key: float(result[split][key]) for key in ("error", "rank_disparity")} for split in result})
    )
