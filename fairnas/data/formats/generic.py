"""The generic on-disk format: any data set already converted to an image folder with ``metadata.csv``.

Layout of ``root``::

    metadata.csv      path, identity, split (train/val/test, identity-disjoint), <protected attribute>, extras
    <path>            image files (any format PIL reads), relative to root
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from fairnas.data.formats.common import DataFormat, register
from fairnas.data.table import REQUIRED_COLUMNS, SPLITS, FaceTable, check_identity_disjoint


def read_generic(root: str | Path, metadata: str = "metadata.csv", attribute: str = "group") -> FaceTable:
    """Read an image folder with a metadata CSV: columns ``path``, ``identity``, ``split``, ``<attribute>``, extras."""
    root = Path(root).expanduser()
    if not root.is_dir():
        raise FileNotFoundError(f"data.root: dataset directory '{root}' does not exist")
    csv_path = root / metadata
    if not csv_path.is_file():
        raise FileNotFoundError(f"data: metadata file '{csv_path}' does not exist")
    frame = pd.read_csv(csv_path, dtype={"identity": str, "path": str, "split": str})
    missing = [c for c in (*REQUIRED_COLUMNS, attribute) if c not in frame.columns]
    if missing:
        raise ValueError(
            f"{csv_path}: missing required column(s) {missing}; "
            f"required: {[*REQUIRED_COLUMNS, attribute]} (the protected attribute is set by data.table.attribute)"
        )
    unknown = sorted(set(frame["split"]) - set(SPLITS))
    if unknown:
        raise ValueError(f"{csv_path}: column 'split' has values {unknown}; allowed: {list(SPLITS)}")
    repeated = frame["path"][frame["path"].duplicated()].unique()
    if len(repeated):
        raise ValueError(
            f"{csv_path}: column 'path' lists {len(repeated)} image(s) more than once (e.g. "
            f"{repeated[0]!r}); each image must appear in one row"
        )
    frame[attribute] = frame[attribute].astype(str)
    check_identity_disjoint(frame, source=str(csv_path))
    return FaceTable(root=root, frame=frame, attribute=attribute)


register(DataFormat("generic", "generic", read_generic))
