"""Attention-IoU: the metric's invariances, the Grad-CAM layer of every backbone, region masks, planted effects."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from torch import nn

from fairnas.audits.attention_iou import attention_iou, feature_map_layer
from fairnas.data.masks import MASK_PARTS, landmark_region_maps, region_maps
from fairnas.models import FaceEmbedder, SearchableDPN, TimmBackbone


def test_attention_iou_is_one_for_identical_and_zero_for_disjoint_maps():
    rng = np.random.default_rng(0)
    first = rng.random((6, 5))
    assert attention_iou(first, first) == pytest.approx(1.0)
    left, right = np.zeros((4, 4)), np.zeros((4, 4))
    left[:, :2], right[:, 2:] = 1.0, 1.0
    assert attention_iou(left, right) == 0.0
    assert 0.0 < attention_iou(first, rng.random((6, 5))) < 1.0


def test_attention_iou_is_invariant_to_scale_and_integer_nearest_resizing():
    rng = np.random.default_rng(1)
    first, second = rng.random((5, 7)), rng.random((5, 7))
    value = attention_iou(first, second)
    assert attention_iou(3.5 * first, 0.2 * second) == pytest.approx(value)
    for factor in (2, 3):
        block = np.ones((factor, factor))
        assert attention_iou(np.kron(first, block), np.kron(second, block)) == pytest.approx(value)


def test_attention_iou_is_nan_for_an_all_zero_map_and_batches_over_leading_axes():
    rng = np.random.default_rng(2)
    maps = rng.random((3, 4, 4))
    maps[1] = 0.0
    values = attention_iou(maps, maps)
    assert values.shape == (3,) and values[0] == pytest.approx(1.0) and np.isnan(values[1])


@pytest.mark.parametrize("backbone", [
    lambda: SearchableDPN(num_init_features=8, k_r=8, groups=4, inc_sec=(4, 4, 4, 4), base_width=16),
    lambda: TimmBackbone("resnet18"),
    lambda: TimmBackbone("dpn68"),
], ids=["searchable_dpn", "resnet18", "dpn68"])
def test_gradcam_layer_is_the_last_spatial_map_before_pooling(backbone):
    embedder = FaceEmbedder(backbone(), embedding_dim=16).eval()
    layer = feature_map_layer(embedder, 64)
    seen = {}
    handle = layer.register_forward_hook(lambda module, _, output: seen.setdefault("output", output))
    embedder(torch.zeros(1, 3, 64, 64))
    handle.remove()
    assert isinstance(seen["output"], torch.Tensor) and seen["output"].shape[-1] == 2   # 64 px / 32
    assert not isinstance(layer, nn.AdaptiveAvgPool2d)


def test_token_backbones_are_refused_with_one_line():
    embedder = FaceEmbedder(TimmBackbone("vit_tiny_patch16_224", img_size=64), embedding_dim=16).eval()
    with pytest.raises(ValueError, match="no spatial feature map"):
        feature_map_layer(embedder, 64)


def test_region_maps_and_landmark_soft_masks():
    label = np.array([[0, 1], [4, 4]])
    maps = region_maps(label)
    assert maps.shape == (len(MASK_PARTS), 2, 2) and maps.sum(axis=0).tolist() == [[1, 1], [1, 1]]
    assert maps[MASK_PARTS.index("eyes")].sum() == 2
    soft = landmark_region_maps([69, 109, 106, 113, 77, 142, 73, 152, 108, 154], 178, 218)
    eyes = soft[MASK_PARTS.index("eyes")]
    assert eyes[109, 69] == pytest.approx(1.0) and eyes[200, 20] < 1e-6
    assert soft[MASK_PARTS.index("hair")].sum() == 0                   # no landmark: an empty map, NaN score
    assert soft[MASK_PARTS.index("background")][5, 5] > 0.99 and soft[MASK_PARTS.index("skin")][130, 90] > 0.5
