"""Data sources that produce a :class:`~fairnas.data.table.FaceTable` for the data module, and the data module of a
``data=`` config."""

from __future__ import annotations

import dataclasses
import inspect
from collections.abc import Callable
from pathlib import Path
from typing import Any

from fairnas.data.datamodule import FaceDataModule
from fairnas.data.formats.generic import read_generic
from fairnas.data.synthetic import SyntheticFaceSpec, render_synthetic_faces
from fairnas.data.table import FaceTable


def face_data_module(table: Callable[[], FaceTable], *, root: str | Path | None = None, **options) -> FaceDataModule:
    """The :class:`~fairnas.data.FaceDataModule` of a ``data=`` config (``conf/data/_base.yaml``'s target).

    ``root`` is ``data.root``, the one key for where a data set lives; the table source already reads it (its
    ``root: ${data.root}``), so it is part of the config only. ``options`` go to the data module.
    """
    return FaceDataModule(table, **options)


def synthetic_faces(root: str | Path, **spec: Any) -> FaceTable:
    """Render (once, cached under ``root``, which is ``data.root``) the synthetic faces described by ``spec`` (the
    fields of :class:`~fairnas.data.synthetic.SyntheticFaceSpec`) and read them in the generic format."""
    try:
        face_spec = SyntheticFaceSpec(**spec)
    except TypeError as error:  # an unknown option: the dataclass names it
        raise ValueError(f"data.table: {error}") from None
    return read_generic(render_synthetic_faces(face_spec, root), attribute="group")


# The options ``spec`` takes, as keywords of the signature: a ``data.table`` partial with an unknown one is refused when
# the config is built (``fairnas.training.build.check_partial``), not when the data are first read.
synthetic_faces.__signature__ = inspect.Signature(  # type: ignore[attr-defined]
    [
        inspect.Parameter("root", inspect.Parameter.POSITIONAL_OR_KEYWORD),
        *(
            inspect.Parameter(field.name, inspect.Parameter.KEYWORD_ONLY, default=None)
            for field in dataclasses.fields(SyntheticFaceSpec)
        ),
    ]
)
