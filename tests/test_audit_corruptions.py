"""ImageNet-C corruptions: the compatibility layer over imagecorruptions, and the audit's planted effects."""

from __future__ import annotations

import functools
import sys

import numpy as np
import pytest
import torch
from matplotlib.figure import Figure
from PIL import Image

from fairnas.audits import corruptions
from fairnas.audits.base import AuditData
from fairnas.audits.corruption_compat import CORRUPTIONS, _glass_blur, _import_corruptions, corrupt
from fairnas.data.datamodule import FaceDataModule
from fairnas.data.sources import synthetic_faces

NOISE = ("gaussian_noise", "shot_noise", "impulse_noise")


@pytest.fixture(scope="module")
def image() -> np.ndarray:
    """A 40 x 48 uint8 picture with edges, gradients and colour (a face-sized test card)."""
    y, x = np.mgrid[0:40, 0:48] / 48.0
    picture = np.stack([x, y, 0.5 + 0.5 * np.sin(8 * x * y)], axis=-1)
    picture[10:30, 12:36] = [0.9, 0.2, 0.1]
    return (picture * 255).astype(np.uint8)


def test_the_fifteen_corruptions_in_imagenet_c_order():
    assert CORRUPTIONS[:3] == NOISE and CORRUPTIONS[-1] == "jpeg_compression" and len(set(CORRUPTIONS)) == 15


@pytest.mark.parametrize("name", CORRUPTIONS)
def test_every_corruption_and_severity_runs_and_is_seeded(image, name):
    outputs = []
    for severity in range(1, 6):
        out = corrupt(image, name, severity, seed=(0, 7))
        assert out.shape == image.shape and out.dtype == np.uint8
        assert (out == corrupt(image, name, severity, seed=(0, 7))).all()
        outputs.append(out)
    assert not (outputs[-1] == image).all()
    if name in NOISE:
        assert not (corrupt(image, name, 3, seed=(0, 7)) == corrupt(image, name, 3, seed=(0, 8))).all()


def test_severity_zero_is_the_image_and_the_global_random_state_is_restored(image):
    np.random.seed(123)
    expected = np.random.random(3)
    np.random.seed(123)
    clean = corrupt(image, "fog", 0, seed=1)
    assert (clean == image).all() and clean is not image
    corrupt(image, "frost", 2, seed=1)
    corrupt(image, "impulse_noise", 2, seed=1)
    assert (np.random.random(3) == expected).all()


def test_vectorised_glass_blur_is_bit_identical_to_the_reference_loop(image):
    reference = _import_corruptions().glass_blur  # the library's loop, on the patched gaussian
    for severity in range(1, 6):
        np.random.seed(severity)
        expected = np.uint8(reference(Image.fromarray(image), severity))
        np.random.seed(severity)
        assert (np.uint8(_glass_blur(Image.fromarray(image), severity)) == expected).all()


def test_the_library_is_patched_without_leaving_a_pkg_resources_stand_in():
    library = _import_corruptions()
    assert library.np.float_ is np.float64 and library.resource_filename(library.__name__, "./frost/frost1.png")
    module = sys.modules.get("pkg_resources")
    assert module is None or hasattr(module, "working_set")  # the real one, if any


def test_bad_corruption_input_is_refused(image):
    with pytest.raises(ValueError, match="unknown corruption 'rain'"):
        corrupt(image, "rain", 1, seed=0)
    with pytest.raises(ValueError, match="severity=6"):
        corrupt(image, "fog", 6, seed=0)
    with pytest.raises(ValueError, match="H, W >= 32"):
        corrupt(image[:20], "fog", 1, seed=0)


@pytest.mark.parametrize(
    ("key", "value", "match"),
    [
        ("corruptions", ["contrast", "rain"], r"corruptions\.corruptions=.*'gaussian_noise'"),
        ("corruptions", "contrast", r"corruptions\.corruptions="),
        ("severities", [1, 6], r"corruptions\.severities="),
        ("max_probes_per_group", 0, r"corruptions\.max_probes_per_group="),
        ("gallery_images", 0, r"corruptions\.gallery_images="),
        ("alpha", 1.5, r"corruptions\.alpha="),
        ("severity", [1], r"corruptions.severity is not a setting; allowed"),
    ],
)
def test_bad_settings_name_their_key(key, value, match):
    with pytest.raises(ValueError, match=match):
        corruptions.check_config({key: value})


