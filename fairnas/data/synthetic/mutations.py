"""Mutations of a face image with a known in- or out-of-distribution label (DistroFair, Sec. 3).

**Re-rendering.** A synthetic data set's folder holds ``spec.json``; image ``image_index`` of identity number
``index`` (the order of :func:`~fairnas.data.synthetic.identities.sample_identities`) was drawn with
``rng = default_rng([seed, 1, index, image_index])``, ``sample_conditions(spec, group, rng)`` and
``render_face_with_mask(parameters, conditions, image_size, rng)``, whose image is ``render_face``'s (the part
mask does not change a pixel). :class:`SyntheticSource` replays that with ``render_face``, so it
reproduces the file on disk pixel for pixel, and renders the *same person in the same photo* (same background,
clothing, lighting gradient, noise) with chosen nuisances replaced: no inpainting, no artefacts.

**Mutations.** Synthetic data (re-rendered): ``yaw``, ``roll``, ``scale``, ``illumination`` and ``occluders``.
Any data (image space, applied to the uint8 image the model sees, after resize and centre crop): ``rotation``
(in-plane, about the centre), ``zoom`` (in or out about the centre) and ``crop`` (a smaller square window at a
random position, resized back: a shifted, tighter detector box). Uncovered pixels take the mean border colour.

**ID or OOD** (DistroFair Definition 1: an image is OOD when a quantity lies outside the [min, max] observed in
the reference images). The reference here is the *training split's* metadata (:class:`TrainingRanges`), i.e.
what the model was fitted on:

- yaw / roll: ID draws are uniform in the observed [min, max] (degrees); OOD values lie ``margin_deg`` beyond
  it on a random side (min - margin or max + margin; yaw capped at +-75 degrees so a face stays a face);
- scale / illumination: ID uniform in the observed [min, max]; OOD is ``min * (1 - margin)`` or
  ``max * (1 + margin)``;
- occluders: a configuration of accessories (``none``, ``glasses``, ``hat``, ``glasses+hat``) is OOD when its
  number of accessories, or its count of one accessory type, lies outside the range seen in training (Def. 1's
  count rule: with at most one accessory per training image, ``glasses+hat`` is OOD; ``none`` -- all accessories
  removed -- is ID exactly when training had unoccluded images). Each probe gets one ID and one OOD
  configuration different from its own, when one exists.
- image space, by configured magnitudes ``(id_max, ood)`` since a real data set records no pose: ``rotation``
  ID |angle| <= id_max degrees (uniform), OOD |angle| = ood; ``zoom`` ID factor in [1/id_max, id_max]
  (log-uniform), OOD factor ood or 1/ood; ``crop`` ID window side in [id_min, 1] of the image, OOD side = ood.
  Defaults (:data:`DEFAULT_SETTINGS`): rotation (10, 30) degrees -- aligned face crops keep a few degrees of
  residual roll and training adds no rotation; zoom (1.1, 1.4) -- alignment fixes the face scale to within
  ~10%; crop (0.85, 0.6) -- the training random crop moves the window by (resize - size) / 2 pixels only.
"""

from __future__ import annotations

import dataclasses
import itertools
import json
import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from PIL import Image

from fairnas.data.synthetic.dataset import SPEC_FILE
from fairnas.data.synthetic.identities import FaceIdentity, sample_identities
from fairnas.data.synthetic.rendering import ImageConditions, render_face, sample_conditions
from fairnas.data.synthetic.spec import RENDERER_VERSION, SyntheticFaceSpec

SYNTHETIC_MUTATIONS = ("yaw", "roll", "scale", "illumination", "occluders")
IMAGE_MUTATIONS = ("rotation", "zoom", "crop")
MUTATIONS = SYNTHETIC_MUTATIONS + IMAGE_MUTATIONS
ACCESSORIES = ("glasses", "hat")
ID, OOD = "ID", "OOD"
MAX_YAW_DEG = 75.0
DEFAULT_SETTINGS: dict[str, Any] = {  # margins are numbers, image-space magnitudes pairs
    "yaw_margin_deg": 15.0,  # OOD yaw: this far beyond the training range
    "roll_margin_deg": 15.0,
    "scale_margin": 0.2,  # OOD scale: training min * (1 - m) or max * (1 + m)
    "illumination_margin": 0.4,
    "rotation_deg": (10.0, 30.0),  # image space (id_max, ood): ID |angle| <= 10, OOD |angle| = 30
    "zoom": (1.1, 1.4),  # ID factor in [1/1.1, 1.1], OOD 1.4 or 1/1.4
    "crop": (0.85, 0.6),  # ID window side in [0.85, 1], OOD 0.6 (of the image side)
}


