"""Data sources that produce a :class:`~fairnas.data.table.FaceTable` for the data module."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from fairnas.data.synthetic import SyntheticFaceSpec, render_synthetic_faces
from fairnas.data.table import FaceTable, read_generic


def synthetic_faces(cache_dir: str | Path, **spec: object) -> FaceTable:
    """Render (once, cached) the synthetic faces described by ``spec`` and read them in the generic format."""
    allowed = [field.name for field in dataclasses.fields(SyntheticFaceSpec)]
    unknown = sorted(set(spec) - set(allowed))
    if unknown:
        raise ValueError(f"data.table: unknown synthetic-face option(s) {unknown}; allowed: {allowed}")
    root = render_synthetic_faces(SyntheticFaceSpec(**spec), cache_dir)
    return read_generic(root, attribute="group")
