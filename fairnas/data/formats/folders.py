"""A folder per identity plus an attribute CSV: the layout most private face collections come in.

Layout of ``root``::

    <images>/<identity>/<image>      images: "." (default) puts the identity folders directly in root
    attributes.csv                   identity, <protected attribute>, optional further columns (one row per identity)

Further attribute columns are kept as metadata. Identities without a row in the CSV are skipped and counted;
splits are identity-disjoint (:mod:`fairnas.data.formats.splits`).
"""

from __future__ import annotations

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
    scan_identity_folders,
)
from fairnas.data.formats.splits import SplitSpec, apply_identity_splits, identity_splits
from fairnas.data.table import FaceTable

DATASET = "folders"


def read_folders(
    root: str | Path,
    attribute: str = "group",
    attributes: str = "attributes.csv",
    images: str = ".",
    split: SplitSpec = SplitSpec(),
    verify_images: bool = False,
) -> FaceTable:
    """Read identity folders under ``root/<images>`` with per-identity attributes from ``root/<attributes>``."""
    root = require_dir(root, "data.root")
    csv_path = require_file(root / attributes, DATASET)
    table = pd.read_csv(csv_path, dtype=str)
    missing = [column for column in ("identity", attribute) if column not in table.columns]
    if missing:
        raise ValueError(
            f"{csv_path}: missing column(s) {missing}; needs 'identity' and the protected attribute "
            "(data.table.attribute)"
        )
    repeated = table["identity"][table["identity"].duplicated()]
    if len(repeated):
        raise ValueError(f"{csv_path}: identity {repeated.iloc[0]!r} has more than one row")
    if "split" in table.columns or "path" in table.columns:
        raise ValueError(f"{csv_path}: columns 'path' and 'split' are reserved; splits come from data.table.split")
    table = table.set_index("identity")

    frame = scan_identity_folders(root, images, DATASET)
    known = frame["identity"].isin(table.index[table[attribute].notna()])
    log_skips(
        DATASET,
        {
            f"images of {frame.loc[~known, 'identity'].nunique()} identities without a '{attribute}' value in "
            f"{attributes}": int((~known).sum()),
        },
    )
    frame = drop_unreadable(root, frame[known].join(table, on="identity"), verify_images, DATASET)
    groups = frame.groupby("identity")[attribute].first()
    frame = apply_identity_splits(frame, identity_splits(groups, split, DATASET), DATASET)
    return face_table(root, frame, attribute, DATASET)


register(DataFormat(DATASET, "folder per identity", read_folders))
