"""Face-verification benchmarks: image pairs labelled same / different person, in folds.

Two on-disk formats:

- LFW's ``pairs.txt`` (Huang et al., 2008) over a folder per person: an optional header (``<folds> <pairs per
  fold>``), then ``name i j`` for a matched pair and ``name1 i name2 j`` for a mismatched one, image ``i`` of
  ``name`` being ``<name>/<name>_<i:04d>.jpg``. Each fold holds its matched pairs, then its mismatched pairs. RFW's
  ``<race>_pairs.txt`` is the same without the header (:mod:`fairnas.data.formats.rfw`).
- The packed ``.bin`` files of LFW, CFP-FF, CFP-FP, AgeDB-30, CALFW and CPLFW distributed with insightface: a
  pickled pair (list of encoded images, list of is-same flags), images ``2k`` and ``2k + 1`` forming pair ``k``,
  in 10 consecutive folds. They are read with a restricted unpickler (no mxnet, no arbitrary code) and unpacked
  once into an image cache, so that evaluation reads files like every other format.
"""

from __future__ import annotations

import dataclasses
import hashlib
import io
import os
import pickle
import re
import shutil
import tempfile
from pathlib import Path

import numpy as np
import pandas as pd
from PIL import Image

from fairnas.data.formats.common import drop_unreadable, log_skips, require_dir, require_file

PAIR_COLUMNS = ("left", "right", "same", "fold", "group")
DEFAULT_FOLDS = 10
ALL = "all"  # the group of every pair of a benchmark without a protected attribute


@dataclasses.dataclass(frozen=True)
class VerificationBenchmark:
    """Images under ``root`` and the pairs to verify.

    ``images``: one row per image with ``path`` (relative to ``root``), ``identity`` (``None`` when unknown) and,
    when ``attribute`` is set, the protected group in column ``attribute``. ``pairs``: ``left``/``right`` (row
    positions in ``images``), ``same`` (bool), ``fold`` (int) and ``group`` (the pair's group; ``"all"`` without
    an attribute). With an attribute and known identities, the images also support identification metrics.
    """

    name: str
    root: Path
    images: pd.DataFrame
    pairs: pd.DataFrame
    attribute: str | None = None

    def __post_init__(self) -> None:
        if self.pairs.empty:
            raise ValueError(f"{self.name}: no pairs left to verify")
        if self.pairs["fold"].nunique() < 2:
            raise ValueError(
                f"{self.name}: pairs form {self.pairs['fold'].nunique()} fold(s); k-fold accuracy needs at least 2"
            )
        for group, pairs in self.pairs.groupby("group"):
            if pairs["same"].all() or not pairs["same"].any():
                raise ValueError(f"{self.name}: group {group!r} needs both matched and mismatched pairs")
        if self.attribute is not None and self.images[self.attribute].nunique() < 2:
            groups = sorted(self.images[self.attribute].unique())
            raise ValueError(
                f"{self.name}: column '{self.attribute}' holds only {groups}; a disparity needs two groups"
            )


