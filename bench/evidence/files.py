"""Reading a results folder's files, each refused in one line that names the file: missing, cut short, or lacking a
column or key a table is rendered from."""

from __future__ import annotations

import csv
import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import pandas as pd

REPOSITORY = Path(__file__).resolve().parents[2]
MANIFEST = "manifest.json"
MANIFEST_KEYS = ("commands", "commit", "finished", "machine", "files")
"""What every manifest says (:func:`bench.evidence.results.write_manifest`)."""


class Unreadable(ValueError):
    """A results file that cannot be rendered from, said in one line naming it."""


def relative(path: Path) -> Path:
    """``path`` relative to the repository where it is inside it."""
    return path.relative_to(REPOSITORY) if path.is_relative_to(REPOSITORY) else path


def read_csv(path: Path, columns: Iterable[str] = ()) -> pd.DataFrame:
    """The CSV at ``path``; FileNotFoundError where there is none, :class:`Unreadable` where a row holds another
    number of fields than the header (a file cut short) or a column of ``columns`` is missing."""
    if not path.is_file():
        raise FileNotFoundError(f"{relative(path)}: no such file")
    with path.open(newline="") as handle:
        rows = [row for row in csv.reader(handle) if row]
    if not rows:
        raise Unreadable(f"{relative(path)}: empty")
    for number, row in enumerate(rows[1:], 2):
        if len(row) != len(rows[0]):
            raise Unreadable(f"{relative(path)}: row {number} has {len(row)} fields, the header {len(rows[0])}")
    missing = [column for column in columns if column not in rows[0]]
    if missing:
        raise Unreadable(f"{relative(path)}: no column {', '.join(map(repr, missing))}")
    return pd.read_csv(path)


def read_json(path: Path, keys: Iterable[str] = ()) -> Any:
    """The JSON at ``path``; FileNotFoundError where there is none, :class:`Unreadable` where it does not
    parse or lacks a key of ``keys``."""
    if not path.is_file():
        raise FileNotFoundError(f"{relative(path)}: no such file")
    try:
        found = json.loads(path.read_text())
    except json.JSONDecodeError as error:
        raise Unreadable(f"{relative(path)}: not JSON ({error})") from None
    missing = [key for key in keys if not isinstance(found, dict) or key not in found]
    if missing:
        raise Unreadable(f"{relative(path)}: no key {', '.join(map(repr, missing))}")
    return found


def read_manifest(folder: Path) -> dict:
    """``folder``'s manifest; FileNotFoundError naming the folder where it has none."""
    if not (folder / MANIFEST).is_file():
        raise FileNotFoundError(f"results: '{folder}' has no {MANIFEST}")
    return read_json(folder / MANIFEST, MANIFEST_KEYS)
