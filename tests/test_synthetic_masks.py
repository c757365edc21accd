"""Part masks of the synthetic renderer: written for every image in the generic format, where the parts are, and
the images unchanged by them."""

from __future__ import annotations

import dataclasses
import hashlib
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from PIL import Image

from fairnas.data import FaceDataModule, read_generic
from fairnas.data.masks import MASK_COLUMN, MASK_PARTS, read_label_map
from fairnas.data.synthetic import METADATA_COLUMNS, SyntheticFaceSpec, render_synthetic_faces, sample_identities
from fairnas.data.synthetic.rendering import (
    FACE_CENTRE,
    SUPERSAMPLE,
    _majority_labels,
    render_face,
    render_face_with_mask,
    sample_conditions,
)

SPEC = SyntheticFaceSpec(n_identities=12, images_per_identity=4, image_size=32, glasses_prob=0.3, hat_prob=0.3, seed=3)
PART = {name: index for index, name in enumerate(MASK_PARTS)}

# Byte identity. SHA-256 of the decoded RGB pixels (not of the PNG files, whose bytes depend on the encoder) of
# (a) SPEC's images in metadata.csv order and (b) the direct renders of `direct_renders`, recorded with the renderer
# as it was before it drew masks (RENDERER_VERSION 1). Drawing the masks must not change a single pixel: the masks
# describe the very images earlier data sets and the OOD audit's re-rendering hold.
DATASET_PIXELS_SHA256 = "f58ba537087ddb35dc65ecc5010507c38e71e9e919e33e7d12057708d827946d"
DIRECT_PIXELS_SHA256 = "5e0b9466707a0404d4b3352abc5787625594e36ff652c0050dde2fd640d0f430"


@pytest.fixture(scope="module")
def root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return render_synthetic_faces(SPEC, tmp_path_factory.mktemp("masks_cache"))


def direct_renders(render):
    """Two images per identity per occluder configuration at 64 px, with ``render`` (image first)."""
    spec = SyntheticFaceSpec(n_identities=8, images_per_identity=2, image_size=64, seed=11)
    for i, identity in enumerate(sample_identities(spec)):
        for occluder in ("none", "glasses", "hat", "glasses+hat"):
            rng = np.random.default_rng([11, i])
            conditions = dataclasses.replace(sample_conditions(spec, identity.group, rng), occluder=occluder)
            yield render(identity.parameters, conditions, 64, rng)


def test_every_image_has_a_mask_of_its_size_with_region_indices(root: Path) -> None:
    metadata = pd.read_csv(root / "metadata.csv")
    assert tuple(metadata.columns) == METADATA_COLUMNS and MASK_COLUMN in METADATA_COLUMNS
    assert sorted(metadata["occluder"].unique()) == ["glasses", "hat", "none"]
    for row in metadata.itertuples():
        assert getattr(row, MASK_COLUMN) == row.path.replace("images/", "masks/", 1)
        with Image.open(root / getattr(row, MASK_COLUMN)) as file:
            assert (file.format, file.mode, file.size) == ("PNG", "L", (SPEC.image_size,) * 2)
        labels = np.asarray(read_label_map(root / getattr(row, MASK_COLUMN)))  # raises on a value out of range
        present = set(np.unique(labels).tolist())
        assert {PART["background"], PART["skin"], PART["eyes"], PART["nose"]} <= present
        assert (PART["hat"] in present) == (row.occluder == "hat")
        assert (PART["glasses"] in present) == (row.occluder == "glasses")
    # The generic reader and the data module carry the column through to every split.
    datamodule = FaceDataModule(lambda: read_generic(root), transforms={"image_size": SPEC.image_size})
    datamodule.setup()
    assert all(MASK_COLUMN in frame.columns for frame in datamodule.splits.values())


def test_image_pixels_are_those_of_the_renderer_before_masks(root: Path) -> None:
    digest = hashlib.sha256()
    for path in pd.read_csv(root / "metadata.csv")["path"]:
        with Image.open(root / path) as file:
            digest.update(np.asarray(file.convert("RGB")).tobytes())
    assert digest.hexdigest() == DATASET_PIXELS_SHA256
    digest = hashlib.sha256()
    for (image, mask), plain in zip(direct_renders(render_face_with_mask), direct_renders(render_face), strict=True):
        assert image.tobytes() == plain.tobytes() and mask.size == image.size
        digest.update(np.asarray(image).tobytes())
    assert digest.hexdigest() == DIRECT_PIXELS_SHA256