def occluder_configurations() -> list[str]:
    """Every set of accessories as an ``occluder`` value: ``none``, ``glasses``, ``hat``, ``glasses+hat``."""
    combos = itertools.chain.from_iterable(itertools.combinations(ACCESSORIES, k) for k in range(len(ACCESSORIES) + 1))
    return ["+".join(combo) or "none" for combo in combos]


def _accessory_counts(value: str) -> dict[str, int]:
    parts = [] if value == "none" else str(value).split("+")
    unknown = set(parts) - set(ACCESSORIES)
    if unknown:
        raise ValueError(f"unknown occluder {value!r}; accessories: {list(ACCESSORIES)} joined by '+', or 'none'")
    return {"total": len(parts), **{name: parts.count(name) for name in ACCESSORIES}}


# ---------------------------------------------------------------------------------------------------- re-render


@dataclasses.dataclass(frozen=True)
class SyntheticSource:
    """A rendered synthetic data set, able to re-render any of its images with nuisances replaced."""

    root: Path
    spec: SyntheticFaceSpec
    identities: tuple[FaceIdentity, ...]
    index: Mapping[str, int]

    @classmethod
    def load(cls, root: str | Path) -> SyntheticSource:
        """Rebuild the spec and the identities of the data set in ``root`` (its ``spec.json``)."""
        root = Path(root)
        fields = json.loads((root / SPEC_FILE).read_text())
        version = fields.pop("renderer_version", None)
        if version != RENDERER_VERSION:
            raise ValueError(
                f"{root / SPEC_FILE}: rendered by renderer version {version}, this code renders "
                f"version {RENDERER_VERSION}; re-render the data set to re-render its images"
            )
        spec = SyntheticFaceSpec(**fields)
        identities = tuple(sample_identities(spec))
        return cls(root, spec, identities, {identity.name: i for i, identity in enumerate(identities)})

    def locate(self, path: str) -> tuple[int, int]:
        """(identity number, image number) of ``images/<identity>/<nnn>.png``."""
        relative = Path(path)
        name, image_index = relative.parent.name, int(relative.stem)
        if name not in self.index or not 0 <= image_index < self.spec.images_per_identity:
            raise ValueError(f"{path}: not an image of the synthetic data set in {self.root}")
        return self.index[name], image_index

    def _replay(self, path: str) -> tuple[FaceIdentity, ImageConditions, np.random.Generator]:
        index, image_index = self.locate(path)
        identity = self.identities[index]
        rng = np.random.default_rng([self.spec.seed, 1, index, image_index])
        return identity, sample_conditions(self.spec, identity.group, rng), rng

    def conditions(self, path: str) -> ImageConditions:
        """The nuisances image ``path`` was rendered with (all of them, also those metadata.csv rounds or omits)."""
        return self._replay(path)[1]

    def render(self, path: str, **overrides: Any) -> Image.Image:
        """Image ``path`` re-rendered with the :class:`ImageConditions` fields in ``overrides`` replaced (none:
        the file on disk, pixel for pixel). The noise draw is unchanged, so only the named nuisances differ."""
        if "occluder" in overrides:
            _accessory_counts(str(overrides["occluder"]))
        identity, conditions, rng = self._replay(path)
        conditions = dataclasses.replace(conditions, **overrides)
        return render_face(identity.parameters, conditions, self.spec.image_size, rng)

    def check_reproduces(self, path: str) -> None:
        """Raise unless re-rendering ``path`` gives the file on disk (else a mutation would change more than the
        nuisance it names, e.g. after a rendering change without a RENDERER_VERSION bump)."""
        with Image.open(self.root / path) as file:
            on_disk = np.asarray(file.convert("RGB"))
        if not np.array_equal(np.asarray(self.render(path)), on_disk):
            raise ValueError(
                f"{self.root / path}: re-rendering does not reproduce the file; the data set was rendered "
                "by other code, re-render it"
            )


def is_synthetic(root: str | Path) -> bool:
    """Whether ``root`` is a rendered synthetic data set (it holds ``spec.json``), so nuisances can be re-rendered."""
    return (Path(root) / SPEC_FILE).is_file()


