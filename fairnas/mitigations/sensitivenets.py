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
trained and evaluated by ``train`` like any other model (same metrics, same ``metrics.json``).
"""

from __future__ import annotations

from pathlib import Path

import torch
import torch.nn.functional as F
from torch import nn
from torch.func import functional_call

from fairnas.evaluation.checkpoint import load_trained_model


def _mlp(in_features: int, out_features: int, hidden_layers: int) -> nn.Sequential:
    """``hidden_layers`` x (Linear in->in, ReLU), then Linear in->out."""
    if hidden_layers < 0:
        raise ValueError(f"mitigation hidden_layers={hidden_layers} must be non-negative")
    hidden = [module for _ in range(hidden_layers) for module in (nn.Linear(in_features, in_features), nn.ReLU())]
    return nn.Sequential(*hidden, nn.Linear(in_features, out_features))


class SensitiveNetsEmbedder(nn.Module):
    """A frozen pre-trained ``embedder`` followed by the residual removal network; forward(images) -> [B, D].

    Args:
        embedder: this run's embedder (backbone + neck); it receives the checkpoint's weights, so it must have the
            architecture the checkpoint was trained with.
        checkpoint: a checkpoint written by ``train`` (its run's ``config.yaml`` beside ``checkpoints/``).
        hidden_layers: hidden layers of the removal network (each D -> D with ReLU).
    """

    def __init__(self, embedder: nn.Module, checkpoint: str | Path, hidden_layers: int = 2):
        super().__init__()
        pretrained = load_trained_model(checkpoint).embedder
        try:
            embedder.load_state_dict(pretrained.state_dict())
        except RuntimeError:
            raise ValueError(f"mitigation.checkpoint: '{checkpoint}' was trained with another backbone or "
                             "embedding_dim than this run; give this run the checkpoint's model overrides") from None
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
    """The sensitive regulariser as a training term: ``alpha * Delta + discriminator cross-entropy``.

    Gradients are routed so that one optimiser step plays both sides: the cross-entropy only reaches the
    discriminator (its input is detached), Delta only reaches the embedding (the discriminator's parameters are
    detached in that pass). Samples whose group is outside the configured group order (index -1) are ignored.

    Args:
        embedding_dim: size of the embedding the discriminator reads.
        n_groups: number of protected groups K in the training data.
        alpha: weight of Delta in the loss.
        hidden_layers: hidden layers of the discriminator (each D -> D with ReLU).
    """

    def __init__(self, embedding_dim: int, n_groups: int = 2, alpha: float = 10.0, hidden_layers: int = 2):
        super().__init__()
        if n_groups < 2:
            raise ValueError(f"mitigation.n_groups={n_groups} must be at least 2")
        if alpha < 0:
            raise ValueError(f"mitigation.alpha={alpha} must be non-negative")
        self.weight = 1.0  # alpha weighs Delta inside; the discriminator's own loss is not scaled
        self.alpha, self.n_groups = float(alpha), int(n_groups)
        self.discriminator = nn.Sequential(nn.BatchNorm1d(embedding_dim, affine=False),
                                           *_mlp(embedding_dim, n_groups, hidden_layers))

    def forward(self, *, batch: dict, embeddings: torch.Tensor, logits: torch.Tensor | None,
                module: nn.Module | None) -> torch.Tensor:
        groups = batch["group"]
        if (groups >= self.n_groups).any():
            raise ValueError(f"mitigation.n_groups={self.n_groups} but the data has group index "
                             f"{int(groups.max())}; set it to the number of protected groups")
        known = groups >= 0
        if known.sum() < 2:  # batch statistics need two samples
            return embeddings.new_zeros(())
        features = F.normalize(embeddings[known].float(), dim=1)  # the direction the metrics compare
        discriminator_loss = F.cross_entropy(self.discriminator(features.detach()), groups[known])
        frozen = {name: parameter.detach() for name, parameter in self.discriminator.named_parameters()}
        probabilities = functional_call(self.discriminator, frozen, (features,)).softmax(dim=1)
        removal = torch.log1p((probabilities - 1.0 / self.n_groups).abs()).mean()
        return self.alpha * removal + discriminator_loss