def centroid(mask: np.ndarray) -> np.ndarray:
    """(x, y) of a binary map's centroid in image coordinates (pixel i covers [i, i + 1))."""
    y, x = np.nonzero(mask)
    return np.array([x.mean(), y.mean()]) + 0.5


def test_parts_sit_where_the_face_model_puts_them_on_frontal_faces() -> None:
    size = 64
    spec = SyntheticFaceSpec(n_identities=8, images_per_identity=2, image_size=size, seed=7)
    centre = np.array(FACE_CENTRE) * size
    for identity in sample_identities(spec):
        p = identity.parameters
        rng = np.random.default_rng(0)
        conditions = dataclasses.replace(
            sample_conditions(spec, identity.group, rng), yaw=0.0, roll=0.0, scale=1.0, occluder="none"
        )
        labels = np.asarray(render_face_with_mask(p, conditions, size, rng)[1])
        eyes = labels == PART["eyes"]
        left, right = centroid(eyes[:, : size // 2]), centroid(eyes[:, size // 2 :]) + [size // 2, 0]
        expected_y = centre[1] + p["eye_level"] * size
        for eye, side in ((left, -1), (right, 1)):  # each eye within half a pixel of its centre
            assert eye == pytest.approx([centre[0] + side * p["eye_spacing"] * size, expected_y], abs=0.5)
        assert abs((centre[0] - left[0]) - (right[0] - centre[0])) < 0.25 and abs(left[1] - right[1]) < 0.25
        sclera = 2 * np.pi * p["eye_width"] ** 2 * p["eye_openness"] * size**2  # two ellipses, pixels
        assert 0.8 < eyes.sum() / sclera < 1.3  # the whole eye, not only the iris
        face = np.isin(labels, [PART[name] for name in ("skin", "eyes", "brows", "nose", "mouth")])
        rows = np.flatnonzero(face.any(axis=1))
        assert centroid(eyes)[1] < (rows.min() + rows.max() + 1) / 2  # eyes in the upper half of the face
        heights = {name: centroid(labels == PART[name])[1] for name in ("brows", "eyes", "nose", "mouth")}
        assert heights["brows"] < heights["eyes"] < heights["nose"] < heights["mouth"]


def test_occluders_are_labelled_as_theirs_and_hide_what_they_cover() -> None:
    spec = SyntheticFaceSpec(n_identities=8, images_per_identity=2, image_size=64, seed=7)
    identity = sample_identities(spec)[0]
    base = dataclasses.replace(sample_conditions(spec, identity.group, np.random.default_rng(1)), roll=0.0)
    masks = {
        occluder: np.asarray(
            render_face_with_mask(
                identity.parameters, dataclasses.replace(base, occluder=occluder), 64, np.random.default_rng(2)
            )[1]
        )
        for occluder in ("none", "glasses", "hat")
    }
    assert not np.isin(masks["none"], [PART["hat"], PART["glasses"]]).any()
    hat, glasses = masks["hat"] == PART["hat"], masks["glasses"] == PART["glasses"]
    assert hat.sum() > 100 and not (masks["hat"] == PART["glasses"]).any()
    assert glasses.sum() > 20 and not (masks["glasses"] == PART["hat"]).any()
    assert centroid(hat)[1] < centroid(masks["hat"] == PART["eyes"])[1]  # the hat sits above the eyes
    # Where the hat is, the unoccluded face shows hair, skin or background; elsewhere the masks agree.
    assert np.isin(masks["none"][hat], [PART[name] for name in ("background", "skin", "hair", "ears")]).all()
    assert np.array_equal(masks["none"][~hat], masks["hat"][~hat])


def test_mask_pixels_take_the_majority_label_of_their_block_ties_to_the_later_part() -> None:
    block = SUPERSAMPLE * SUPERSAMPLE
    labels = np.zeros((SUPERSAMPLE, 3 * SUPERSAMPLE), np.uint8)
    labels[:, :SUPERSAMPLE].flat[: block // 2 + 1] = PART["eyes"]  # eyes in 9 of 16: eyes
    labels[:, SUPERSAMPLE : 2 * SUPERSAMPLE].flat[: block // 2] = PART["brows"]  # 8 brows, 8 background: brows
    sub = labels[:, 2 * SUPERSAMPLE :]
    sub[:] = PART["skin"]
    sub.flat[:5], sub.flat[5:9] = PART["glasses"], PART["eyes"]  # skin 7 > glasses 5 > eyes 4: skin
    result = np.asarray(_majority_labels(Image.fromarray(labels)))
    assert result.tolist() == [[PART["eyes"], PART["brows"], PART["skin"]]]
