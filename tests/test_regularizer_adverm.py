"""The AdvERM robustness-bias regulariser (thesis eqs. 2.7-2.9): value, gradient, every head and backbone, config."""

from __future__ import annotations

import types

import pytest
import torch

from fairnas.models import FaceEmbedder, TimmBackbone, build_dpn
from fairnas.regularizers import RobustnessBiasRegularizer
from fairnas.robustness import linearized_boundary_distance
from fairnas.training.run import train
from tests.helpers import make_head

STD = (0.5, 0.5, 0.5)


def embedder_for(backbone: str) -> FaceEmbedder:
    network = build_dpn(preset="tiny", ops=[3, 0, 1]) if backbone == "dpn" else TimmBackbone("resnet18")
    return FaceEmbedder(network, embedding_dim=32)


def biased_batch(n: int = 8, seed: int = 0) -> dict:
    """Two groups whose images differ: group 1 is low-contrast noise, so its distances differ from group 0's."""
    generator = torch.Generator().manual_seed(seed)
    images = torch.randn(n, 3, 16, 16, generator=generator)
    groups = torch.arange(n) % 2
    images[groups == 1] *= 0.1
    return {"image": images.requires_grad_(True), "label": torch.arange(n) % 4, "group": groups}


def regularizer_value(embedder, head, batch, **options):
    regularizer = RobustnessBiasRegularizer(**{"weight": 1.0, "tau": 0.02, "temperature": 0.01, **options})
    embeddings = embedder(batch["image"])
    module = types.SimpleNamespace(head=head)
    return regularizer(
        batch=batch, embeddings=embeddings, logits=head(embeddings, batch["label"]).logits, module=module
    ), embeddings


@pytest.mark.parametrize("backbone", ["dpn", "timm"])
@pytest.mark.parametrize("head_name", ["cosface", "arcface", "magface"])
def test_gradient_is_finite_and_non_zero_for_every_head_and_backbone(backbone, head_name):
    torch.manual_seed(0)
    embedder, head = embedder_for(backbone).train(), make_head(head_name, 32, 4)
    batch = biased_batch()
    with torch.no_grad():  # labels the model predicts: every sample counts in eq. 2.7
        batch["label"] = head(embedder(batch["image"])).logits.argmax(dim=1)
    value, _ = regularizer_value(embedder, head, batch, temperature=1.0)
    assert value.ndim == 0 and 0 < value.item() <= 1
    value.backward()
    gradients = [p.grad for p in [*embedder.parameters(), *head.parameters()] if p.grad is not None]
    assert gradients and all(torch.isfinite(g).all() for g in gradients)
    assert sum(float(g.abs().sum()) for g in gradients) > 0


@pytest.mark.parametrize("normalize", ["correct", "all"])
def test_value_is_eq_2_9_with_sigmoid_indicators(normalize):
    torch.manual_seed(0)
    embedder, head = embedder_for("dpn").eval(), make_head("cosface", 32, 4)
    batch = biased_batch()
    with torch.no_grad():  # the first two samples of each group are classified correctly, the others need not be
        batch["label"][:4] = head(embedder(batch["image"][:4])).logits.argmax(dim=1)
    value, embeddings = regularizer_value(embedder, head, batch, tau=0.01, temperature=0.005, normalize=normalize)
    distance = linearized_boundary_distance(head(embeddings).logits, batch["image"], batch["label"], pixel_std=STD)
    smooth = torch.sigmoid((distance - 0.01) / 0.005)
    correct = distance > 0 if normalize == "correct" else torch.ones_like(distance, dtype=torch.bool)
    assert normalize == "all" or 4 <= int(correct.sum()) < len(correct)
    in_group = batch["group"] == 0
    expected = (smooth[in_group & correct].mean() - smooth[~in_group & correct].mean()).abs()
    torch.testing.assert_close(value, expected)


def two_class_batch(points, labels, groups):
    """Inputs that are their own 2-class logits: d(x) = (x_y - x_k) / sqrt(2), correct iff x_y > x_k."""
    images = torch.tensor(points, dtype=torch.float32).requires_grad_(True)
    return {"image": images, "label": torch.tensor(labels), "group": torch.tensor(groups)}


def hand_built_value(batch, **options):
    """The regulariser on :func:`two_class_batch`, with an identity embedder and head."""
    head = lambda embeddings, labels=None: types.SimpleNamespace(logits=embeddings)  # noqa: E731
    regularizer = RobustnessBiasRegularizer(
        **{"weight": 1.0, "tau": 0.1, "temperature": 0.01, "pixel_std": (1.0,), **options}
    )
    embeddings = batch["image"] * 1.0
    value = regularizer(batch=batch, embeddings=embeddings, logits=embeddings, module=types.SimpleNamespace(head=head))
    return value.detach()


# group 0: one correct sample far from the boundary (s ~ 1), one misclassified (s ~ 0); group 1: two correct, far.
EQ_2_7_BATCH = ([[3.0, 0.0], [0.0, 3.0], [3.0, 0.0], [0.0, 3.0]], [0, 0, 0, 1], [0, 0, 1, 1])


