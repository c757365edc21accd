"""Racial Faces in-the-Wild (RFW; Wang et al., 2019): four race subsets, race as the protected attribute.

Layout of ``root`` (RFW's ``test/`` folder)::

    data/<race>/<identity>/<identity>_0001.jpg ...    race: African, Asian, Caucasian, Indian
    txts/<race>/<race>_pairs.txt                      LFW-style pairs, 10 folds of 300 matched + 300 mismatched

:func:`read_rfw` gives the images as a face-identification data set (four groups; identity-disjoint splits from
``data.table.split``, e.g. for training or identification metrics), :func:`read_rfw_benchmark` the verification
protocol over the same images (thesis Sec. 4.5.6, Table 4.8).
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from fairnas.data.formats.common import (
    DataFormat,
    drop_unreadable,
    face_table,
    register,
    require_dir,
    scan_identity_folders,
)
from fairnas.data.formats.splits import SplitSpec, apply_identity_splits, identity_splits
from fairnas.data.formats.verification import VerificationBenchmark, index_pairs, pair_paths, parse_pairs_file
from fairnas.data.table import FaceTable

DATASET = "rfw"
RACES = ("African", "Asian", "Caucasian", "Indian")
ATTRIBUTE = "race"
IMAGE_DIR = "data"
PAIRS_DIR = "txts"


def read_rfw(root: str | Path, split: SplitSpec = SplitSpec(), verify_images: bool = False) -> FaceTable:
    """All RFW images with their race (column ``race``), split identity-disjointly by ``split``."""
    root = require_dir(root, "data.root")
    frame = _rfw_images(root, verify_images)
    groups = frame.groupby("identity")[ATTRIBUTE].first()
    frame = apply_identity_splits(frame, identity_splits(groups, split, DATASET), DATASET)
    return face_table(root, frame, ATTRIBUTE, DATASET, expected_groups=RACES)


def read_rfw_benchmark(root: str | Path, verify_images: bool = False) -> VerificationBenchmark:
    """RFW's verification protocol: every race's pairs (group = race) over all RFW images."""
    root = require_dir(root, f"{DATASET} benchmark root")
    images = _rfw_images(root, verify_images)
    pairs = []
    for race in RACES:
        listed = parse_pairs_file(root / PAIRS_DIR / race / f"{race}_pairs.txt")
        left, right = pair_paths(listed, f"{IMAGE_DIR}/{race}")
        pairs.append(listed[["same", "fold"]].assign(left=left, right=right, group=race))
    listed = pd.concat(pairs, ignore_index=True)
    return VerificationBenchmark(
        DATASET,
        root,
        images,
        index_pairs(DATASET, images, listed["left"], listed["right"], listed["same"], listed["fold"], listed["group"]),
        attribute=ATTRIBUTE,
    )


def _rfw_images(root: Path, verify_images: bool) -> pd.DataFrame:
    """Columns ``path``, ``identity``, ``race`` for ``data/<race>/<identity>/*``; every race folder must exist."""
    frames = [scan_identity_folders(root, f"{IMAGE_DIR}/{race}", DATASET).assign(**{ATTRIBUTE: race}) for race in RACES]
    frame = pd.concat(frames, ignore_index=True)
    return drop_unreadable(root, frame, verify_images, DATASET)


register(DataFormat(DATASET, "RFW", read_rfw))