# ------------------------------------------------------------------------------------------------- ID / OOD


@dataclasses.dataclass(frozen=True)
class TrainingRanges:
    """What the training split shows (DistroFair's learned distribution, Sec. 3.2): [min, max] of every
    continuous nuisance and of every accessory count, from the training images' metadata."""

    continuous: Mapping[str, tuple[float, float]]
    counts: Mapping[str, tuple[int, int]]

    @classmethod
    def from_frame(cls, frame: pd.DataFrame) -> TrainingRanges:
        continuous = {
            name: (float(frame[name].min()), float(frame[name].max()))
            for name in ("yaw", "roll", "scale", "illumination")
            if name in frame.columns and len(frame)
        }
        counts: dict[str, tuple[int, int]] = {}
        if "occluder" in frame.columns and len(frame):
            table = pd.DataFrame([_accessory_counts(str(v)) for v in frame["occluder"].unique()])
            counts = {column: (int(table[column].min()), int(table[column].max())) for column in table.columns}
        return cls(continuous, counts)

    def occluder_distribution(self, value: str) -> str:
        """ID when every accessory count of ``value`` lies in the training range, else OOD (Definition 1)."""
        counts = _accessory_counts(value)
        inside = all(low <= counts[key] <= high for key, (low, high) in self.counts.items())
        return ID if inside else OOD

    def as_dict(self) -> dict:
        out: dict[str, object] = {name: [low, high] for name, (low, high) in self.continuous.items()}
        if self.counts:
            out["occluders"] = {value: self.occluder_distribution(value) for value in occluder_configurations()}
        return out


@dataclasses.dataclass(frozen=True)
class Mutation:
    """One mutation of one image: ``name`` (of :data:`MUTATIONS`), its ``value`` (degrees, a factor, an
    occluder configuration, a window side), ``distribution`` (ID or OOD) and extra ``params`` (a crop offset)."""

    name: str
    value: float | str
    distribution: str
    params: tuple[float, ...] = ()

    @property
    def label(self) -> str:
        if isinstance(self.value, str):
            return f"{self.name}={self.value}"
        unit = "°" if self.name in ("yaw", "roll", "rotation") else ""
        return f"{self.name}={self.value:+.1f}{unit}" if unit else f"{self.name}={self.value:.2f}"


def settings_from(config: Mapping) -> dict[str, Any]:
    """:data:`DEFAULT_SETTINGS` with the keys of ``config`` that name them, checked."""
    settings = dict(DEFAULT_SETTINGS)
    for key in DEFAULT_SETTINGS:
        if key in config and config[key] is not None:
            settings[key] = config[key]
    for key in ("yaw_margin_deg", "roll_margin_deg", "scale_margin", "illumination_margin"):
        value = settings[key]
        if not isinstance(value, (int, float)) or not value > 0 or (key.endswith("margin") and value >= 1):
            allowed = "in (0, 1)" if key.endswith("margin") else "> 0"
            raise ValueError(f"ood.{key}={value!r} must be a number {allowed}")
    pairs = {
        "rotation_deg": lambda a, b: 0 < a < b <= 90,
        "zoom": lambda a, b: 1 < a < b <= 3,
        "crop": lambda a, b: 0.2 <= b < a < 1,
    }
    rules = {
        "rotation_deg": "0 < id_max < ood <= 90",
        "zoom": "1 < id_max < ood <= 3",
        "crop": "0.2 <= ood < id_min < 1",
    }
    for key, valid in pairs.items():
        try:
            first, second = (float(v) for v in settings[key])
        except (TypeError, ValueError):
            raise ValueError(f"ood.{key}={settings[key]!r} must be a pair [id, ood] with {rules[key]}") from None
        if not valid(first, second):
            raise ValueError(f"ood.{key}={settings[key]!r} must be a pair [id, ood] with {rules[key]}")
        settings[key] = (first, second)
    return settings


