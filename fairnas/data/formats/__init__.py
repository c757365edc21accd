"""On-disk formats of real face data sets; each reader returns a :class:`~fairnas.data.table.FaceTable`
(or, for verification protocols, a :class:`VerificationBenchmark`), and is a ``data=`` option (see conf/data/)."""

from fairnas.data.formats.celeba import read_celeba
from fairnas.data.formats.folders import read_folders
from fairnas.data.formats.rfw import read_rfw, read_rfw_benchmark
from fairnas.data.formats.splits import SplitSpec
from fairnas.data.formats.verification import VerificationBenchmark, read_bin, read_pairs_txt
from fairnas.data.formats.vggface2 import read_vggface2

__all__ = [
    "SplitSpec",
    "VerificationBenchmark",
    "read_bin",
    "read_celeba",
    "read_folders",
    "read_pairs_txt",
    "read_rfw",
    "read_rfw_benchmark",
    "read_vggface2",
]
