"""Margin heads (CosFace, ArcFace, MagFace) built from their configs, and the classification losses."""

import math

import pytest
import torch
import torch.nn.functional as F

from fairnas.models.heads import ArcFaceHead, CosFaceHead, HeadOutput, MagFaceHead
from fairnas.training.losses import FocalLoss
from tests.helpers import HEAD_NAMES, from_config, make_head

EMBEDDING_DIM, NUM_CLASSES, BATCH = 16, 10, 6


@pytest.fixture
def batch():
    torch.manual_seed(0)
    return torch.randn(BATCH, EMBEDDING_DIM), torch.tensor([0, 3, 3, 9, 5, 1])


def cosines(head, embeddings):
    return F.normalize(embeddings) @ F.normalize(head.weight).T


def split_target(logits, labels):
    """Target logits [B] and a mask [B, C] of the non-target entries."""
    mask = torch.ones_like(logits, dtype=torch.bool)
    mask[torch.arange(len(labels)), labels] = False
    return logits[torch.arange(len(labels)), labels], mask


@pytest.mark.parametrize("name", HEAD_NAMES)
def test_inference_logits_are_scaled_cosines(name, batch):
    embeddings, _ = batch
    head = make_head(name, EMBEDDING_DIM, NUM_CLASSES)
    out = head(embeddings)
    assert isinstance(out, HeadOutput) and out.aux_losses == {}
    torch.testing.assert_close(out.logits, 64.0 * cosines(head, embeddings))


def test_cosface_target_logit(batch):
    embeddings, labels = batch
    head = CosFaceHead(EMBEDDING_DIM, NUM_CLASSES)
    cos = cosines(head, embeddings)
    out = head(embeddings, labels)
    target, others = split_target(out.logits, labels)
    torch.testing.assert_close(target, 64.0 * (cos[torch.arange(BATCH), labels] - 0.35))
    torch.testing.assert_close(out.logits[others], 64.0 * cos[others])
    assert out.aux_losses == {}


def test_arcface_target_logit(batch):
    embeddings, labels = batch
    head = ArcFaceHead(EMBEDDING_DIM, NUM_CLASSES)
    cos = cosines(head, embeddings)
    out = head(embeddings, labels)
    target, others = split_target(out.logits, labels)
    theta = torch.acos(cos[torch.arange(BATCH), labels])
    torch.testing.assert_close(target, 64.0 * torch.cos(theta + 0.5))
    torch.testing.assert_close(out.logits[others], 64.0 * cos[others])


def test_arcface_falls_back_past_pi():
    """theta + m > pi: target logit is s * (cos - m sin m), still decreasing in theta (insightface)."""
    head = ArcFaceHead(2, 1, scale=1.0, margin=0.5)
    with torch.no_grad():
        head.weight.copy_(torch.tensor([[1.0, 0.0]]))
    angles = torch.tensor([math.pi - 0.3, math.pi - 0.2])
    embeddings = torch.stack([torch.cos(angles), torch.sin(angles)], dim=1)
    target = head(embeddings, torch.zeros(2, dtype=torch.long)).logits[:, 0]
    torch.testing.assert_close(target, torch.cos(angles) - 0.5 * math.sin(0.5))
    assert target[1] < target[0]


@pytest.mark.parametrize("name", ["arcface", "magface"])
@pytest.mark.parametrize("sign", [1.0, -1.0])
def test_angular_heads_have_finite_gradients_at_cos_plus_minus_one(name, sign):
    head = make_head(name, 4, 3)
    with torch.no_grad():
        head.weight.copy_(torch.eye(3, 4))
    # Each embedding points exactly at (sign=1) or away from (sign=-1) its class centre: cos = +-1 after normalising.
    embeddings = (sign * 20.0 * torch.eye(3, 4)).requires_grad_()
    labels = torch.arange(3)
    cos = cosines(head, embeddings)[labels, labels]
    assert torch.all(cos == sign)
    out = head(embeddings, labels)
    loss = F.cross_entropy(out.logits, labels) + sum(out.aux_losses.values())
    loss.backward()
    assert torch.isfinite(out.logits).all()
    assert torch.isfinite(embeddings.grad).all() and torch.isfinite(head.weight.grad).all()


def test_per_sample_margin_tensor_overrides_default(batch):
    embeddings, labels = batch
    head = CosFaceHead(EMBEDDING_DIM, NUM_CLASSES)
    cos = cosines(head, embeddings)[torch.arange(BATCH), labels]
    margins = torch.tensor([0.0, 0.1, 0.2, 0.3, 0.4, 0.5])
    target, _ = split_target(head(embeddings, labels, margin=margins).logits, labels)
    torch.testing.assert_close(target, 64.0 * (cos - margins))
    target, _ = split_target(head(embeddings, labels, margin=0.2).logits, labels)
    torch.testing.assert_close(target, 64.0 * (cos - 0.2))


def test_arcface_per_sample_margin(batch):
    embeddings, labels = batch
    head = ArcFaceHead(EMBEDDING_DIM, NUM_CLASSES)
    theta = torch.acos(cosines(head, embeddings)[torch.arange(BATCH), labels])
    margins = torch.linspace(0.1, 0.6, BATCH)
    target, _ = split_target(head(embeddings, labels, margin=margins).logits, labels)
    torch.testing.assert_close(target, 64.0 * torch.cos(theta + margins))


def test_margin_tensor_of_wrong_shape_is_rejected(batch):
    embeddings, labels = batch
    with pytest.raises(ValueError, match=r"margin tensor of shape \(3,\) must be a scalar or \[B\]=\[6\]"):
        CosFaceHead(EMBEDDING_DIM, NUM_CLASSES)(embeddings, labels, margin=torch.zeros(3))


