"""The table every data set becomes, and the paper's subset rules.

Every data set, real or synthetic, ends up as a :class:`FaceTable`: an image root plus one row per image with
columns ``path`` (relative to the root), ``identity``, ``split`` (train/val/test), the protected attribute and any
extra attributes. Training and evaluation only ever read this table, so a new format is a function returning one
(:mod:`fairnas.data.formats`; the generic format, ``metadata.csv``, is :mod:`fairnas.data.formats.generic`).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

REQUIRED_COLUMNS = ("path", "identity", "split")
SPLITS = ("train", "val", "test")


@dataclass(frozen=True)
class FaceTable:
    """Images of a face data set: ``frame`` rows point to files under ``root``."""

    root: Path
    frame: pd.DataFrame
    attribute: str

    def split(self, name: str) -> pd.DataFrame:
        return self.frame[self.frame["split"] == name].reset_index(drop=True)


def check_identity_disjoint(frame: pd.DataFrame, source: str) -> None:
    """Open-set evaluation (thesis Sec. 4.3.4): no identity may appear in two splits."""
    splits_per_identity = frame.groupby("identity")["split"].nunique()
    shared = splits_per_identity[splits_per_identity > 1]
    if len(shared):
        raise ValueError(
            f"{source}: splits must be identity-disjoint, but {len(shared)} identities appear in several "
            f"splits (e.g. {shared.index[0]!r})"
        )


def apply_subset_rules(
    frame: pd.DataFrame,
    attribute: str,
    *,
    min_images: int = 3,
    balance_identities: bool = False,
    max_images_per_group: int | None = None,
    seed: int = 0,
) -> pd.DataFrame:
    """The paper's data subset rules, applied within one split.

    Keeps identities with at least ``min_images`` images, optionally samples the same number of identities from
    every group (the size of the smallest), and optionally caps the number of images per group.
    """
    if min_images < 1:
        raise ValueError(f"data.min_images={min_images} must be >= 1")
    rng = np.random.default_rng(seed)
    counts = frame.groupby("identity")["path"].transform("size")
    frame = frame[counts >= min_images]
    if balance_identities and len(frame):
        ids_per_group = frame.groupby(attribute)["identity"].unique()
        n_keep = min(len(ids) for ids in ids_per_group)
        keep = np.concatenate([rng.choice(sorted(ids), size=n_keep, replace=False) for ids in ids_per_group])
        frame = frame[frame["identity"].isin(keep)]
    if max_images_per_group is not None and len(frame):
        kept = [_cap_whole_identities(rows, max_images_per_group, rng) for _, rows in frame.groupby(attribute)]
        frame = frame[frame["identity"].isin(set().union(*kept))]
    return frame.reset_index(drop=True)


def _cap_whole_identities(rows: pd.DataFrame, cap: int, rng: np.random.Generator) -> set[str]:
    """Identities to keep, whole and in random order, while the group stays within ``cap`` images."""
    sizes = rows.groupby("identity").size()
    order = rng.permutation(sorted(sizes.index))
    kept, total = [], 0
    for identity in order:
        if total + sizes[identity] > cap:
            continue
        kept.append(identity)
        total += sizes[identity]
    return set(kept)
