"""AdvERM's robustness-bias regulariser (thesis Sec. 2.9, eqs. 2.7-2.9; Nanda et al., FAccT 2021).

For every sample of the batch, the DeepFool linearised distance of eq. 2.8 between its class y and the runner-up
class k of the head's cosine logits s * cos (without margin),

    d(x) = (f_y - f_k) / ||grad_x (f_y - f_k)||,     in pixel units (inputs = (pixels - mean) / pixel_std),

is signed (positive exactly when x is classified correctly by those logits, y_hat = y) and turned into a smooth
indicator s(x) = sigmoid((d(x) - tau) / temperature) of 1{d(x) > tau}. For each protected group P in the batch,
eqs. 2.7/2.9 condition on the correctly classified samples, C = {x : y_hat(x) = y}, and normalise by their number:

    RB(P, tau) = | mean_{x in P, x in C} s(x) - mean_{x not in P, x in C} s(x) |      (normalize="correct", default)

A group P with no correctly classified sample in the batch, or with none outside it, contributes no gap. With
``normalize="all"`` the means run over all samples of P and of its complement instead, misclassified ones (d < 0)
counting as s ~ 0: a group's misclassifications then lower its share beyond tau (fairnas' earlier behaviour).
The regulariser is the largest RB(P, tau) over groups (for two groups, the one value of eq. 2.9); it is 0 when the
batch holds fewer than two groups, or no group has a gap. AdvERM = loss + alpha * RB: the training module adds it
multiplied by its ``weight``, which is alpha. Differentiating d(x) needs second derivatives (one extra backward with
``create_graph``).
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import nn

from fairnas.robustness.linearized import linearized_boundary_distance

NORMALIZATIONS = ("correct", "all")


class RobustnessBiasRegularizer(nn.Module):
    """``max_P RB(P, tau)`` of the batch (eq. 2.9), added to the loss times ``weight``; see the module docstring.

    Args:
        weight: alpha of eq. 2.9, the term's weight in the loss.
        tau: the distance threshold, in pixel units (pixels in [0, 1]), as in ``audit.py``'s curves.
        temperature: width of the sigmoid standing in for 1{d > tau}; smaller is closer to the indicator.
        pixel_std: per-channel std of the data pipeline's normalisation (``data.transforms.std``).
        normalize: ``"correct"`` (eq. 2.7: means over the correctly classified samples of P and of its complement)
            or ``"all"`` (means over all samples; misclassified ones count as s ~ 0).
    """

    requires_input_grad = True

    def __init__(
        self,
        weight: float,
        tau: float,
        temperature: float = 0.05,
        pixel_std: Sequence[float] = (0.5,) * 3,
        normalize: str = "correct",
    ):
        super().__init__()
        if normalize not in NORMALIZATIONS:
            raise ValueError(
                f"regularizer.robustness_bias.normalize={normalize!r} must be one of {', '.join(NORMALIZATIONS)}"
            )
        if weight < 0:
            raise ValueError(f"regularizer.robustness_bias.weight={weight} must be non-negative")
        if tau < 0:
            raise ValueError(f"regularizer.robustness_bias.tau={tau} must be non-negative")
        if temperature <= 0:
            raise ValueError(f"regularizer.robustness_bias.temperature={temperature} must be positive")
        if not len(pixel_std) or min(pixel_std) <= 0:
            raise ValueError(f"regularizer.robustness_bias.pixel_std={list(pixel_std)} must be positive per channel")
        self.weight, self.tau, self.temperature = float(weight), float(tau), float(temperature)
        self.pixel_std = tuple(float(s) for s in pixel_std)
        self.normalize = normalize

    def forward(
        self, *, batch: dict, embeddings: torch.Tensor, logits: torch.Tensor, module: nn.Module
    ) -> torch.Tensor:
        groups = batch["group"]
        present = [g for g in torch.unique(groups).tolist() if g >= 0]
        if len(present) < 2:
            return embeddings.new_zeros(())
        images = batch["image"]
        if not images.requires_grad:
            raise RuntimeError(
                "the robustness-bias regulariser needs batch['image'] to require gradients "
                "(FaceRecognitionModule enables them for regularisers with requires_input_grad)"
            )
        cosine_logits = module.head(embeddings).logits
        distance = linearized_boundary_distance(
            cosine_logits, images, batch["label"], create_graph=True, pixel_std=self.pixel_std
        )
        beyond_tau = torch.sigmoid((distance - self.tau) / self.temperature)
        counted = groups >= 0
        if self.normalize == "correct":
            counted = counted & (distance.detach() > 0)  # y_hat = y: the true logit beats every other one
        gaps = []
        for group in present:
            inside, outside = counted & (groups == group), counted & (groups != group)
            if inside.any() and outside.any():
                gaps.append((beyond_tau[inside].mean() - beyond_tau[outside].mean()).abs())
        return torch.stack(gaps).max() if gaps else embeddings.new_zeros(())