@pytest.mark.parametrize(("normalize", "expected"), [("correct", 0.0), ("all", 0.5)])
def test_eq_2_7_averages_over_the_correctly_classified_samples(normalize, expected):
    """Eq. 2.7 conditions on y_hat = y: group 0's misclassified sample is left out of its mean (default), not
    counted as a sample below tau (``normalize=all``, the earlier behaviour)."""
    value = hand_built_value(two_class_batch(*EQ_2_7_BATCH), normalize=normalize)
    assert float(value) == pytest.approx(expected, abs=1e-6)


def test_eq_2_7_is_the_default():
    assert float(hand_built_value(two_class_batch(*EQ_2_7_BATCH))) == pytest.approx(0.0, abs=1e-6)


def test_a_group_without_a_correct_sample_contributes_no_gap():
    # group 0: one correct sample (s ~ 1); group 1: misclassified only; group 2: one correct sample near tau.
    batch = two_class_batch([[3.0, 0.0], [0.0, 3.0], [0.2, 0.0]], [0, 0, 0], [0, 1, 2])
    smooth = torch.sigmoid((torch.tensor([3.0, 0.2]) / 2**0.5 - 0.1) / 0.01)
    assert float(hand_built_value(batch)) == pytest.approx(float((smooth[0] - smooth[1]).abs()), abs=1e-6)
    only_one_correct = two_class_batch([[3.0, 0.0], [0.0, 3.0]], [0, 0], [0, 1])
    assert float(hand_built_value(only_one_correct)) == 0.0
    assert float(hand_built_value(only_one_correct, normalize="all")) == pytest.approx(1.0, abs=1e-6)


def test_pixel_std_scales_the_distance():
    """Inputs normalised by std s: a pixel step of delta moves the input by delta / s, so d_pixels = d_inputs * s."""
    torch.manual_seed(0)
    embedder, head = embedder_for("dpn").eval(), make_head("cosface", 32, 4)
    batch = biased_batch()
    logits = head(embedder(batch["image"])).logits
    in_inputs = linearized_boundary_distance(logits, batch["image"], batch["label"], create_graph=True)
    in_pixels = linearized_boundary_distance(logits, batch["image"], batch["label"], pixel_std=(0.25,) * 3)
    torch.testing.assert_close(in_pixels, in_inputs * 0.25)


def test_is_zero_without_two_groups_in_the_batch():
    embedder, head = embedder_for("dpn").eval(), make_head("cosface", 32, 4)
    batch = biased_batch()
    batch["group"] = torch.where(batch["group"] == 1, -1, 0)  # one group plus images outside the group order
    value, _ = regularizer_value(embedder, head, batch)
    assert float(value) == 0.0


def test_requires_input_gradients():
    embedder, head = embedder_for("dpn").eval(), make_head("cosface", 32, 4)
    batch = biased_batch()
    batch["image"] = batch["image"].detach()
    with pytest.raises(RuntimeError, match="require gradients"):
        regularizer_value(embedder, head, batch)


@pytest.mark.parametrize(
    "options, match",
    [
        ({"weight": -1, "tau": 0.1}, "weight=-1"),
        ({"weight": 1, "tau": -0.1}, "tau=-0.1"),
        ({"weight": 1, "tau": 0.1, "temperature": 0}, "temperature=0"),
        ({"weight": 1, "tau": 0.1, "pixel_std": [0.5, 0.0, 0.5]}, "pixel_std"),
        ({"weight": 1, "tau": 0.1, "normalize": "some"}, "normalize='some' must be one of correct, all"),
    ],
)
def test_bad_options_are_rejected(options, match):
    with pytest.raises(ValueError, match=match):
        RobustnessBiasRegularizer(**options)


def test_training_with_the_regularizer_config_logs_its_term(tiny_config, tmp_path):
    cfg = tiny_config(
        "regularizer=robustness_bias",
        "regularizer.robustness_bias.weight=2.5",
        "regularizer.robustness_bias.tau=0.1",
        "data.transforms.std=[0.25,0.25,0.25]",
        "+trainer.limit_train_batches=2",
        "trainer.log_every_n_steps=1",
        "eval.robustness_bias=false",
        output_dir=tmp_path / "run",
    )
    node = cfg.regularizer.robustness_bias
    assert (node.weight, node.tau, list(node.pixel_std)) == (2.5, 0.1, [0.25, 0.25, 0.25])
    metrics = train(cfg)
    assert 0 <= metrics["val"]["error"] <= 1
    lines = (tmp_path / "run" / "csv" / "version_0" / "metrics.csv").read_text().splitlines()
    header = lines[0].split(",")
    assert "train/robustness_bias" in header
    column = header.index("train/robustness_bias")
    values = [float(line.split(",")[column]) for line in lines[1:] if line.split(",")[column]]
    assert values and all(0 <= v <= 2.5 for v in values)
