"""VGGFace2 (Cao et al., 2018) as released: identity folders under ``train/`` and ``test/`` and identity metadata.

Layout of ``root``::

    train/n000002/0001_01.jpg ...
    test/n000001/0001_01.jpg ...
    identity_meta.csv          Class_ID, Name, Sample_Num, Flag, Gender   (Gender: m / f)

The protected attribute is a column of ``identity_meta.csv`` (``Gender`` by default, thesis Sec. 4.3). The
identities of ``test/`` form the test split; validation identities are carved out of ``train/`` by the
``data.table.split`` fractions (the test share applies to ``train/`` identities too, normally 0).
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

DATASET = "vggface2"
META_FILE = "identity_meta.csv"
FOLDERS = ("train", "test")


def read_vggface2(
    root: str | Path,
    attribute: str = "Gender",
    split: SplitSpec = SplitSpec(),
    verify_images: bool = False,
) -> FaceTable:
    """Read VGGFace2 from ``root`` (see the module docstring); identities missing from the metadata are skipped."""
    root = require_dir(root, "data.root")
    meta = read_identity_meta(require_file(root / META_FILE, DATASET))
    if attribute not in meta.columns:
        raise ValueError(
            f"data.table.attribute={attribute!r} is not a column of {META_FILE}; allowed: {list(meta.columns)}"
        )
    folders = [scan_identity_folders(root, folder, DATASET).assign(folder=folder) for folder in FOLDERS]
    frame = pd.concat(folders, ignore_index=True)

    known = frame["identity"].isin(meta.index)
    log_skips(
        DATASET,
        {
            f"images of {frame.loc[~known, 'identity'].nunique()} identities missing from {META_FILE}": int(
                (~known).sum()
            ),
        },
    )
    frame = frame[known].join(meta[attribute], on="identity")
    frame = drop_unreadable(root, frame, verify_images, DATASET)

    groups = frame.groupby("identity")[attribute].first()
    test_identities = frame.loc[frame["folder"] == "test", "identity"].unique()
    fixed = pd.Series("test", index=pd.Index(test_identities, name="identity"))
    frame = apply_identity_splits(frame, identity_splits(groups, split, DATASET, fixed=fixed), DATASET)
    return face_table(root, frame.drop(columns="folder"), attribute, DATASET)


def read_identity_meta(path: Path) -> pd.DataFrame:
    """``identity_meta.csv`` indexed by ``Class_ID``, all values stripped strings.

    The file has a space after every comma, and some names contain commas without quotes, so a row is split on
    commas and any surplus fields are joined back into the second column (the name).
    """
    lines = [line for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    if not lines:
        raise ValueError(f"{path}: empty file; expected a header line starting with Class_ID")
    header = [field.strip() for field in lines[0].split(",")]
    if header[0] != "Class_ID":
        raise ValueError(f"{path}: the first column must be Class_ID, got {header[0]!r}")
    rows = []
    for number, line in enumerate(lines[1:], start=2):
        fields = [field.strip() for field in line.split(",")]
        surplus = len(fields) - len(header)
        if surplus < 0:
            raise ValueError(f"{path}:{number}: {len(fields)} fields, expected {len(header)} ({', '.join(header)})")
        name = ", ".join(fields[1 : 2 + surplus]).strip('"')
        rows.append([fields[0], name, *fields[2 + surplus :]])
    return pd.DataFrame(rows, columns=header).set_index("Class_ID")


register(DataFormat(DATASET, "VGGFace2", read_vggface2))
