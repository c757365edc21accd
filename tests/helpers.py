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
