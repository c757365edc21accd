"""Data sources that produce a :class:`~fairnas.data.table.FaceTable` for the data module."""

from __future__ import annotations

from pathlib import Path

from fairnas.data.synthetic import SyntheticFaceSpec, render_synthetic_faces
from fairnas.data.table import FaceTable, read_generic


def synthetic_faces(cache_dir: str | Path, **spec: object) -> FaceTable:
    """Render (once, cached) the synthetic faces described by ``spec`` (the fields of
    :class:`~fairnas.data.synthetic.SyntheticFaceSpec`) and read them in the generic format."""
    try:
        face_spec = SyntheticFaceSpec(**spec)
    except TypeError as error:  # an unknown option: the dataclass names it
        raise ValueError(f"data.table: {error}") from None
    root = render_synthetic_faces(face_spec, cache_dir)
    return read_generic(root, attribute="group")
