"""Distance estimators by name, their option checks, the Clopper-Pearson bound, probes and the pixel classifier."""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from hydra.errors import InstantiationException
from torchvision.transforms import v2

from fairnas.robustness import (
    CarliniWagnerL2,
    DeepFool,
    IdentityClassifier,
    LinearizedDistance,
    RandomizedSmoothing,
    clopper_pearson_lower_bound,
    split_enrolment,
)
from fairnas.robustness.classifier import pixel_normalization
from tests.helpers import from_config


def test_estimator_configs_build_their_estimator_with_options():
    assert isinstance(from_config("estimator", "deepfool", steps=3), DeepFool)
    assert isinstance(from_config("estimator", "cw"), CarliniWagnerL2)
    smoothing = from_config("estimator", "smoothing", n=50, sigma=0.5)
    assert isinstance(smoothing, RandomizedSmoothing) and smoothing.n == 50 and smoothing.sigma == 0.5
    bounds = {name: from_config("estimator", name).bound for name in ("deepfool", "cw", "smoothing", "linear")}
    assert bounds == {"deepfool": "upper", "cw": "upper", "smoothing": "lower", "linear": "approximate"}
    assert isinstance(from_config("estimator", "linear"), LinearizedDistance)


@pytest.mark.parametrize(
    "method, options, match",
    [
        ("deepfool", {"candidates": 1}, "candidates=1 must be >= 2"),
        ("deepfool", {"steps": 0}, "deepfool.steps=0 must be a positive integer"),
        ("cw", {"stepsize": 0}, "must be positive"),
        ("smoothing", {"alpha": 0.5}, "alpha=0.5 must lie in"),
        ("smoothing", {"n": 0}, "smoothing.n=0"),
    ],
)
def test_bad_estimator_options_fail_with_the_key(method, options, match):
    with pytest.raises(InstantiationException, match=match):
        from_config("estimator", method, **options)


def test_clopper_pearson_lower_bound_matches_closed_forms():
    assert clopper_pearson_lower_bound(100, 100, 0.001) == pytest.approx(0.001 ** (1 / 100))
    assert clopper_pearson_lower_bound(0, 100, 0.001) == 0.0
    assert 0.45 < clopper_pearson_lower_bound(600, 1000, 0.001) < 0.6


def test_attack_marks_misclassified_inputs_zero_and_unbroken_inputs_infinite():
    """A classifier that always predicts class 0: inputs labelled 1 are misclassified, class-0 inputs unbreakable."""

    class Constant(torch.nn.Module):
        def forward(self, x):
            return torch.stack([x.flatten(1).sum(1) * 0 + 1.0, x.flatten(1).sum(1) * 0], dim=1)

    inputs = torch.rand(4, 3)
    distances = DeepFool(steps=3)(Constant().eval(), inputs, torch.tensor([0, 1, 0, 1]))
    assert distances.tolist() == [float("inf"), 0.0, float("inf"), 0.0]


def test_split_enrolment_keeps_a_probe_per_identity_and_single_images_as_templates():
    identities = np.array([5, 5, 7, 5, 7, 9, 5])
    enrol, probes = split_enrolment(identities, gallery_images=1)
    assert enrol.tolist() == [0, 2, 5] and probes.tolist() == [1, 3, 4, 6]
    enrol, probes = split_enrolment(identities, gallery_images=5)  # at most n - 1 enrol
    assert enrol.tolist() == [0, 1, 2, 3, 5] and probes.tolist() == [4, 6]
    with pytest.raises(ValueError, match="gallery_images=0"):
        split_enrolment(identities, 0)


def test_identity_classifier_gives_scaled_cosines_of_normalised_pixels():
    mean, std = [0.5, 0.4, 0.3], [0.5, 0.25, 0.2]
    centres = torch.randn(5, 12)
    classifier = IdentityClassifier(lambda x: F.normalize(x.flatten(1), dim=1), centres, 30.0, mean, std)
    pixels = torch.rand(3, 3, 2, 2)
    normalised = (pixels - torch.tensor(mean).view(1, 3, 1, 1)) / torch.tensor(std).view(1, 3, 1, 1)
    expected = 30.0 * F.normalize(normalised.flatten(1), dim=1) @ F.normalize(centres, dim=1).T
    torch.testing.assert_close(classifier(pixels), expected)
    torch.testing.assert_close(classifier.to_pixels(normalised), pixels)
    assert classifier.num_classes == 5


def test_pixel_normalization_reads_the_pipeline():
    transform = v2.Compose([v2.ToDtype(torch.float32, scale=True), v2.Normalize([0.1, 0.2, 0.3], [0.4, 0.5, 0.6])])
    assert pixel_normalization(transform) == ([0.1, 0.2, 0.3], [0.4, 0.5, 0.6])
    with pytest.raises(ValueError, match="no Normalize step"):
        pixel_normalization(v2.Compose([v2.ToDtype(torch.float32, scale=True)]))
