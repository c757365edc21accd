"""Small modules the tests plug into the real training code."""

import torch
from torch import nn


class EmbeddingNormPenalty(nn.Module):
    """A regulariser with the interface of ``fairnas.regularizers``: mean squared embedding norm."""

    def __init__(self, weight: float):
        super().__init__()
        self.weight = weight

    def forward(self, *, batch, embeddings, logits, module) -> torch.Tensor:
        return embeddings.pow(2).sum(dim=1).mean()


def from_config(group: str, option: str, **overrides):
    """The object the project's ``conf/<group>/<option>.yaml`` builds (a partial for ``_partial_`` configs)."""
    from hydra.utils import instantiate
    from omegaconf import OmegaConf

    from fairnas.config import CONFIG_DIR

    return instantiate(OmegaConf.load(CONFIG_DIR / group / f"{option}.yaml"), **overrides)


HEAD_NAMES = ("arcface", "cosface", "magface")


def make_head(name: str, embedding_dim: int, num_classes: int, **options):
    """The margin head of ``conf/head/<name>.yaml`` with ``options`` replacing its settings."""
    return from_config("head", name, **options)(embedding_dim=embedding_dim, num_classes=num_classes)
