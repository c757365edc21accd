"""The knobs of the synthetic face data set, validated, and the cache key derived from them."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math
from collections.abc import Sequence

import numpy as np

from fairnas.data.table import SPLITS

# Bump when rendering output changes for an unchanged spec, so cached data sets are rebuilt.
# 2: part masks (masks/<identity>/<nnn>.png and a ``mask`` column); images unchanged.
RENDERER_VERSION = 2
MIN_IMAGE_SIZE = 16
MAX_IMAGE_SIZE = 224


@dataclasses.dataclass(frozen=True)
class SyntheticFaceSpec:
    """Everything that determines a synthetic face data set; the same spec always renders the same bytes.

    Sizes: ``n_identities`` identities with ``images_per_identity`` square RGB images of ``image_size`` pixels.
    Protected attribute: ``n_groups`` groups ``g0 .. g{K-1}`` with group-dependent skin tone, hair colour and
    iris colour distributions.
    Splits: ``split_fractions`` = (train, val, test) shares of identities; val and test hold the same number of
    identities from every group, the rest goes to train.
    Bias knobs (see the package docstring): ``train_group_share`` (share of each group among training
    identities; ``None`` = balanced), ``hard_group`` and ``difficulty`` in [0, 1] (0 = no effect).
    Per-image nuisances: yaw and roll in degrees (uniform in +-max), ``scale_range``, illumination gain
    (``illumination_range``) and a linear light gradient up to ``max_light_gradient``, Gaussian noise sigma
    (``noise_range``, in units of the full intensity range), and an occluder: glasses with probability
    ``glasses_prob``, a hat with probability ``hat_prob``.
    """

    n_identities: int = 160
    images_per_identity: int = 10
    image_size: int = 64
    n_groups: int = 2
    split_fractions: tuple[float, float, float] = (0.6, 0.2, 0.2)
    train_group_share: tuple[float, ...] | None = None
    hard_group: int = 1
    difficulty: float = 0.0
    max_yaw_deg: float = 25.0
    max_roll_deg: float = 12.0
    scale_range: tuple[float, float] = (0.85, 1.1)
    illumination_range: tuple[float, float] = (0.65, 1.25)
    max_light_gradient: float = 0.35
    noise_range: tuple[float, float] = (0.005, 0.03)
    glasses_prob: float = 0.1
    hat_prob: float = 0.1
    seed: int = 0

    def __post_init__(self) -> None:
        # Hydra hands lists (ListConfig) and ints for floats; normalise so equal specs share one cache key.
        for name in ("split_fractions", "scale_range", "illumination_range", "noise_range", "train_group_share"):
            value = getattr(self, name)
            if value is not None:
                object.__setattr__(self, name, _float_tuple(name, value))
        for name in ("difficulty", "max_yaw_deg", "max_roll_deg", "max_light_gradient", "glasses_prob", "hat_prob"):
            object.__setattr__(self, name, _float(name, getattr(self, name)))
        _validate(self)

    @property
    def group_names(self) -> tuple[str, ...]:
        """Protected-attribute values written to the ``group`` column, in group order."""
        return tuple(f"g{k}" for k in range(self.n_groups))

    @property
    def train_shares(self) -> tuple[float, ...]:
        """``train_group_share`` with ``None`` resolved to a balanced share."""
        if self.train_group_share is None:
            return (1.0 / self.n_groups,) * self.n_groups
        return self.train_group_share

    def identities_per_split(self) -> dict[str, list[int]]:
        """Identities per split and group: val/test balanced across groups, train divided by ``train_shares``."""
        counts: dict[str, list[int]] = {}
        for split, fraction in zip(SPLITS[1:], self.split_fractions[1:], strict=True):
            per_group = round(self.n_identities * fraction / self.n_groups)
            if fraction > 0 and per_group == 0:
                raise ValueError(
                    f"SyntheticFaceSpec.n_identities={self.n_identities} is too small: split_fractions "
                    f"{self.split_fractions} leave no {split} identity per group"
                )
            counts[split] = [per_group] * self.n_groups
        n_train = self.n_identities - sum(counts["val"]) - sum(counts["test"])
        if n_train < 1:
            raise ValueError(f"SyntheticFaceSpec.split_fractions {self.split_fractions} leave no training identity")
        return {"train": _largest_remainder(n_train, self.train_shares), **counts}

    def cache_key(self) -> str:
        """Short hash of every field and the renderer version: the data set's directory name."""
        payload = json.dumps({"renderer": RENDERER_VERSION, **dataclasses.asdict(self)}, sort_keys=True)
        return hashlib.sha256(payload.encode()).hexdigest()[:12]


