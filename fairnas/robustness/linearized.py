"""First-order (one DeepFool step) distance to the decision boundary, thesis eq. 2.8.

Linearising the classifier around x, the distance to the boundary between the true class y and the runner-up
class k (the largest other logit) is

    d(x) = (f_y(x) - f_k(x)) / ||grad_x (f_y(x) - f_k(x))||_2

signed: positive when x is classified correctly, negative otherwise. It is what the AdvERM regulariser optimises
(:mod:`fairnas.regularizers.adverm`) and, clamped at 0, a cheap estimate that is neither an upper nor a
lower bound.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import nn

GRADIENT_NORM_EPS = 1e-12
"""Added to the gradient norm so a flat classifier gives a large, finite distance instead of a division by 0."""


def linearized_boundary_distance(
    logits: torch.Tensor,
    inputs: torch.Tensor,
    labels: torch.Tensor,
    *,
    create_graph: bool = False,
    pixel_std: Sequence[float] | None = None,
) -> torch.Tensor:
    """Signed eq. 2.8 distance [B] of each input to the boundary between its label and its runner-up class.

    Args:
        logits: [B, C] computed from ``inputs`` (which must require gradients), C >= 2.
        inputs: the tensor the logits were computed from, [B, ...].
        labels: [B] true classes.
        create_graph: keep the graph of the input gradient, so the distance can be differentiated (training).
        pixel_std: per-channel std of a normalisation ``inputs = (pixels - mean) / std`` in front of the model;
            the distance is then measured in pixel units (d inputs / d pixels = 1 / std).

    The per-sample gradients come from one backward pass of the summed margins; they are exact when samples do
    not interact (evaluation mode) and first-order otherwise (batch-norm statistics in training mode).
    """
    if logits.ndim != 2 or logits.shape[1] < 2:
        raise ValueError(f"logits of shape {tuple(logits.shape)} must be [B, C] with C >= 2 classes")
    if not inputs.requires_grad:
        raise ValueError("inputs must require gradients: compute the logits from inputs.requires_grad_()")
    labels = labels.long().unsqueeze(1)
    true_logit = logits.gather(1, labels).squeeze(1)
    runner_up = logits.scatter(1, labels, float("-inf")).amax(dim=1)
    margin = true_logit - runner_up
    (gradient,) = torch.autograd.grad(margin.sum(), inputs, create_graph=create_graph)
    if pixel_std is not None:
        shape = (1, len(pixel_std)) + (1,) * (inputs.ndim - 2)
        gradient = gradient / torch.as_tensor(list(pixel_std), dtype=gradient.dtype, device=gradient.device).view(shape)
    return margin / (gradient.flatten(1).norm(dim=1) + GRADIENT_NORM_EPS)


class LinearizedDistance:
    """Distance estimator from eq. 2.8 at the input (clamped at 0): cheap, neither an upper nor a lower bound."""

    bound = "approximate"

    def __call__(self, classifier: nn.Module, inputs: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        with torch.enable_grad():
            inputs = inputs.detach().requires_grad_(True)
            distance = linearized_boundary_distance(classifier(inputs), inputs, labels)
        return distance.detach().clamp(min=0.0)
