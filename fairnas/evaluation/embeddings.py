"""Face embeddings of image files with a trained embedder, batched through the project's dataset and transforms."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np
import torch
from torch import nn
from torch.utils.data import DataLoader

from fairnas.data.dataset import FaceImageDataset
from fairnas.data.transforms import eval_transforms
from fairnas.models.neck import normalized_embedding


@torch.no_grad()
def embed_images(
    embedder: nn.Module,
    root: Path,
    paths: Sequence[str],
    transforms: Mapping,
    *,
    tta_flip: bool = True,
    batch_size: int = 256,
    num_workers: int = 0,
    device: str | torch.device = "cpu",
) -> np.ndarray:
    """float32 [N, D] unit embeddings of ``root/<path>`` for every path, under the evaluation ``transforms``
    (the keyword arguments of :func:`~fairnas.data.transforms.eval_transforms`, e.g. a run's data.transforms)."""
    n_images = len(paths)
    dataset = FaceImageDataset(
        root, list(paths), np.zeros(n_images, dtype=int), np.zeros(n_images, dtype=int), eval_transforms(**transforms)
    )
    loader = DataLoader(dataset, batch_size=batch_size, num_workers=num_workers)
    embedder = embedder.eval().to(device)
    batches = [normalized_embedding(embedder, batch["image"].to(device), tta_flip).cpu() for batch in loader]
    return torch.cat(batches).numpy()