def parse_pairs_file(path: Path, n_folds: int = DEFAULT_FOLDS) -> pd.DataFrame:
    """Pairs of a ``pairs.txt``-style file: columns ``name1, index1, name2, index2, same, fold``.

    With a header ``<folds> <pairs per fold>`` a fold is ``2 * <pairs per fold>`` consecutive lines (LFW View 2).
    Without one, the lines form ``n_folds`` equal consecutive folds (RFW: 10 folds of 600 lines).
    """
    lines = [line.split() for line in require_file(path, path.stem).read_text().splitlines() if line.strip()]
    fold_size = None
    if lines and all(field.isdigit() for field in lines[0]):
        header, lines = lines[0], lines[1:]
        fold_size = 2 * int(header[-1])
    rows = []
    for number, fields in enumerate(lines):
        if len(fields) == 3:
            rows.append((fields[0], int(fields[1]), fields[0], int(fields[2]), True))
        elif len(fields) == 4:
            rows.append((fields[0], int(fields[1]), fields[2], int(fields[3]), False))
        else:
            raise ValueError(
                f"{path}: line {number + 1 + (fold_size is not None)} has {len(fields)} fields; "
                "expected 'name i j' (matched) or 'name1 i name2 j' (mismatched)"
            )
    pairs = pd.DataFrame(rows, columns=["name1", "index1", "name2", "index2", "same"])
    if fold_size is None:
        if len(pairs) % n_folds:
            raise ValueError(f"{path}: {len(pairs)} pairs do not form {n_folds} equal folds")
        fold_size = len(pairs) // n_folds
    return pairs.assign(fold=np.arange(len(pairs)) // max(fold_size, 1))


def pair_paths(listed: pd.DataFrame, folder: str, extension: str = "jpg") -> tuple[pd.Series, pd.Series]:
    """Paths of the left and right images of parsed pairs, in LFW naming under ``folder``: image ``i`` of
    ``name`` is ``<folder>/<name>/<name>_<i:04d>.<extension>``."""

    def side(names: pd.Series, indices: pd.Series) -> pd.Series:
        paths = [f"{folder}/{name}/{name}_{index:04d}.{extension}" for name, index in zip(names, indices, strict=True)]
        return pd.Series(paths, index=listed.index)

    return side(listed["name1"], listed["index1"]), side(listed["name2"], listed["index2"])


def index_pairs(
    name: str,
    images: pd.DataFrame,
    left_paths: pd.Series,
    right_paths: pd.Series,
    same: pd.Series,
    fold: pd.Series,
    group: pd.Series,
) -> pd.DataFrame:
    """Pairs as row positions into ``images``; pairs with an image not in ``images`` are skipped and counted."""
    position = pd.Series(np.arange(len(images)), index=images["path"])
    left, right = left_paths.map(position), right_paths.map(position)
    present = (left.notna() & right.notna()).to_numpy()
    log_skips(name, {"pairs with a missing or unreadable image": int((~present).sum())})
    return pd.DataFrame(
        {
            "left": left[present].astype(int).to_numpy(),
            "right": right[present].astype(int).to_numpy(),
            "same": same[present].astype(bool).to_numpy(),
            "fold": fold[present].astype(int).to_numpy(),
            "group": group[present].astype(str).to_numpy(),
        }
    )


def read_pairs_txt(
    root: str | Path,
    pairs: str = "pairs.txt",
    images: str = "lfw",
    name: str = "lfw",
    extension: str = "jpg",
    verify_images: bool = False,
) -> VerificationBenchmark:
    """An LFW-style benchmark: ``root/<pairs>`` over images ``root/<images>/<name>/<name>_<i:04d>.<extension>``."""
    root = require_dir(root, f"{name} benchmark root")
    listed = parse_pairs_file(root / pairs)
    left, right = pair_paths(listed, images, extension)
    paths = pd.unique(pd.concat([left, right]))
    frame = pd.DataFrame({"path": paths, "identity": [path.split("/")[-2] for path in paths]})
    frame = drop_unreadable(root, frame, verify_images, name)
    group = pd.Series(ALL, index=listed.index)
    return VerificationBenchmark(
        name, root, frame, index_pairs(name, frame, left, right, listed["same"], listed["fold"], group)
    )


def read_bin(
    root: str | Path,
    file: str,
    cache_dir: str | Path,
    name: str | None = None,
    n_folds: int = DEFAULT_FOLDS,
) -> VerificationBenchmark:
    """A packed insightface benchmark ``root/<file>`` (e.g. ``agedb_30.bin``), unpacked once into ``cache_dir``.

    Images that do not decode are not unpacked; their pairs are skipped and counted.
    """
    name = name or Path(file).stem
    path = require_file(require_dir(root, f"{name} benchmark root") / file, name)
    image_dir = _unpack_bin(path, Path(cache_dir).expanduser(), name)
    n_pairs = int((image_dir / "n_pairs").read_text())
    same = np.load(image_dir / "same.npy")
    files = {int(Path(f).stem): f for f in os.listdir(image_dir) if re.fullmatch(r"\d+\.\w+", f)}
    images = pd.DataFrame({"path": [files[k] for k in sorted(files)], "identity": None})
    log_skips(name, {"images that do not decode": 2 * n_pairs - len(files)})
    index = np.arange(n_pairs)
    fold = pd.Series(index * n_folds // n_pairs)
    return VerificationBenchmark(
        name,
        image_dir,
        images,
        index_pairs(
            name,
            images,
            pd.Series(index * 2).map(files),
            pd.Series(index * 2 + 1).map(files),
            pd.Series(same),
            fold,
            pd.Series(ALL, index=index),
        ),
    )


class _PairsUnpickler(pickle.Unpickler):
    """Unpickles lists, bytes, bools and numpy arrays only; anything else in the file is refused.

    ``_codecs.encode`` is how Python 3 writes bytes in pickle protocol 2 (Python 2 files need no function).
    """

    ALLOWED = frozenset(
        {
            ("_codecs", "encode"),
            ("numpy", "ndarray"),
            ("numpy", "dtype"),
            ("numpy.core.multiarray", "_reconstruct"),
            ("numpy._core.multiarray", "_reconstruct"),
            ("numpy.core.multiarray", "scalar"),
            ("numpy._core.multiarray", "scalar"),
        }
    )

    def find_class(self, module: str, name: str):
        if (module, name) not in self.ALLOWED:
            raise pickle.UnpicklingError(f"refusing to load {module}.{name} from a benchmark file")
        return super().find_class(module, name)


def _load_bin(path: Path) -> tuple[list, np.ndarray]:
    """(encoded images, is-same flags) of a packed benchmark, checked for the 2-images-per-pair structure."""
    try:
        with open(path, "rb") as handle:
            encoded, same = _PairsUnpickler(handle, encoding="bytes").load()
    except (pickle.UnpicklingError, ValueError, TypeError, EOFError) as error:
        raise ValueError(
            f"{path}: not a packed verification benchmark (pickled (images, is-same list)): {error}"
        ) from None
    same = np.asarray(same, dtype=bool)
    if len(encoded) != 2 * len(same):
        raise ValueError(f"{path}: {len(encoded)} images for {len(same)} pairs; expected 2 images per pair")
    return list(encoded), same


def _unpack_bin(path: Path, cache_dir: Path, name: str) -> Path:
    """Directory of the decoded-checked images ``<k>.<ext>`` of ``path``, with ``same.npy`` and ``n_pairs``.

    The directory is keyed by the file's path, size and modification time, filled under a temporary name and
    renamed into place, so a crash or a concurrent run never leaves a half-filled cache.
    """
    stat = path.resolve().stat()
    key = hashlib.sha256(f"{path.resolve()}|{stat.st_size}|{stat.st_mtime_ns}".encode()).hexdigest()[:12]
    target = cache_dir / f"{name}-{key}"
    if target.is_dir():
        return target
    encoded, same = _load_bin(path)
    cache_dir.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(dir=cache_dir, prefix=f".{name}-"))
    try:
        for index, data in enumerate(encoded):
            data = data.tobytes() if isinstance(data, np.ndarray) else bytes(data)
            image_format = _decodable_format(data)
            if image_format is not None:
                (staging / f"{index:05d}.{image_format}").write_bytes(data)
        np.save(staging / "same.npy", same)
        (staging / "n_pairs").write_text(str(len(same)))
        os.replace(staging, target)
    except OSError:
        if not target.is_dir():  # another process did not win the race: a real error
            raise
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return target


def _decodable_format(data: bytes) -> str | None:
    """The file extension of encoded image ``data`` (``jpeg``, ``png``...), or ``None`` when it does not decode."""
    try:
        with Image.open(io.BytesIO(data)) as image:
            image.load()
            assert image.format is not None  # set by the plugin that opened the file
            return image.format.lower()
    except (OSError, SyntaxError, ValueError):
        return None