def test_default_settings():
    settings = corruptions.checked_settings({})
    assert settings["corruptions"] == list(CORRUPTIONS) and settings["severities"] == [1, 2, 3, 4, 5]
    assert settings["max_probes_per_group"] == 100 and settings["alpha"] == 0.05


class PixelModel:
    """A hand-made model: the embedding is the image's (normalised) pixels."""

    device = torch.device("cpu")

    def embed(self, images: torch.Tensor) -> torch.Tensor:
        return torch.nn.functional.normalize(images.flatten(1), dim=1)


@functools.cache
def _datamodule(root: str, difficulty: float) -> FaceDataModule:
    table = functools.partial(
        synthetic_faces,
        root=root,
        n_identities=80,
        images_per_identity=10,
        image_size=32,
        split_fractions=(0.2, 0.2, 0.6),
        hard_group=1,
        difficulty=difficulty,
        seed=0,
    )
    datamodule = FaceDataModule(table, transforms={"image_size": 32, "resize": 32})
    datamodule.setup()
    return datamodule


def run_audit(cache_dir, difficulty: float, **settings):
    data = AuditData(_datamodule(str(cache_dir / "corruptions"), difficulty), "test", seed=0, batch_size=256)
    config = {
        "corruptions": ["contrast", "gaussian_noise"],
        "severities": [0, 2, 4],
        "max_probes_per_group": 100,
        **settings,
    }
    return corruptions.audit(PixelModel(), data, config)


def test_hard_group_has_a_significantly_worse_noise_curve(cache_dir):
    result = run_audit(cache_dir, difficulty=1.0)
    tests = result.tables["tests"].set_index(["test", "metric", "scope", "scope_value"])
    noise = tests.loc[("kruskal_wallis", "cosine", "corruption", "gaussian_noise")]
    assert noise["significant"] and noise["worse"] == "g1" and noise["p_holm"] < 0.05
    assert tests.loc[("wilcoxon_rank_sum", "cosine", "pooled", "all"), "significant"]
    curves = result.tables["group_curves"]
    curve = curves[(curves["corruption"] == "gaussian_noise") & (curves["severity"] > 0)].pivot(
        index="severity", columns="group", values="cosine_mean"
    )
    assert (curve["g1"] < curve["g0"]).all()
    assert "cosine: g1 worse" in result.finding and "gaussian_noise" in result.finding


def test_no_significant_test_without_bias_and_clean_severity_is_consistent(cache_dir):
    result = run_audit(cache_dir, difficulty=0.0)
    tests, records = result.tables["tests"], result.tables["records"]
    assert not tests["significant"].any() and "No group difference" in result.finding
    assert len(records) == 200 * 2 * 3 and result.summary["n_probes"] == {"g0": 100, "g1": 100}
    clean = records[records["severity"] == 0]
    assert (clean["consistent"] == 1).all() and np.allclose(clean["cosine"], 1, atol=1e-5)
    assert (records[records["severity"] > 0]["consistent"] == 0).any()
    assert set(tests["scope_value"]) == {"all", "contrast", "gaussian_noise", "2", "4"}  # severity 0: no tests
    assert {"records", "group_curves", "tests", "odds_ratios", "extremes"} == set(result.tables)
    assert all(isinstance(figure, Figure) for figure in result.figures.values())
    assert set(result.figures) == {"severity_curves", "forest"}
    ratios = result.tables["odds_ratios"]
    assert list(ratios["outcome"]) == ["consistent", "correct"] and (ratios["group"] == "g1").all()
    row = ratios.iloc[0]
    assert row["ci_low"] < row["odds_ratio"] < row["ci_high"] and row["n_clusters"] == 200
    assert set(result.tables["extremes"]["group"]) == {"g0", "g1"}


def test_records_are_seeded_by_the_data_seed(cache_dir):
    first = run_audit(cache_dir, 0.0, corruptions=["gaussian_noise"], severities=[3], max_probes_per_group=5)
    again = run_audit(cache_dir, 0.0, corruptions=["gaussian_noise"], severities=[3], max_probes_per_group=5)
    assert first.tables["records"].equals(again.tables["records"])
    only_clean = run_audit(cache_dir, 0.0, severities=[0], max_probes_per_group=5)
    assert only_clean.tables["tests"].empty and "Only clean probes" in only_clean.finding
    assert only_clean.tables["odds_ratios"]["odds_ratio"].isna().all()
