"""Certified L2 radius by randomized smoothing, the thesis's lower-bound estimate (Sec. 2.4.2).

CERTIFY of Cohen, Rosenfeld and Kolter (ICML 2019, Sec. 3.2): the smoothed classifier g(x) = argmax_c
P(f(x + e) = c), e ~ N(0, sigma^2 I), is guessed from n0 noise draws; n fresh draws give a one-sided
Clopper-Pearson lower bound p_A on P(f(x + e) = c_A) at level 1 - alpha; if p_A > 1/2, g is constant within
radius sigma * Phi^-1(p_A) of x with probability >= 1 - alpha, else CERTIFY abstains.

Eq. 2.6 uses that radius as the distance of a sample whose smoothed prediction is its label; an abstention or a
wrong smoothed prediction gives 0. Noise is not clipped to the pixel box (g smooths f over all of R^d). The radius
bounds the distance to g's boundary, which stands in for f's: for a linear f (multinomial logistic regression) it
is also a lower bound on f's own distance, w.p. >= 1 - alpha; for a deep f it may exceed an attack's upper bound.
"""

from __future__ import annotations

import torch
from scipy.stats import binomtest, norm
from torch import nn

from fairnas.validation import Settings


class RandomizedSmoothing:
    """CERTIFY radius as a distance estimate; Cohen et al.'s n0 = 100 and alpha = 0.001 (n = 10k, theirs 100k)."""

    bound = "lower"

    def __init__(
        self,
        sigma: float = 0.25,
        n0: int = 100,
        n: int = 10_000,
        alpha: float = 0.001,
        batch_size: int = 1_000,
        seed: int = 0,
    ) -> None:
        if sigma <= 0:
            raise ValueError(f"smoothing.sigma={sigma} must be positive")
        for name, value in (("n0", n0), ("n", n), ("batch_size", batch_size)):
            Settings("smoothing.").integer(name, value, minimum=1)
        if not 0 < alpha < 0.5:
            raise ValueError(f"smoothing.alpha={alpha} must lie in (0, 0.5)")
        self.sigma, self.n0, self.n, self.alpha = float(sigma), n0, n, float(alpha)
        self.batch_size, self.seed = batch_size, seed

    def __call__(self, classifier: nn.Module, inputs: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        generator = torch.Generator(device=inputs.device).manual_seed(self.seed)
        radii = [self.certify(classifier, x, int(y), generator) for x, y in zip(inputs, labels.tolist(), strict=True)]
        return torch.tensor(radii, dtype=torch.float32, device=inputs.device)

    @torch.no_grad()
    def certify(self, classifier: nn.Module, x: torch.Tensor, label: int, generator: torch.Generator) -> float:
        """The certified radius of ``x`` around its label, 0 when CERTIFY abstains or predicts another class."""
        guess = int(self.class_counts(classifier, x, self.n0, generator).argmax())
        if guess != label:
            return 0.0
        n_guess = int(self.class_counts(classifier, x, self.n, generator)[guess])
        p_lower = clopper_pearson_lower_bound(n_guess, self.n, self.alpha)
        return self.sigma * float(norm.ppf(p_lower)) if p_lower > 0.5 else 0.0

    def class_counts(self, classifier: nn.Module, x: torch.Tensor, n: int, generator: torch.Generator) -> torch.Tensor:
        """How often f predicts each class on ``n`` Gaussian perturbations of ``x``."""
        counts = None
        for start in range(0, n, self.batch_size):
            size = min(self.batch_size, n - start)
            noise = torch.randn((size, *x.shape), generator=generator, device=x.device) * self.sigma
            logits = classifier(x.unsqueeze(0) + noise)
            batch_counts = torch.bincount(logits.argmax(dim=1), minlength=logits.shape[1])
            counts = batch_counts if counts is None else counts + batch_counts
        return counts


def clopper_pearson_lower_bound(successes: int, trials: int, alpha: float) -> float:
    """One-sided (1 - alpha) Clopper-Pearson lower confidence bound on a binomial proportion."""
    return float(binomtest(successes, trials).proportion_ci(confidence_level=1 - 2 * alpha, method="exact").low)
