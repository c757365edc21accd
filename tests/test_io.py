"""Atomic writing: a file is replaced whole or not at all, with the permissions a plain open would give it."""

from __future__ import annotations

import os

import pytest

from fairnas.io import atomic_path, write_text_atomic


def test_written_file_has_the_usual_permissions(tmp_path):
    path = tmp_path / "metrics.json"
    write_text_atomic(path, "{}")
    mask = os.umask(0)
    os.umask(mask)
    assert path.read_text() == "{}" and path.stat().st_mode & 0o777 == 0o666 & ~mask


def test_a_failed_write_keeps_the_old_file_and_leaves_no_temporary(tmp_path):
    path = tmp_path / "table.csv"
    write_text_atomic(path, "old")
    with pytest.raises(RuntimeError), atomic_path(path) as tmp:
        tmp.write_text("half")
        raise RuntimeError("killed while writing")
    assert path.read_text() == "old" and [p.name for p in tmp_path.iterdir()] == ["table.csv"]
