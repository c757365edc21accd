"""Atomic file writes: a reader never sees a half-written file, an interrupted writer leaves the old one intact."""

from __future__ import annotations

import contextlib
import csv
import json
import math
import os
import tempfile
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pandas as pd


@contextlib.contextmanager
def atomic_path(path: str | Path) -> Iterator[Path]:
    """Yield a temporary path beside ``path`` to write to; on success fsync it and rename it onto ``path``.

    The temporary name keeps ``path``'s suffix, so writers that choose a format by extension (savefig) work. The
    file gets the permissions a plain ``open`` would give it (mkstemp's are 0600).
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    handle, tmp_name = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=path.suffix)
    os.close(handle)
    tmp = Path(tmp_name)
    try:
        yield tmp
        with open(tmp, "rb+") as written:
            os.fsync(written.fileno())
        os.chmod(tmp, 0o666 & ~_umask())
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def write_text_atomic(path: str | Path, text: str) -> None:
    """Replace ``path`` with ``text`` atomically."""
    with atomic_path(path) as tmp:
        tmp.write_text(text)


def write_csv_atomic(frame: pd.DataFrame, path: str | Path) -> None:
    """Replace ``path`` with ``frame`` as CSV (no index) atomically."""
    with atomic_path(path) as tmp:
        frame.to_csv(tmp, index=False)


def append_csv_rows(rows: Sequence[Sequence[Any]], path: str | Path, *, durable: bool = True) -> None:
    """Append ``rows`` (value lists in the file's column order) to the CSV ``path``, each value written as pandas'
    ``to_csv`` writes it (a float as its ``repr``, NaN and None empty, quoting as needed), flushed to disk when
    ``durable``: a log's cost, not a rewrite's. A crash can cut the last line short; whoever reads the file back
    drops it (``fairnas.search.records.TrialStore``)."""
    with open(path, "a", newline="") as file:
        writer = csv.writer(file, lineterminator="\n")
        writer.writerows([[_csv_value(value) for value in row] for row in rows])
        file.flush()
        if durable:
            os.fsync(file.fileno())


def _csv_value(value: Any) -> Any:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return ""
    if isinstance(value, float):  # numpy floats too
        return repr(float(value))
    return value.item() if hasattr(value, "item") else value


def write_json_atomic(path: str | Path, data: Any) -> None:
    """JSON with non-finite floats written as strings (``"inf"``, ``"nan"``) so any JSON reader accepts it."""
    write_text_atomic(path, json.dumps(_finite_json(data), indent=2, sort_keys=True) + "\n")


def _finite_json(value: Any) -> Any:
    if isinstance(value, dict):
        return {str(k): _finite_json(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_finite_json(v) for v in value]
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    return value