class MutationPlanner:
    """Draws, per image and mutation, one ID and one OOD value (fewer when no such value differs from the
    image's own), labelled from the training ranges (synthetic nuisances) or the configured magnitudes."""

    def __init__(self, ranges: TrainingRanges, settings: Mapping[str, Any]):
        self.ranges, self.settings = ranges, dict(settings)

    def draw(self, name: str, row: Mapping, rng: np.random.Generator) -> list[Mutation]:
        if name in ("yaw", "roll", "scale", "illumination"):
            return self._continuous(name, rng)
        if name == "occluders":
            return self._occluders(str(row.get("occluder", "none")), rng)
        return self._image(name, rng)

    def _continuous(self, name: str, rng: np.random.Generator) -> list[Mutation]:
        if name not in self.ranges.continuous:
            raise ValueError(f"ood: the training split records no {name!r} column, so {name} cannot be labelled")
        low, high = self.ranges.continuous[name]
        inside = float(rng.uniform(low, high))
        below_side = rng.uniform() < 0.5
        if name in ("yaw", "roll"):
            margin = float(self.settings[f"{name}_margin_deg"])
            outside = low - margin if below_side else high + margin
            if name == "yaw":
                outside = float(np.clip(outside, -MAX_YAW_DEG, MAX_YAW_DEG))
        else:
            margin = float(self.settings[f"{name}_margin"])
            outside = low * (1 - margin) if below_side else high * (1 + margin)
        mutations = [Mutation(name, inside, ID)]
        if not low <= outside <= high:
            mutations.append(Mutation(name, float(outside), OOD))
        return mutations

    def _occluders(self, own: str, rng: np.random.Generator) -> list[Mutation]:
        mutations = []
        for distribution in (ID, OOD):
            candidates = [
                value
                for value in occluder_configurations()
                if value != own and self.ranges.occluder_distribution(value) == distribution
            ]
            if candidates:
                mutations.append(Mutation("occluders", candidates[int(rng.integers(len(candidates)))], distribution))
        return mutations

    def _image(self, name: str, rng: np.random.Generator) -> list[Mutation]:
        sign = 1.0 if rng.uniform() < 0.5 else -1.0
        if name == "rotation":
            id_max, ood = self.settings["rotation_deg"]
            return [Mutation(name, float(rng.uniform(-id_max, id_max)), ID), Mutation(name, sign * ood, OOD)]
        if name == "zoom":
            id_max, ood = self.settings["zoom"]
            inside = math.exp(rng.uniform(-math.log(id_max), math.log(id_max)))
            return [Mutation(name, inside, ID), Mutation(name, ood if sign > 0 else 1.0 / ood, OOD)]
        if name == "crop":
            id_min, ood = self.settings["crop"]
            inside = float(rng.uniform(id_min, 1.0))
            return [
                Mutation(name, inside, ID, tuple(rng.uniform(0, 1, size=2))),
                Mutation(name, ood, OOD, tuple(rng.uniform(0, 1, size=2))),
            ]
        raise ValueError(f"ood.mutations: unknown mutation {name!r}; allowed: {list(MUTATIONS)}")


# ------------------------------------------------------------------------------------------------- applying


def transform_image(image: np.ndarray, mutation: Mutation) -> np.ndarray:
    """An image-space mutation (rotation, zoom, crop) of a uint8 [H, W, 3] image; same size out, uncovered
    pixels filled with the mean colour of the image's border."""
    height, width = image.shape[:2]
    border = np.concatenate([image[0], image[-1], image[:, 0], image[:, -1]])
    fill = tuple(int(v) for v in border.mean(axis=0).round())
    centre = np.array([width / 2.0, height / 2.0])
    if mutation.name == "crop":  # output (x, y) -> input offset + side * (x, y)
        side = float(mutation.value)
        offset = np.array(mutation.params) * (1.0 - side) * np.array([width, height])
        matrix, shift = np.eye(2) * side, offset
    else:
        angle = math.radians(float(mutation.value)) if mutation.name == "rotation" else 0.0
        zoom = float(mutation.value) if mutation.name == "zoom" else 1.0
        rotation = np.array([[math.cos(angle), -math.sin(angle)], [math.sin(angle), math.cos(angle)]])
        matrix = rotation / zoom
        shift = centre - matrix @ centre
    data = (matrix[0, 0], matrix[0, 1], shift[0], matrix[1, 0], matrix[1, 1], shift[1])
    out = Image.fromarray(np.ascontiguousarray(image)).transform(
        (width, height), Image.Transform.AFFINE, data, resample=Image.Resampling.BILINEAR, fillcolor=fill
    )
    return np.asarray(out, dtype=np.uint8)


def render_mutation(source: SyntheticSource, path: str, mutation: Mutation) -> Image.Image:
    """Image ``path`` of ``source`` re-rendered with a synthetic mutation's nuisance value."""
    field = "occluder" if mutation.name == "occluders" else mutation.name
    return source.render(path, **{field: mutation.value})
