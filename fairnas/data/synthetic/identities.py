"""Identities of the synthetic face set: group and split allocation, and group-dependent facial parameters."""

from __future__ import annotations

import dataclasses

import numpy as np

from fairnas.data.synthetic.spec import SyntheticFaceSpec

# difficulty = 1 shrinks the hard group's between-identity spread (around its group mean) to this fraction.
HARD_GROUP_MIN_SPREAD = 0.1


@dataclasses.dataclass(frozen=True)
class FaceParameter:
    """One identity-level facial parameter, drawn in unit space and mapped linearly onto [low, high].

    ``group_shift`` moves the group means apart: group k of K is centred at 0.5 + group_shift * (2k/(K-1) - 1)
    in unit space, with half-width 0.5 - group_shift, so group ranges overlap but their means differ.
    Lengths are fractions of the image side; angles are radians; ``*_tone``/``*_colour`` index a palette.
    """

    name: str
    low: float
    high: float
    group_shift: float = 0.0


FACE_PARAMETERS: tuple[FaceParameter, ...] = (
    FaceParameter("face_width", 0.25, 0.33),
    FaceParameter("face_height", 0.31, 0.40),
    FaceParameter("jaw", 0.55, 1.0),
    FaceParameter("skin_tone", 0.0, 1.0, group_shift=0.2),
    FaceParameter("skin_warmth", 0.0, 1.0),
    FaceParameter("eye_spacing", 0.075, 0.11),
    FaceParameter("eye_level", -0.06, 0.0),
    FaceParameter("eye_width", 0.042, 0.066),
    FaceParameter("eye_openness", 0.35, 0.7),
    FaceParameter("iris_colour", 0.0, 1.0, group_shift=0.1),
    FaceParameter("brow_thickness", 0.008, 0.022),
    FaceParameter("brow_slope", -0.25, 0.35),
    FaceParameter("brow_gap", 0.03, 0.055),
    FaceParameter("nose_length", 0.07, 0.13),
    FaceParameter("nose_width", 0.022, 0.05),
    FaceParameter("mouth_gap", 0.035, 0.06),
    FaceParameter("mouth_width", 0.045, 0.09),
    FaceParameter("lip_thickness", 0.008, 0.022),
    FaceParameter("mouth_curve", -0.012, 0.022),
    FaceParameter("hair_style", 0.0, 6.0),
    FaceParameter("hair_colour", 0.0, 1.0, group_shift=0.15),
    FaceParameter("hairline", 0.45, 0.75),
    FaceParameter("ear_size", 0.035, 0.06),
)


@dataclasses.dataclass(frozen=True)
class FaceIdentity:
    """One synthetic person: name, group index, split and physical facial parameters (see FACE_PARAMETERS)."""

    name: str
    group: int
    split: str
    parameters: dict[str, float]


def _group_centres(spec: SyntheticFaceSpec) -> np.ndarray:
    """Unit-space mean of every parameter per group, shape [n_groups, n_parameters]."""
    positions = np.linspace(-1.0, 1.0, spec.n_groups)[:, None]
    shifts = np.array([p.group_shift for p in FACE_PARAMETERS])[None, :]
    return 0.5 + shifts * positions


def identity_spread(spec: SyntheticFaceSpec, group: int) -> float:
    """Factor on a group's between-identity spread: 1, or ``1 - (1 - HARD_GROUP_MIN_SPREAD) * difficulty``."""
    if group != spec.hard_group:
        return 1.0
    return 1.0 - (1.0 - HARD_GROUP_MIN_SPREAD) * spec.difficulty


def sample_identities(spec: SyntheticFaceSpec) -> list[FaceIdentity]:
    """Draw every identity of ``spec``: group/split allocation (names in random order) and facial parameters.

    Parameters are uniform in unit space around the group centre; the hard group's spread shrinks with
    ``difficulty`` (identities look more alike), which is what makes that group harder to identify.
    """
    rng = np.random.default_rng([spec.seed, 0])
    slots = [
        (group, split)
        for split, per_group in spec.identities_per_split().items()
        for group, count in enumerate(per_group)
        for _ in range(count)
    ]
    slots = [slots[i] for i in rng.permutation(len(slots))]
    groups = np.array([group for group, _ in slots])
    half_widths = 0.5 - np.array([p.group_shift for p in FACE_PARAMETERS])
    spreads = np.array([identity_spread(spec, g) for g in range(spec.n_groups)])
    offsets = rng.uniform(-1.0, 1.0, size=(len(slots), len(FACE_PARAMETERS)))
    unit = _group_centres(spec)[groups] + spreads[groups, None] * half_widths * offsets
    lows = np.array([p.low for p in FACE_PARAMETERS])
    highs = np.array([p.high for p in FACE_PARAMETERS])
    physical = lows + unit * (highs - lows)
    names = [p.name for p in FACE_PARAMETERS]
    return [
        FaceIdentity(f"id_{index:04d}", group, split, dict(zip(names, row.tolist(), strict=True)))
        for index, ((group, split), row) in enumerate(zip(slots, physical, strict=True))
    ]
