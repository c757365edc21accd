"""What every on-disk format needs: the registry of formats, path checks, folder scans, counted skips of bad images,
group checks."""

from __future__ import annotations

import dataclasses
import logging
import os
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pandas as pd
from PIL import Image
from torchvision.datasets.folder import IMG_EXTENSIONS

from fairnas.data.table import FaceTable, check_identity_disjoint
from fairnas.registry import Registry

log = logging.getLogger(__name__)


@dataclasses.dataclass(frozen=True)
class DataFormat:
    """A registered on-disk format: its ``name`` (the ``data=<name>`` option, ``conf/data/<name>.yaml``, whose
    ``table._target_`` is ``read``), its ``title`` (how the docs' table of data sets and the README's feature list call
    it) and ``read(root, ...) -> FaceTable``."""

    name: str
    title: str
    read: Callable[..., FaceTable]


FORMATS: Registry[DataFormat] = Registry("data format")
"""The on-disk formats by name, in the order their modules registered them."""


def register(data_format: DataFormat) -> DataFormat:
    """Add a format to the registry (a format's module does so when it is imported)."""
    return FORMATS.add(data_format)


def require_dir(path: str | Path | None, what: str) -> Path:
    """``path`` as an existing directory; ``what`` names it in the error (e.g. ``data.root``)."""
    if path is None:
        raise ValueError(f"{what} is not set")
    path = Path(path).expanduser()
    if not path.is_dir():
        raise FileNotFoundError(f"{what}: directory '{path}' does not exist")
    return path


def require_file(path: Path, dataset: str) -> Path:
    if not path.is_file():
        raise FileNotFoundError(f"{dataset}: file '{path}' does not exist")
    return path


def scan_identity_folders(root: Path, subdir: str, dataset: str) -> pd.DataFrame:
    """Images of a folder-per-identity layout ``root/subdir/<identity>/<image>``, sorted.

    Returns columns ``path`` (relative to ``root``) and ``identity`` (the folder name); files whose extension is
    not an image extension are ignored.
    """
    base = require_dir(root / subdir, f"{dataset} image folder")
    prefix = "" if Path(subdir) == Path(".") else f"{Path(subdir).as_posix()}/"
    rows = []
    for identity in sorted(entry.name for entry in os.scandir(base) if entry.is_dir()):
        names = sorted(name for name in os.listdir(base / identity) if name.lower().endswith(IMG_EXTENSIONS))
        rows += [(f"{prefix}{identity}/{name}", identity) for name in names]
    return pd.DataFrame(rows, columns=["path", "identity"])


def drop_unreadable(root: Path, frame: pd.DataFrame, verify: bool, dataset: str) -> pd.DataFrame:
    """Rows whose image file exists (and, with ``verify``, decodes), with a logged count of the rest.

    Existence is checked against one listing per directory. ``verify`` decodes every image once (minutes for
    CelebA on two cores), which finds truncated and corrupt files before they stop a training run.
    """
    listings: dict[str, set[str]] = {}

    def exists(path: str) -> bool:
        folder, name = os.path.split(path)
        if folder not in listings:
            directory = root / folder
            listings[folder] = set(os.listdir(directory)) if directory.is_dir() else set()
        return name in listings[folder]

    present = frame["path"].map(exists).to_numpy(dtype=bool)
    log_skips(dataset, {"image files that do not exist": int((~present).sum())})
    frame = frame[present]
    if verify:
        with ThreadPoolExecutor(max_workers=os.cpu_count()) as pool:
            decodable = list(pool.map(lambda path: is_decodable(root / path), frame["path"]))
        log_skips(dataset, {"image files that do not decode": decodable.count(False)})
        frame = frame[decodable]
    return frame.reset_index(drop=True)


def is_decodable(path: Path) -> bool:
    """Whether PIL can fully decode the image at ``path``."""
    try:
        with Image.open(path) as image:
            image.load()
    except (OSError, SyntaxError, ValueError):  # PIL raises these for unreadable, truncated or unknown files
        return False
    return True


def log_skips(dataset: str, counts: Mapping[str, int]) -> None:
    """Log a warning for every non-zero count of skipped items, e.g. ``{"images not in X": 3}``."""
    for reason, count in counts.items():
        if count:
            log.warning("%s: skipped %d %s", dataset, count, reason)


def check_groups(frame: pd.DataFrame, attribute: str, dataset: str, expected: Sequence[str] | None = None) -> None:
    """Fail when no image is left, when an ``expected`` group is empty, or when fewer than two groups remain."""
    if frame.empty:
        raise ValueError(f"{dataset}: no images left after skipping unreadable or unlabelled ones")
    present = sorted(frame[attribute].unique())
    empty = [group for group in expected or () if group not in present]
    if empty:
        raise ValueError(f"{dataset}: protected group(s) {empty} have no images; present: {present}")
    if len(present) < 2:
        raise ValueError(
            f"{dataset}: the protected attribute '{attribute}' has the single value {present}; "
            "fairness metrics need at least two groups"
        )


def face_table(
    root: Path, frame: pd.DataFrame, attribute: str, dataset: str, expected_groups: Iterable[str] | None = None
) -> FaceTable:
    """The checked :class:`FaceTable`: string groups, at least two non-empty groups, identity-disjoint splits."""
    frame = frame.reset_index(drop=True)
    frame[attribute] = frame[attribute].astype(str)
    check_groups(frame, attribute, dataset, list(expected_groups or ()))
    check_identity_disjoint(frame, source=dataset)
    log.info(
        "%s: %d images of %d identities, %s",
        dataset,
        len(frame),
        frame["identity"].nunique(),
        frame.groupby("split")["identity"].nunique().to_dict(),
    )
    return FaceTable(root=root, frame=frame, attribute=attribute)