def _float_tuple(name: str, value: Sequence[float]) -> tuple[float, ...]:
    try:
        return tuple(float(v) for v in value)
    except (TypeError, ValueError):
        raise ValueError(f"SyntheticFaceSpec.{name} must be a sequence of numbers, got {value!r}") from None


def _float(name: str, value: float) -> float:
    try:
        return float(value)
    except (TypeError, ValueError):
        raise ValueError(f"SyntheticFaceSpec.{name} must be a number, got {value!r}") from None


def _largest_remainder(total: int, shares: tuple[float, ...]) -> list[int]:
    """Integer counts summing to ``total`` that follow ``shares`` (Hamilton apportionment, ties to lower index)."""
    exact = np.asarray(shares) * total
    counts = np.floor(exact).astype(int)
    order = np.argsort(-(exact - counts), kind="stable")
    counts[order[: total - counts.sum()]] += 1
    return counts.tolist()


def _fail(name: str, allowed: str, value: object) -> None:
    raise ValueError(f"SyntheticFaceSpec.{name} must be {allowed}, got {value!r}")


def _check_int(spec: SyntheticFaceSpec, name: str, minimum: int, maximum: int | None = None) -> None:
    value = getattr(spec, name)
    in_range = isinstance(value, int) and value >= minimum and (maximum is None or value <= maximum)
    if not in_range:
        allowed = f"an integer >= {minimum}" if maximum is None else f"an integer in [{minimum}, {maximum}]"
        _fail(name, allowed, value)


def _check_unit(spec: SyntheticFaceSpec, name: str) -> None:
    value = getattr(spec, name)
    if not 0.0 <= value <= 1.0:
        _fail(name, "in [0, 1]", value)


def _check_range(spec: SyntheticFaceSpec, name: str, low: float, high: float) -> None:
    value = getattr(spec, name)
    if len(value) != 2 or not low <= value[0] <= value[1] <= high:
        _fail(name, f"a pair (low, high) with {low} <= low <= high <= {high}", value)


def _check_shares(name: str, shares: tuple[float, ...], length: int) -> None:
    if len(shares) != length or min(shares) < 0 or not math.isclose(sum(shares), 1.0, abs_tol=1e-6):
        _fail(name, f"{length} non-negative numbers summing to 1", shares)


def _validate(spec: SyntheticFaceSpec) -> None:
    _check_int(spec, "n_groups", 2)
    _check_int(spec, "n_identities", 2 * spec.n_groups)
    _check_int(spec, "images_per_identity", 2)
    _check_int(spec, "image_size", MIN_IMAGE_SIZE, MAX_IMAGE_SIZE)
    _check_int(spec, "hard_group", 0, spec.n_groups - 1)
    _check_int(spec, "seed", 0)
    _check_shares("split_fractions", spec.split_fractions, 3)
    if spec.split_fractions[0] <= 0:
        _fail("split_fractions", "a triple whose train fraction is > 0", spec.split_fractions)
    if spec.train_group_share is not None:
        _check_shares("train_group_share", spec.train_group_share, spec.n_groups)
    _check_unit(spec, "difficulty")
    _check_unit(spec, "max_light_gradient")
    _check_unit(spec, "glasses_prob")
    _check_unit(spec, "hat_prob")
    if spec.glasses_prob + spec.hat_prob > 1.0:
        _fail("hat_prob", f"at most 1 - glasses_prob = {1.0 - spec.glasses_prob}", spec.hat_prob)
    if not 0.0 <= spec.max_yaw_deg <= 60.0:
        _fail("max_yaw_deg", "in [0, 60]", spec.max_yaw_deg)
    if not 0.0 <= spec.max_roll_deg <= 45.0:
        _fail("max_roll_deg", "in [0, 45]", spec.max_roll_deg)
    _check_range(spec, "scale_range", 0.5, 1.5)
    _check_range(spec, "illumination_range", 0.1, 2.0)
    _check_range(spec, "noise_range", 0.0, 0.5)
    spec.identities_per_split()
