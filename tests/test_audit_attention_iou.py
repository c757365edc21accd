"""Attention-IoU: the metric's invariances, the Grad-CAM layer of every backbone, region masks, planted effects."""

from __future__ import annotations

import functools

import numpy as np
import pytest
import torch
from omegaconf import OmegaConf
from torch import nn

from fairnas.audits.attention_iou import _probe_masks, attention_iou, audit, feature_map_layer
from fairnas.audits.base import AuditData
from fairnas.audits.gallery import PixelPipeline
from fairnas.data import FaceDataModule
from fairnas.data.masks import MASK_PARTS, landmark_region_maps, region_maps
from fairnas.data.sources import synthetic_faces
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


@pytest.mark.parametrize(
    "backbone",
    [
        lambda: SearchableDPN(num_init_features=8, k_r=8, groups=4, inc_sec=(4, 4, 4, 4), base_width=16),
        lambda: TimmBackbone("resnet18"),
        lambda: TimmBackbone("dpn68"),
    ],
    ids=["searchable_dpn", "resnet18", "dpn68"],
)
def test_gradcam_layer_is_the_last_spatial_map_before_pooling(backbone):
    embedder = FaceEmbedder(backbone(), embedding_dim=16).eval()
    layer = feature_map_layer(embedder, 64)
    seen = {}
    handle = layer.register_forward_hook(lambda module, _, output: seen.setdefault("output", output))
    embedder(torch.zeros(1, 3, 64, 64))
    handle.remove()
    assert isinstance(seen["output"], torch.Tensor) and seen["output"].shape[-1] == 2  # 64 px / 32
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
    assert soft[MASK_PARTS.index("hair")].sum() == 0  # no landmark: an empty map, NaN score
    assert soft[MASK_PARTS.index("background")][5, 5] > 0.99 and soft[MASK_PARTS.index("skin")][130, 90] > 0.5


# ------------------------------------------------------------------------------------- planted: where the model looks

PLANTED_SPEC = dict(n_identities=40, images_per_identity=5, image_size=64, split_fractions=(0.5, 0.1, 0.4), seed=0)
PLANTED_TRANSFORMS = {"image_size": 64, "resize": 72}


class Window(nn.Module):
    """Multiplies the (normalised) input by a fixed [H, W] window: the network sees nothing outside it."""

    def __init__(self, window: np.ndarray):
        super().__init__()
        self.register_buffer("window", torch.as_tensor(window, dtype=torch.float32))

    def forward(self, images: torch.Tensor) -> torch.Tensor:
        return images * self.window


class WindowModel:
    """A model that only sees one facial part: a window where that part's mask is set in at least half the training
    images as often as at its most frequent pixel, then a random 3x3 convolution, ReLU and global average pooling.
    Its Grad-CAM map is zero outside the window (dilated by one pixel), whatever the target."""

    device = torch.device("cpu")

    def __init__(self, window: np.ndarray):
        torch.manual_seed(0)
        self.embedder = nn.Sequential(
            Window(window), nn.Conv2d(3, 32, 3, padding=1, bias=False), nn.ReLU(), nn.AdaptiveAvgPool2d(1), nn.Flatten()
        ).eval()

    def embed(self, images: torch.Tensor) -> torch.Tensor:
        return self.embedder(images)


@pytest.fixture(scope="module")
def synthetic_with_masks(tmp_path_factory) -> AuditData:
    """Default-nuisance synthetic faces (pose, scale, lighting, glasses and hats vary) read through the data
    source, masks and all: the audit finds the ``mask`` column by itself."""
    table = functools.partial(synthetic_faces, tmp_path_factory.mktemp("attention_cache"), **PLANTED_SPEC)
    datamodule = FaceDataModule(table, transforms=PLANTED_TRANSFORMS)
    datamodule.setup()
    return AuditData(datamodule, "test", seed=0, batch_size=64)


def part_window(data: AuditData, part: str) -> np.ndarray:
    """Where ``part`` usually is: its mean training mask (as the audit reads masks) at >= half its maximum."""
    masks = _probe_masks(data.datamodule.splits["train"], data.root, PixelPipeline(data.transforms))
    mean = masks[:, MASK_PARTS.index(part)].mean(axis=0)
    return (mean >= 0.5 * mean.max()).astype(np.float32)


@pytest.mark.parametrize("part", ["eyes", "mouth"])  # mouth: the control, the assertion can fail
def test_a_model_that_only_sees_one_part_scores_highest_on_that_part(synthetic_with_masks, part):
    config = OmegaConf.create(
        {"max_probes_per_group": None, "gallery_images": 1, "probe_images": 200, "n_bootstrap": 20}
    )
    result = audit(WindowModel(part_window(synthetic_with_masks, part)), synthetic_with_masks, config)
    other = {"eyes": "mouth", "mouth": "eyes"}[part]
    assert {f"mask_{name}" for name in MASK_PARTS} <= set(result.tables["probes"].columns)
    assert "mask_scores" in result.figures
    assert result.summary["n_probes"] == 2 * 8 * 4  # 8 test identities per group, 4 probes each
    assert result.summary["top_region"] == {"g0": part, "g1": part}
    scores = result.summary["mask_score"]
    for group in ("g0", "g1"):  # seed 0: 2.3-4x the next region
        rivals = [v for key, v in scores.items() if key.startswith(f"{group}/") and key != f"{group}/{part}"]
        assert scores[f"{group}/{part}"] > 2 * np.nanmax(rivals)
        assert scores[f"{group}/{other}"] < 0.05