def test_magface_margin_increases_with_norm_and_is_clamped():
    head = MagFaceHead(4, 2)
    direction = F.normalize(torch.ones(1, 4))
    norms = torch.tensor([1.0, 10.0, 35.0, 60.0, 110.0, 500.0])
    margin = head.default_margin(norms[:, None] * direction)
    torch.testing.assert_close(margin, torch.tensor([0.45, 0.45, 0.5375, 0.625, 0.8, 0.8]))
    assert torch.all(margin[1:5].diff() > 0)


def test_magface_target_logit_uses_norm_dependent_margin():
    head = MagFaceHead(EMBEDDING_DIM, NUM_CLASSES)
    torch.manual_seed(1)
    embeddings = F.normalize(torch.randn(BATCH, EMBEDDING_DIM)) * torch.linspace(5.0, 120.0, BATCH)[:, None]
    labels = torch.arange(BATCH)
    theta = torch.acos(cosines(head, embeddings)[labels, labels])
    margin = 0.45 + 0.35 * (embeddings.norm(dim=1).clamp(10.0, 110.0) - 10.0) / 100.0
    target, _ = split_target(head(embeddings, labels).logits, labels)
    torch.testing.assert_close(target, 64.0 * torch.cos(theta + margin))


def test_magface_regularizer_is_per_sample_and_weighted():
    head = MagFaceHead(4, 2, lambda_g=20.0)
    direction = F.normalize(torch.ones(1, 4))
    embeddings = torch.tensor([5.0, 20.0, 110.0])[:, None] * direction
    g = head.regularizer(embeddings)
    assert g.shape == (3,)
    expected = torch.tensor([1 / 10 + 10 / 110**2, 1 / 20 + 20 / 110**2, 1 / 110 + 110 / 110**2])
    torch.testing.assert_close(g, expected)
    aux = head(embeddings, torch.tensor([0, 1, 0])).aux_losses
    assert set(aux) == {"magface_g"} and aux["magface_g"].shape == ()
    torch.testing.assert_close(aux["magface_g"], 20.0 * expected.mean())


def test_magface_margin_is_differentiable_in_the_norm():
    head = MagFaceHead(4, 2)
    embeddings = (30.0 * F.normalize(torch.ones(2, 4))).requires_grad_()
    head.default_margin(embeddings).sum().backward()
    assert torch.all(embeddings.grad.norm(dim=1) > 0)


def test_head_computes_in_float32_under_autocast(batch):
    embeddings, labels = batch
    head = ArcFaceHead(EMBEDDING_DIM, NUM_CLASSES)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        out = head(embeddings.bfloat16(), labels)
    assert out.logits.dtype == torch.float32


@pytest.mark.parametrize(
    ("name", "kwargs", "message"),
    [
        ("arcface", {"margin": 2.0}, r"head.margin=2.0 must lie in \[0, pi/2\)"),
        ("cosface", {"margin": -0.1}, "head.margin=-0.1 must be non-negative"),
        ("cosface", {"scale": 0.0}, "head.scale=0.0 must be positive"),
        ("magface", {"l_a": 120.0}, "head.l_a=120.0 and head.u_a=110.0 must satisfy 0 < l_a < u_a"),
        ("magface", {"u_m": 0.3}, "must satisfy 0 <= l_m <= u_m < pi/2"),
    ],
)
def test_heads_reject_bad_arguments(name, kwargs, message):
    with pytest.raises(ValueError, match=message):
        make_head(name, EMBEDDING_DIM, NUM_CLASSES, **kwargs)


@pytest.mark.parametrize(
    ("name", "head_cls"), [("cosface", CosFaceHead), ("arcface", ArcFaceHead), ("magface", MagFaceHead)]
)
def test_head_configs_build_their_head_with_the_config_settings(name, head_cls):
    head = make_head(name, EMBEDDING_DIM, NUM_CLASSES, scale=30.0)
    assert type(head) is head_cls and head.scale == 30.0
    assert head.weight.shape == (NUM_CLASSES, EMBEDDING_DIM)


def test_embedding_dim_mismatch_is_rejected(batch):
    embeddings, _ = batch
    with pytest.raises(ValueError, match=r"do not match \[B, 8\]"):
        CosFaceHead(8, NUM_CLASSES)(embeddings)


# --- classification losses -----------------------------------------------------------------------------------------


def test_focal_loss_equals_cross_entropy_when_gamma_is_zero():
    torch.manual_seed(0)
    logits, labels = torch.randn(8, 5), torch.randint(0, 5, (8,))
    focal = from_config("loss", "focal", gamma=0.0)
    torch.testing.assert_close(focal(logits, labels), F.cross_entropy(logits, labels))


def test_focal_loss_value_and_down_weighting():
    logits, labels = torch.tensor([[2.0, 0.0], [0.0, 0.0]]), torch.tensor([0, 0])
    p = torch.softmax(logits, dim=1)[:, 0]
    expected = (-((1 - p) ** 2) * p.log()).mean()
    loss = FocalLoss(gamma=2.0)(logits, labels)
    torch.testing.assert_close(loss, expected)
    assert loss < F.cross_entropy(logits, labels)


def test_loss_configs_build_their_loss():
    assert isinstance(from_config("loss", "cross_entropy"), torch.nn.CrossEntropyLoss)
    assert isinstance(from_config("loss", "focal"), FocalLoss)
    with pytest.raises(ValueError, match="loss.gamma=-1.0 must be non-negative"):
        FocalLoss(gamma=-1.0)
