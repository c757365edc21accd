"""CelebA (Liu et al., 2015) as released: aligned images, identities, 40 binary attributes, evaluation partition.

Layout of ``root``::

    img_align_celeba/000001.jpg ...
    identity_CelebA.txt        "<image> <identity>" per line
    list_attr_celeba.txt       image count, then the 40 attribute names, then "<image> <40 values of -1/1>"
    list_eval_partition.txt    "<image> <0|1|2>" (train/val/test), read with official_partition=true
    list_landmarks_align_celeba.txt   optional: image count, header, "<image> <10 coordinates>" (five landmarks)

The protected attribute (``Male`` by default, as in the thesis Sec. 4.3) must be one group per identity, but CelebA
labels attributes per image; an identity gets the majority value of its images (identities with a tied vote are
skipped). Attribute values become ``"1"`` (attribute present) and ``"0"``; the other 39 attributes stay per-image
metadata columns with values 1/0. The five landmarks of the aligned images, when their file is there, become the
columns :data:`fairnas.data.masks.LANDMARK_COLUMNS` (the Attention-IoU audit derives soft region masks from them).
Splits are identity-disjoint (:mod:`fairnas.data.formats.splits`).
"""

from __future__ import annotations

import logging
from pathlib import Path

import pandas as pd

from fairnas.data.formats.common import (
    DataFormat,
    drop_unreadable,
    face_table,
    log_skips,
    register,
    require_dir,
    require_file,
)
from fairnas.data.formats.splits import SplitSpec, apply_identity_splits, identity_splits
from fairnas.data.masks import LANDMARK_COLUMNS
from fairnas.data.table import SPLITS, FaceTable

log = logging.getLogger(__name__)

DATASET = "celeba"
IMAGE_DIR = "img_align_celeba"
IDENTITY_FILE = "identity_CelebA.txt"
ATTRIBUTE_FILE = "list_attr_celeba.txt"
PARTITION_FILE = "list_eval_partition.txt"
LANDMARK_FILE = "list_landmarks_align_celeba.txt"


def read_celeba(
    root: str | Path,
    attribute: str = "Male",
    split: SplitSpec = SplitSpec(),
    official_partition: bool = False,
    verify_images: bool = False,
) -> FaceTable:
    """Read CelebA from ``root`` with ``attribute`` as the protected attribute.

    Args:
        root: the folder holding ``img_align_celeba/`` and the three text files.
        attribute: any of the 40 attribute names of ``list_attr_celeba.txt``.
        split: the :class:`~fairnas.data.formats.splits.SplitSpec` of ``data.table.split``: a split file, or
            the fractions and seed of a generated identity-disjoint split and where to save it.
        official_partition: use ``list_eval_partition.txt`` instead (it must be identity-disjoint).
        verify_images: decode every image once and skip those that fail (slow).
    """
    root = require_dir(root, "data.root")
    identities = pd.read_csv(
        require_file(root / IDENTITY_FILE, DATASET), sep=r"\s+", header=None, names=["image", "identity"], dtype=str
    )
    attributes = _read_attributes(require_file(root / ATTRIBUTE_FILE, DATASET))
    if attribute not in attributes.columns:
        raise ValueError(
            f"data.table.attribute={attribute!r} is not a CelebA attribute; allowed: {list(attributes.columns)}"
        )

    labelled = identities["image"].isin(attributes.index)
    log_skips(DATASET, {f"images missing from {ATTRIBUTE_FILE}": int((~labelled).sum())})
    frame = identities[labelled].join(attributes, on="image")
    if (root / LANDMARK_FILE).is_file():
        frame = frame.join(_read_landmarks(root / LANDMARK_FILE), on="image")
    frame.insert(0, "path", IMAGE_DIR + "/" + frame["image"])
    frame = drop_unreadable(root, frame, verify_images, DATASET)
    frame = _identity_majority(frame, attribute)

    if official_partition:
        if split.file is not None:
            raise ValueError("data.table: set either official_partition=true or split.file, not both")
        partition = _read_partition(require_file(root / PARTITION_FILE, DATASET))
        frame = frame.assign(split=frame["image"].map(partition))
        log_skips(DATASET, {f"images missing from {PARTITION_FILE}": int(frame["split"].isna().sum())})
        frame = frame.dropna(subset=["split"])
    else:
        groups = frame.groupby("identity")[attribute].first()
        frame = apply_identity_splits(frame, identity_splits(groups, split, DATASET), DATASET)
    return face_table(root, frame.drop(columns="image"), attribute, DATASET)


def _read_attributes(path: Path) -> pd.DataFrame:
    """image -> 40 attribute columns of 1/0 (the file has -1/1)."""
    # Line 1 is the image count; line 2 names the 40 attributes, one field fewer than the rows, so pandas
    # makes the image name the index.
    attributes = pd.read_csv(path, sep=r"\s+", skiprows=1, header=0)
    if attributes.empty or not attributes.isin([-1, 1]).all().all():
        raise ValueError(
            f"{path}: expected the image count, a line of attribute names, then one line of -1/1 values per image"
        )
    return (attributes > 0).astype(int)


def _read_landmarks(path: Path) -> pd.DataFrame:
    """image -> the ten landmark coordinates (pixels of the aligned 178 x 218 image) as LANDMARK_COLUMNS."""
    landmarks = pd.read_csv(path, sep=r"\s+", skiprows=1, header=0)
    if landmarks.shape[1] != len(LANDMARK_COLUMNS):
        raise ValueError(
            f"{path}: expected the image count, a header of {len(LANDMARK_COLUMNS)} coordinate names, "
            "then '<image> <10 coordinates>' per line"
        )
    landmarks.columns = list(LANDMARK_COLUMNS)
    return landmarks


def _read_partition(path: Path) -> pd.Series:
    partition = pd.read_csv(path, sep=r"\s+", header=None, names=["image", "code"], dtype={"image": str})
    unknown = sorted(set(partition["code"]) - {0, 1, 2})
    if unknown:
        raise ValueError(f"{path}: partition codes {unknown}; allowed: 0 (train), 1 (val), 2 (test)")
    return partition.set_index("image")["code"].map(dict(enumerate(SPLITS)))


def _identity_majority(frame: pd.DataFrame, attribute: str) -> pd.DataFrame:
    """Replace the per-image ``attribute`` by its identity's majority value ("1"/"0"); skip tied identities."""
    share = frame.groupby("identity")[attribute].mean()
    inconsistent = int(((share > 0) & (share < 1)).sum())
    if inconsistent:
        log.info(
            "%s: %d identities have mixed '%s' labels across their images; each gets its majority value",
            DATASET,
            inconsistent,
            attribute,
        )
    tied = share.index[share == 0.5]
    keep = ~frame["identity"].isin(tied)
    log_skips(DATASET, {f"images of {len(tied)} identities with a tied '{attribute}' vote": int((~keep).sum())})
    frame = frame[keep]
    return frame.assign(**{attribute: frame["identity"].map(share > 0.5).map({True: "1", False: "0"})})


register(DataFormat(DATASET, "CelebA", read_celeba))
