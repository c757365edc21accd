"""Tests for the procedurally rendered synthetic face set (fairnas.data.synthetic)."""

from __future__ import annotations

import csv
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from fairnas.data.synthetic import (
    FACE_PARAMETERS,
    METADATA_COLUMNS,
    SyntheticFaceSpec,
    render_synthetic_faces,
    sample_identities,
)
from fairnas.data.synthetic import dataset as synthetic_dataset
from fairnas.data.synthetic.identities import HARD_GROUP_MIN_SPREAD
from fairnas.data.synthetic.rendering import (
    DIFFICULTY_CONTRAST_LOSS,
    DIFFICULTY_NOISE_GAIN,
    OCCLUDERS,
    sample_conditions,
)

SMALL = SyntheticFaceSpec(n_identities=12, images_per_identity=4, image_size=32, seed=3)


def read_rows(path: Path) -> list[dict[str, str]]:
    with path.open(newline="") as handle:
        return list(csv.DictReader(handle))


def dataset_bytes(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


@pytest.fixture(scope="module")
def small_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return render_synthetic_faces(SMALL, tmp_path_factory.mktemp("cache"))


def test_writes_images_and_metadata_in_generic_format(small_root: Path) -> None:
    rows = read_rows(small_root / "metadata.csv")
    assert small_root.name == SMALL.cache_key()
    assert tuple(rows[0]) == METADATA_COLUMNS
    assert len(rows) == 12 * 4
    assert len({r["identity"] for r in rows}) == 12
    assert {r["group"] for r in rows} == {"g0", "g1"}
    assert {r["occluder"] for r in rows} <= set(OCCLUDERS)
    assert rows[0]["path"] == "images/id_0000/000.png"
    for row in rows:
        with Image.open(small_root / row["path"]) as image:
            assert (image.format, image.mode, image.size) == ("PNG", "RGB", (32, 32))
        assert float(row["noise"]) >= 0.0 and abs(float(row["yaw"])) <= SMALL.max_yaw_deg
        assert SMALL.scale_range[0] <= float(row["scale"]) <= SMALL.scale_range[1]


def test_identities_csv_agrees_with_metadata(small_root: Path) -> None:
    identities = read_rows(small_root / "identities.csv")
    images = read_rows(small_root / "metadata.csv")
    labels = {r["identity"]: (r["group"], r["split"]) for r in identities}
    assert all(labels[r["identity"]] == (r["group"], r["split"]) for r in images)
    assert {p.name for p in FACE_PARAMETERS} <= set(identities[0])


def test_images_are_not_blank(small_root: Path) -> None:
    pixels = np.asarray(Image.open(small_root / "images/id_0000/000.png"), dtype=np.float32)
    assert pixels.std() > 10.0


def test_same_spec_renders_byte_identical_files(small_root: Path, tmp_path: Path) -> None:
    again = render_synthetic_faces(SMALL, tmp_path)
    assert dataset_bytes(again) == dataset_bytes(small_root)


def test_different_seed_renders_different_data(small_root: Path, tmp_path: Path) -> None:
    other_spec = SyntheticFaceSpec(n_identities=12, images_per_identity=4, image_size=32, seed=4)
    other = render_synthetic_faces(other_spec, tmp_path)
    assert other.name != small_root.name
    assert (other / "metadata.csv").read_bytes() != (small_root / "metadata.csv").read_bytes()
    first_image = "images/id_0000/000.png"
    assert (other / first_image).read_bytes() != (small_root / first_image).read_bytes()


def test_second_call_reuses_the_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    root = render_synthetic_faces(SMALL, tmp_path)
    stamp = (root / "images/id_0003/002.png").stat().st_mtime_ns

    def fail(*args: object) -> None:
        raise AssertionError("re-rendered a cached data set")

    monkeypatch.setattr(synthetic_dataset, "_write_dataset", fail)
    assert render_synthetic_faces(SMALL, tmp_path) == root
    assert (root / "images/id_0003/002.png").stat().st_mtime_ns == stamp


def test_interrupted_render_leaves_nothing_that_looks_complete(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    calls = []
    real_render = synthetic_dataset.render_face_with_mask

    def crash_on_fifth(*args: object) -> tuple[Image.Image, Image.Image]:
        calls.append(1)
        if len(calls) == 5:
            raise KeyboardInterrupt
        return real_render(*args)

    monkeypatch.setattr(synthetic_dataset, "render_face_with_mask", crash_on_fifth)
    with pytest.raises(KeyboardInterrupt):
        render_synthetic_faces(SMALL, tmp_path)
    assert list(tmp_path.iterdir()) == []
    monkeypatch.setattr(synthetic_dataset, "render_face_with_mask", real_render)
    root = render_synthetic_faces(SMALL, tmp_path)
    assert len(read_rows(root / "metadata.csv")) == 48


def test_unmarked_directory_at_the_root_is_replaced(tmp_path: Path) -> None:
    stale = tmp_path / SMALL.cache_key()
    stale.mkdir()
    (stale / "metadata.csv").write_text("path\n")
    root = render_synthetic_faces(SMALL, tmp_path)
    assert root == stale
    assert len(read_rows(root / "metadata.csv")) == 48


def test_splits_are_identity_disjoint_and_balanced_in_val_and_test(small_root: Path) -> None:
    rows = read_rows(small_root / "metadata.csv")
    splits_of = {}
    for row in rows:
        splits_of.setdefault(row["identity"], set()).add(row["split"])
    assert all(len(splits) == 1 for splits in splits_of.values())
    identities = read_rows(small_root / "identities.csv")
    for split in ("val", "test"):
        groups = [r["group"] for r in identities if r["split"] == split]
        assert sorted(groups) == ["g0", "g1"]
    assert sum(r["split"] == "train" for r in identities) == 8


@pytest.mark.parametrize(("share", "expected_train"), [(None, [12, 12]), ((0.8, 0.2), [19, 5]), ((1.0, 0.0), [24, 0])])
def test_train_group_share_sets_group_sizes_in_train_only(share, expected_train) -> None:
    spec = SyntheticFaceSpec(n_identities=40, train_group_share=share)
    assert spec.identities_per_split() == {"train": expected_train, "val": [4, 4], "test": [4, 4]}
    identities = sample_identities(spec)
    train_groups = [i.group for i in identities if i.split == "train"]
    assert [train_groups.count(g) for g in (0, 1)] == expected_train


def test_difficulty_shrinks_between_identity_spread_of_hard_group_only() -> None:
    def parameters(difficulty: float, group: int) -> np.ndarray:
        identities = sample_identities(SyntheticFaceSpec(n_identities=200, difficulty=difficulty, hard_group=1))
        return np.array([list(i.parameters.values()) for i in identities if i.group == group])

    shrink = 1.0 - (1.0 - HARD_GROUP_MIN_SPREAD) * 0.8
    ratio = parameters(0.8, 1).std(axis=0) / parameters(0.0, 1).std(axis=0)
    np.testing.assert_allclose(ratio, shrink, rtol=1e-9)
    np.testing.assert_array_equal(parameters(0.8, 0), parameters(0.0, 0))


def test_groups_differ_in_skin_and_hair_means() -> None:
    identities = sample_identities(SyntheticFaceSpec(n_identities=200))
    for name in ("skin_tone", "hair_colour"):
        means = [np.mean([i.parameters[name] for i in identities if i.group == g]) for g in (0, 1)]
        assert means[1] - means[0] > 0.15


def test_difficulty_lowers_contrast_and_raises_noise_of_hard_group() -> None:
    spec = SyntheticFaceSpec(difficulty=1.0, hard_group=0, noise_range=(0.01, 0.01))
    rng = np.random.default_rng(0)
    hard, easy = sample_conditions(spec, 0, rng), sample_conditions(spec, 1, rng)
    assert (hard.contrast, easy.contrast) == (1.0 - DIFFICULTY_CONTRAST_LOSS, 1.0)
    assert hard.noise == pytest.approx(0.01 * (1.0 + DIFFICULTY_NOISE_GAIN))
    assert easy.noise == pytest.approx(0.01)


@pytest.mark.parametrize(
    ("knobs", "expected"),
    [
        ({"glasses_prob": 1.0, "hat_prob": 0.0}, {"glasses"}),
        ({"glasses_prob": 0.0, "hat_prob": 1.0}, {"hat"}),
        ({"glasses_prob": 0.0, "hat_prob": 0.0}, {"none"}),
    ],
)
def test_occluder_probabilities(knobs, expected) -> None:
    spec = SyntheticFaceSpec(**knobs)
    rng = np.random.default_rng(0)
    assert {sample_conditions(spec, 0, rng).occluder for _ in range(50)} == expected


def test_hydra_style_lists_and_ints_give_the_same_spec_and_cache_key() -> None:
    from_lists = SyntheticFaceSpec(split_fractions=[0.6, 0.2, 0.2], train_group_share=[1, 0], difficulty=1)
    from_tuples = SyntheticFaceSpec(split_fractions=(0.6, 0.2, 0.2), train_group_share=(1.0, 0.0), difficulty=1.0)
    assert from_lists == from_tuples
    assert from_lists.cache_key() == from_tuples.cache_key()


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("n_groups", 1),
        ("image_size", 8),
        ("image_size", 300),
        ("train_group_share", (0.7, 0.2)),
        ("train_group_share", (0.5, 0.3, 0.2)),
        ("split_fractions", (0.5, 0.5, 0.5)),
        ("split_fractions", (0.0, 0.5, 0.5)),
        ("difficulty", 1.5),
        ("difficulty", "hard"),
        ("hard_group", 2),
        ("hat_prob", 0.95),
        ("scale_range", (1.2, 0.8)),
        ("images_per_identity", 1),
    ],
)
def test_bad_spec_values_raise_one_line_error_naming_the_field(field: str, value: object) -> None:
    with pytest.raises(ValueError, match=rf"SyntheticFaceSpec\.{field} ") as raised:
        SyntheticFaceSpec(**{field: value})
    assert "\n" not in str(raised.value)


def test_too_few_identities_for_the_splits_raises() -> None:
    with pytest.raises(ValueError, match=r"SyntheticFaceSpec\.n_identities=4 is too small"):
        SyntheticFaceSpec(n_identities=4, split_fractions=(0.8, 0.1, 0.1))
