"""SensitiveNets (Morales et al., 2020; thesis Sec. 4.5.3): remove the protected attribute from a trained embedding.

A pre-trained face embedder (a checkpoint written by ``train``) is frozen, and a small sensitive-information-removal
network on top of it is trained with two terms:

- identity: the configured margin head's classification loss on the new embedding, which keeps identities apart
  (Morales et al. use a triplet loss; the thesis' reference implementation, like this one, the margin head);
- sensitive regulariser: an attribute discriminator D predicts the protected group from the L2-normalised new
  embedding and is trained to do so (cross-entropy, on detached embeddings), while the removal network is trained
  to make D's output uninformative, Delta = mean over samples and groups k of log(1 + |1/K - D_k(e)|), which for
  K = 2 groups is Morales et al.'s log(1 + |0.5 - P(group | e)|). D standardises its input per feature (batch
  normalisation without affine parameters), as a probe's feature scaling does, so the removal network cannot hide
  the attribute by merely shrinking the directions that carry it.

The removal network is residual, e' = e + R(e) with R's last layer initialised to zero: training starts from the
pre-trained embedding and R learns only what removing the attribute requires. The result is an ordinary embedder,
trained and evaluated by ``train`` like any other model (same metrics, same ``metrics.json``). The pre-trained
weights reach the extractor through the training config's ``init_from`` (set by ``conf/mitigation/sensitivenets.yaml``
to ``mitigation.checkpoint``; without one, ``train`` first trains the baseline, the same config without the mitigation,
in ``<output_dir>/baseline``); once trained, the run's own checkpoint holds them, so the run is self-contained.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn
from torch.func import functional_call


def _mlp(in_features: int, out_features: int, hidden_layers: int) -> nn.Sequential:
    """``hidden_layers`` x (Linear in->in, ReLU), then Linear in->out."""
    if hidden_layers < 0:
        raise ValueError(f"mitigation hidden_layers={hidden_layers} must be non-negative")
    hidden = [module for _ in range(hidden_layers) for module in (nn.Linear(in_features, in_features), nn.ReLU())]
    return nn.Sequential(*hidden, nn.Linear(in_features, out_features))


class SensitiveNetsEmbedder(nn.Module):
    """A frozen pre-trained ``embedder`` followed by the residual removal network; forward(images) -> [B, D].

    Args:
        embedder: the pre-trained embedder (backbone + neck), frozen here.
        hidden_layers: hidden layers of the removal network (each D -> D with ReLU).
    """

    def __init__(self, embedder: nn.Module, hidden_layers: int = 2):
        super().__init__()
        self.extractor = embedder.requires_grad_(False).eval()
        self.embedding_dim = embedder.embedding_dim
        self.removal = _mlp(self.embedding_dim, self.embedding_dim, hidden_layers)
        nn.init.zeros_(self.removal[-1].weight)
        nn.init.zeros_(self.removal[-1].bias)

    def train(self, mode: bool = True) -> SensitiveNetsEmbedder:
        """Train the removal network only: the frozen extractor stays in evaluation mode (fixed BN statistics)."""
        super().train(mode)
        self.extractor.eval()
        return self

    def forward(self, images: torch.Tensor) -> torch.Tensor:
        features = self.extractor(images)
        return features + self.removal(features)


class SensitiveAttributeAdversary(nn.Module):
    """The sensitive regulariser as a training term: ``Delta + discriminator cross-entropy``, which the training
    module multiplies by ``weight`` like every regulariser.

    Gradients are routed so that one optimiser step plays both sides: the cross-entropy only reaches the
    discriminator (its input is detached), Delta only reaches the embedding (the discriminator's parameters are
    detached in that pass). The weight thus scales Delta's pull on the removal network and the discriminator's
    gradient alike; under Adam/AdamW (the mitigation's documented optimiser), which is invariant to the scale of a
    parameter's gradient, that leaves the discriminator's steps as they are. Samples whose group is outside the
    configured group order (index -1) are ignored.

    Args:
        embedding_dim: size of the embedding the discriminator reads.
        n_groups: number of protected groups K in the training data (the config derives it from the data).
        weight: the regulariser's weight in the loss (Morales et al.'s weight of Delta).
        hidden_layers: hidden layers of the discriminator (each D -> D with ReLU).
    """

    def __init__(self, embedding_dim: int, n_groups: int, weight: float = 10.0, hidden_layers: int = 2):
        super().__init__()
        if n_groups < 2:
            raise ValueError(f"mitigation: the data has {n_groups} protected group(s); SensitiveNets needs two or more")
        if weight < 0:
            raise ValueError(f"mitigation.weight={weight} must be non-negative")
        self.weight, self.n_groups = float(weight), int(n_groups)
        self.discriminator = nn.Sequential(
            nn.BatchNorm1d(embedding_dim, affine=False), *_mlp(embedding_dim, n_groups, hidden_layers)
        )

    def forward(
        self, *, batch: dict, embeddings: torch.Tensor, logits: torch.Tensor | None, module: nn.Module | None
    ) -> torch.Tensor:
        groups = batch["group"]
        known = groups >= 0
        if known.sum() < 2:  # batch statistics need two samples
            return embeddings.new_zeros(())
        features = F.normalize(embeddings[known].float(), dim=1)  # the direction the metrics compare
        discriminator_loss = F.cross_entropy(self.discriminator(features.detach()), groups[known])
        frozen = {name: parameter.detach() for name, parameter in self.discriminator.named_parameters()}
        probabilities = functional_call(self.discriminator, frozen, (features,)).softmax(dim=1)
        removal = torch.log1p((probabilities - 1.0 / self.n_groups).abs()).mean()
        return removal + discriminator_loss
