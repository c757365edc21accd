"""Identity-disjoint train/val/test splits, generated from a seed or read from a split file.

Open-set evaluation (thesis Sec. 4.3.4) needs splits that share no identity. A generated split shuffles each
protected group's identities with the seed and cuts them by ``fractions``, so every group is represented in every
split in the same proportions. A split file is a CSV with columns ``identity, split``; generated splits are saved in
that format (``save_to``), so a run's split can be handed to a later run as ``data.table.split.file``.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pandas as pd

from fairnas.data.formats.common import log_skips
from fairnas.data.table import SPLITS
from fairnas.io import write_text_atomic

SPLIT_FILE_COLUMNS = ("identity", "split")


@dataclasses.dataclass(frozen=True)
class SplitSpec:
    """How a format assigns identities to splits (the ``data.table.split`` config node, built by Hydra).

    ``file``: read the split from this CSV (``identity, split``) instead of generating one. ``fractions``:
    (train, val, test) shares of each group's identities. ``seed``: the shuffle. ``save_to``: where a generated
    split is written (``null``: not written).
    """

    file: str | None = None
    fractions: tuple[float, float, float] = (0.8, 0.1, 0.1)
    seed: int = 0
    save_to: str | None = None

    def __post_init__(self) -> None:
        fractions = tuple(float(f) for f in self.fractions)  # a config gives a list
        object.__setattr__(self, "fractions", fractions)
        if len(fractions) != 3 or min(fractions) < 0 or not math.isclose(sum(fractions), 1.0, abs_tol=1e-6):
            raise ValueError(
                f"data.table.split.fractions={list(fractions)} must be three non-negative (train, val, test) "
                "shares summing to 1"
            )


def stratified_identity_split(
    identity_groups: pd.Series, fractions: Sequence[float], seed: int, dataset: str
) -> pd.Series:
    """identity -> split: each group's identities, sorted then shuffled with ``seed``, cut by ``fractions``.

    ``identity_groups`` maps identity (index) to its protected group. A split with a positive fraction that would
    receive no identity of some group is an error, since that group could not be evaluated there.
    """
    rng = np.random.default_rng(seed)
    cumulative = np.cumsum(fractions)
    parts = []
    for group, members in identity_groups.groupby(identity_groups, sort=True):
        identities = rng.permutation(np.sort(members.index.to_numpy()))
        bounds = np.round(cumulative * len(identities)).astype(int)
        bounds[-1] = len(identities)
        counts = np.diff(bounds, prepend=0)
        for split, fraction, count in zip(SPLITS, fractions, counts, strict=True):
            if fraction > 0 and count == 0:
                raise ValueError(
                    f"{dataset}: group {group!r} has {len(identities)} identities; data.table.split.fractions="
                    f"{list(fractions)} leave it none in the {split} split"
                )
        parts.append(pd.Series(np.repeat(SPLITS, counts), index=identities))
    return pd.concat(parts).rename("split").rename_axis("identity")


def read_split_file(path: str | Path, dataset: str) -> pd.Series:
    """identity -> split from a split file (CSV with columns ``identity, split``)."""
    path = Path(path).expanduser()
    if not path.is_file():
        raise FileNotFoundError(f"data.table.split.file: split file '{path}' does not exist")
    frame = pd.read_csv(path, dtype=str)
    missing = [column for column in SPLIT_FILE_COLUMNS if column not in frame.columns]
    if missing:
        raise ValueError(f"{path}: missing column(s) {missing}; a split file has columns {list(SPLIT_FILE_COLUMNS)}")
    unknown = sorted(set(frame["split"]) - set(SPLITS))
    if unknown:
        raise ValueError(f"{path}: column 'split' has values {unknown}; allowed: {list(SPLITS)}")
    repeated = frame["identity"][frame["identity"].duplicated()]
    if len(repeated):
        raise ValueError(f"{path}: identity {repeated.iloc[0]!r} appears more than once")
    return frame.set_index("identity")["split"]


def write_split_file(path: str | Path, splits: pd.Series) -> None:
    """Write identity -> split as a split file, sorted by identity."""
    frame = splits.rename("split").rename_axis("identity").sort_index().reset_index()
    write_text_atomic(Path(path).expanduser(), frame.to_csv(index=False))


def identity_splits(
    identity_groups: pd.Series, spec: SplitSpec, dataset: str, fixed: pd.Series | None = None
) -> pd.Series:
    """identity -> split following ``spec``: read from ``spec.file``, or generated over the identities that
    ``fixed`` (identity -> split given by the layout, e.g. VGGFace2's test folder) does not already place.
    A generated split, ``fixed`` included, is saved to ``spec.save_to`` when set."""
    if spec.file is not None:
        return read_split_file(spec.file, dataset)
    fixed = fixed if fixed is not None else pd.Series(dtype=str)
    free = identity_groups.drop(fixed.index, errors="ignore")
    splits = pd.concat([stratified_identity_split(free, spec.fractions, spec.seed, dataset), fixed])
    if spec.save_to is not None:
        write_split_file(spec.save_to, splits)
    return splits


def apply_identity_splits(frame: pd.DataFrame, splits: pd.Series, dataset: str) -> pd.DataFrame:
    """``frame`` with a ``split`` column from identity -> split; identities the split omits are skipped."""
    split = frame["identity"].map(splits)
    unassigned = split.isna()
    log_skips(
        dataset,
        {
            f"images of {frame.loc[unassigned, 'identity'].nunique()} identities missing from the split file": int(
                unassigned.sum()
            ),
        },
    )
    return frame.assign(split=split)[~unassigned].reset_index(drop=True)
