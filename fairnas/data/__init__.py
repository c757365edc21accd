"""Data: the generic on-disk format, the data module, transforms and the embedded synthetic faces."""

from fairnas.data.datamodule import FaceDataModule
from fairnas.data.table import FaceTable, read_generic

__all__ = ["FaceDataModule", "FaceTable", "read_generic"]
