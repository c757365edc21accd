"""Exact case (thesis Sec. 2.6): multinomial logistic regression, whose distance to the boundary has a closed form.

For logits W x + b, a correctly classified x lies in the convex cell of its class y, and its distance to the cell's
boundary is min over k != y of (f_y - f_k) / ||w_y - w_k||; a misclassified x has distance 0. Attacks give upper
bounds (never below it), randomized smoothing's certified radius a lower bound (never above it, w.p. 1 - alpha),
and the first-order distance of eq. 2.8 is the exact distance to the hyperplane of the runner-up class.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
from sklearn.datasets import make_blobs
from sklearn.linear_model import LogisticRegression
from torch import nn

from fairnas.robustness import CarliniWagnerL2, DeepFool, LinearizedDistance, RandomizedSmoothing

N_FEATURES, N_CLASSES = 12, 4


@pytest.fixture(scope="module")
def logistic_regression():
    """(model, inputs in [0, 1], labels, exact distances) with a few misclassified inputs among 48."""
    features, labels = make_blobs(
        n_samples=400, centers=N_CLASSES, n_features=N_FEATURES, cluster_std=2.5, center_box=(-4, 4), random_state=0
    )
    features = np.clip((features + 10) / 20, 0, 1)
    fitted = LogisticRegression(max_iter=2000).fit(features, labels)
    model = nn.Linear(N_FEATURES, N_CLASSES).eval()
    with torch.no_grad():
        model.weight.copy_(torch.tensor(fitted.coef_))
        model.bias.copy_(torch.tensor(fitted.intercept_))
    inputs = torch.tensor(features[:48], dtype=torch.float32)
    targets = torch.tensor(labels[:48])
    return model, inputs, targets, exact_distance(model, inputs, targets)


def hyperplane_distances(model: nn.Linear, inputs: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """[N, C]: (f_y - f_k) / ||w_y - w_k||, the signed distance to the hyperplane f_y = f_k (inf for k = y)."""
    with torch.no_grad():
        logits, weight, rows = model(inputs), model.weight, torch.arange(len(labels))
        margins = logits[rows, labels].unsqueeze(1) - logits
        distances = margins / (weight[labels].unsqueeze(1) - weight.unsqueeze(0)).norm(dim=2)
        distances[rows, labels] = float("inf")
    return distances


def exact_distance(model: nn.Linear, inputs: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    distance = hyperplane_distances(model, inputs, labels).min(dim=1).values
    with torch.no_grad():
        correct = model(inputs).argmax(dim=1) == labels
    return torch.where(correct, distance, torch.zeros_like(distance))


def test_fixture_has_correct_and_misclassified_inputs(logistic_regression):
    _, _, _, exact = logistic_regression
    assert 0 < int((exact == 0).sum()) < len(exact) // 2
    assert float(exact.max()) > 0.05


def test_first_order_distance_is_the_runner_up_hyperplane_distance(logistic_regression):
    """Eq. 2.8 for a linear model: exact distance to the boundary with the runner-up class, hence >= d(x)."""
    model, inputs, labels, exact = logistic_regression
    with torch.no_grad():
        logits = model(inputs)
    runner_up = logits.scatter(1, labels.unsqueeze(1), float("-inf")).argmax(dim=1)
    expected = hyperplane_distances(model, inputs, labels)[torch.arange(len(labels)), runner_up].clamp(min=0)
    found = LinearizedDistance()(model, inputs, labels)
    torch.testing.assert_close(found, expected, rtol=1e-4, atol=1e-6)
    assert (found >= exact * (1 - 1e-4)).all()


@pytest.mark.parametrize(
    "estimator",
    [DeepFool(steps=50, overshoot=0.02), CarliniWagnerL2(binary_search_steps=5, steps=100, stepsize=0.01)],
    ids=["deepfool", "cw"],
)
def test_attacks_never_go_below_the_exact_distance_and_come_close(logistic_regression, estimator):
    model, inputs, labels, exact = logistic_regression
    found = estimator(model, inputs, labels)
    correct = exact > 0
    assert torch.isfinite(found).all()
    assert (found[~correct] == 0).all()
    assert (found[correct] >= exact[correct] * (1 - 1e-4)).all()
    # tight, not trivially large: within 10% of the exact distance for most inputs (the [0, 1] box may bind)
    assert float((found[correct] / exact[correct]).median()) < 1.1


def test_smoothing_radius_never_exceeds_the_exact_distance(logistic_regression):
    """CERTIFY's guarantee holds per input w.p. >= 1 - alpha; with alpha = 1e-3 and a fixed seed none may fail."""
    model, inputs, labels, exact = logistic_regression
    radius = RandomizedSmoothing(sigma=0.1, n0=100, n=4000, alpha=1e-3, seed=0)(model, inputs, labels)
    assert (radius >= 0).all()
    assert (radius <= exact + 1e-6).all()
    assert (radius[exact == 0] == 0).all()
    assert int((radius > 0).sum()) >= len(radius) // 3  # certifies a good share, not trivially 0
