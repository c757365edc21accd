"""A trained model back from disk: the checkpoint written by ``train(cfg)`` plus its run's ``config.yaml``.

``train`` writes ``<run>/config.yaml`` (the resolved config) and ``<run>/checkpoints/{last,best-*}.ckpt``; the
embedder (backbone + neck) is rebuilt from the config and loaded from the checkpoint's ``embedder.*`` weights.
The margin head is not needed: evaluation compares embeddings.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import torch
from omegaconf import DictConfig, OmegaConf

from fairnas.models import FaceEmbedder, ops_name
from fairnas.training.train import build_embedder

EMBEDDER_PREFIX = "embedder."


@dataclasses.dataclass
class TrainedModel:
    """The evaluation-mode ``embedder`` of a run, the run's ``config`` and a ``label`` for table rows."""

    embedder: FaceEmbedder
    config: DictConfig
    label: str


def run_config(ckpt: str | Path) -> tuple[Path, DictConfig]:
    """The checkpoint path and the resolved config.yaml that ``train`` wrote beside its ``checkpoints/`` folder."""
    ckpt = Path(ckpt).expanduser()
    if not ckpt.is_file():
        raise FileNotFoundError(f"ckpt: checkpoint '{ckpt}' does not exist")
    config_path = ckpt.parent.parent / "config.yaml"
    if not config_path.is_file():
        raise FileNotFoundError(f"ckpt: '{config_path}' does not exist; it is the config.yaml that train.py "
                                "wrote beside the run's checkpoints/ folder")
    return ckpt, OmegaConf.load(config_path)


def load_trained_model(ckpt: str | Path, label: str | None = None) -> TrainedModel:
    """Rebuild the embedder of the run that wrote ``ckpt`` and load its weights.

    ``label`` defaults to the architecture and head, e.g. ``SMAC_301_cosface`` or ``resnet18_arcface``.
    """
    ckpt, config = run_config(ckpt)
    config_path = ckpt.parent.parent / "config.yaml"
    embedder = build_embedder(config)
    state = torch.load(ckpt, map_location="cpu", weights_only=True)["state_dict"]
    weights = {key[len(EMBEDDER_PREFIX):]: value for key, value in state.items() if key.startswith(EMBEDDER_PREFIX)}
    try:
        embedder.load_state_dict(weights)
    except RuntimeError as error:  # torch lists the missing / unexpected / mis-shaped weights after line 1
        detail = " ".join(line.strip() for line in str(error).splitlines()[1:3])
        raise ValueError(f"ckpt: '{ckpt}' does not match the model of {config_path}: {detail}") from None
    return TrainedModel(embedder.eval(), config, label or model_label(config))


def model_label(config: DictConfig) -> str:
    """Architecture (the paper's SMAC_xyz name for the searchable DPN, else the timm name) and head."""
    backbone = config.backbone
    architecture = ops_name(backbone.ops) if "ops" in backbone else backbone.get("name", backbone._target_)
    return f"{architecture}_{config.head.name}"
