"""Data: the generic on-disk format, the data module, transforms and the embedded synthetic faces.

:class:`FaceDataModule` is imported on first use, so that the pieces without Lightning (tables, formats,
transforms, the decoded-image cache) import without it.
"""

from fairnas.data.formats.generic import read_generic
from fairnas.data.table import FaceTable

__all__ = ["FaceDataModule", "FaceTable", "read_generic"]


def __getattr__(name: str):
    if name == "FaceDataModule":
        from fairnas.data.datamodule import FaceDataModule

        return FaceDataModule
    raise AttributeError(f"module 'fairnas.data' has no attribute {name!r}")
