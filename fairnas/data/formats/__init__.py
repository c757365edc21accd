"""On-disk formats of face data sets, found by name in a registry (:mod:`~fairnas.data.formats.common`): each a module
whose reader returns a :class:`~fairnas.data.table.FaceTable` and that ends with
``register(DataFormat(name, title, reader))``; each is the ``data=<name>`` option ``conf/data/<name>.yaml``. Importing
this package imports every module of it, so :data:`FORMATS` holds every format. What the formats share: ``common``
(paths, folder scans, counted skips, group checks) and ``splits`` (identity-disjoint splits); the verification
protocols evaluate.py reads (pairs, ``.bin`` files) are ``verification``. docs/data.md describes the formats;
CONTRIBUTING.md, "A data format", how to add one.
"""

import importlib
import pkgutil

from fairnas.data.formats.common import FORMATS, DataFormat, register
from fairnas.data.formats.rfw import read_rfw_benchmark
from fairnas.data.formats.splits import SplitSpec
from fairnas.data.formats.verification import VerificationBenchmark, read_bin, read_pairs_txt

for _module in pkgutil.iter_modules(__path__):
    importlib.import_module(f"{__name__}.{_module.name}")

__all__ = [
    "FORMATS",
    "DataFormat",
    "SplitSpec",
    "VerificationBenchmark",
    "read_bin",
    "read_pairs_txt",
    "read_rfw_benchmark",
    "register",
]
