"""The linear probe of a trained model on held-out images of the data set it was trained on (Table 4.9)."""

from __future__ import annotations

from pathlib import Path

import torch
from hydra.utils import instantiate
from omegaconf import OmegaConf
from torch.utils.data import DataLoader

from fairnas.audits import linear_probe, probe_features
from fairnas.data.table import SPLITS
from fairnas.evaluation.checkpoint import TrainedModel


def probe_trained_model(
    model: TrainedModel,
    *,
    split: str = "test",
    root: str | None = None,
    batch_size: int = 256,
    num_workers: int = 0,
    device: str | torch.device = "cpu",
    seed: int = 0,
) -> dict[str, float]:
    """Probe accuracy per layer on the ``split`` images of the run's data set (``root`` replaces its location).

    The run's data config is rebuilt with its subset rules and group order; a split the run saved is read back,
    so the probe sees exactly the run's held-out identities. Images outside the group order are left out.
    """
    if split not in SPLITS:
        raise ValueError(f"linear_probe.split={split!r} is not a split; allowed: {list(SPLITS)}")
    data = OmegaConf.create(OmegaConf.to_container(model.config.data))
    if root is not None:
        data.table.root = root
    split_spec = data.table.get("split")
    if split_spec is not None and split_spec.get("save_to") and Path(split_spec.save_to).is_file():
        split_spec.file, split_spec.save_to = split_spec.save_to, None
    data.num_workers = num_workers
    datamodule = instantiate(data, seed=model.config.seed)
    loader = DataLoader(datamodule.dataset(split, train_transforms=False), batch_size=batch_size,
                        num_workers=num_workers)
    features, groups, identities = probe_features(model.embedder, loader, device)
    inside = groups >= 0
    return linear_probe({layer: values[inside] for layer, values in features.items()}, groups[inside],
                        identities[inside], seed=seed)
