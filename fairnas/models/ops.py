"""The nine searchable operations of the DPN search space (thesis Table 4.3).

Index  Name        Definition
0      BnConv1x1   BatchNorm -> ReLU -> Conv 1x1
1      Conv1x1Bn   Conv 1x1 -> BatchNorm -> ReLU
2      Conv1x1     Conv 1x1
3      BnConv3x3   BatchNorm -> ReLU -> Conv 3x3
4      Conv3x3Bn   Conv 3x3 -> BatchNorm -> ReLU
5      Conv3x3     Conv 3x3
6      BnConv5x5   BatchNorm -> ReLU -> Conv 5x5
7      Conv5x5Bn   Conv 5x5 -> BatchNorm -> ReLU
8      Conv5x5     Conv 5x5

Table 4.3 names only the order of normalisation and convolution. The ReLU travels with the batch norm, as in
DPN's own ``BnActConv2d`` (pre-activation: BN -> ReLU -> conv) and in the usual post-normalised
conv -> BN -> ReLU; the vanilla convolution has neither norm nor activation (it is the paper's "vanilla
convolution"). Every convolution pads ``kernel_size // 2`` so that a stride-1 operation keeps the spatial size and
a stride-2 one gives ``ceil(H / 2)``, the same as DPN's strided 1x1 projection shortcut. Only the vanilla
convolution carries a bias, so ops (0, 3, 0) with DPN's widths has exactly the parameters of timm's DPN.
"""

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Literal

from torch import nn

from fairnas.validation import is_integer

NUM_SLOTS = 3
"""Operations per searchable block: the slots replacing DPN's 1x1 -> 3x3 -> 1x1 convolutions."""

Norm = Literal["pre", "post", "none"]


@dataclass(frozen=True)
class OperationSpec:
    """One row of Table 4.3: a convolution kernel size and where its batch norm (+ ReLU) sits."""

    name: str
    kernel_size: int
    norm: Norm


_NORM_VARIANTS: tuple[tuple[str, str, Norm], ...] = (
    ("BnConv", "", "pre"),
    ("Conv", "Bn", "post"),
    ("Conv", "", "none"),
)
"""(name prefix, name suffix, norm placement) of the three variants of every kernel size."""

OPERATIONS: tuple[OperationSpec, ...] = tuple(
    OperationSpec(f"{prefix}{k}x{k}{suffix}", k, norm) for k in (1, 3, 5) for prefix, suffix, norm in _NORM_VARIANTS
)
"""Table 4.3 in index order: OPERATIONS[i] is operation i."""

_ALLOWED = "allowed 0-8 (" + ", ".join(f"{i}={op.name}" for i, op in enumerate(OPERATIONS)) + ")"


def build_operation(index: int, in_chs: int, out_chs: int, stride: int = 1, groups: int = 1) -> nn.Sequential:
    """Build operation ``index`` of Table 4.3 mapping ``in_chs`` to ``out_chs`` channels."""
    spec = OPERATIONS[index]
    conv = nn.Conv2d(
        in_chs,
        out_chs,
        spec.kernel_size,
        stride=stride,
        padding=spec.kernel_size // 2,
        groups=groups,
        bias=spec.norm == "none",
    )
    if spec.norm == "pre":
        return nn.Sequential(nn.BatchNorm2d(in_chs), nn.ReLU(inplace=True), conv)
    if spec.norm == "post":
        return nn.Sequential(conv, nn.BatchNorm2d(out_chs), nn.ReLU(inplace=True))
    return nn.Sequential(conv)


def parse_ops(ops: object) -> tuple[int, int, int]:
    """Validate an architecture code: three operation indices in 0-8, one per block slot.

    Accepts a sequence of ints (list, tuple, OmegaConf ListConfig), a digit string such as ``"301"`` (the
    paper's SMAC_301 naming), or an int such as ``301`` (what Hydra makes of ``backbone.ops=301``; read as
    three zero-padded digits, so ``1`` is ``001``).
    """
    if isinstance(ops, str):
        if not ops.isdigit():
            raise ValueError(f"backbone.ops={ops!r} must be three digits 0-8 such as '301'")
        codes: list[object] = [int(ch) for ch in ops]
    elif is_integer(ops):
        if not 0 <= int(ops) <= 888:
            raise ValueError(f"backbone.ops={ops} must be three digits 0-8 such as 301")
        codes = [int(ch) for ch in f"{int(ops):03d}"]
    elif isinstance(ops, Iterable):
        codes = list(ops)
    else:
        raise ValueError(f"backbone.ops={ops!r} must be a list of three ints 0-8 or a string such as '301'")
    if len(codes) != NUM_SLOTS:
        raise ValueError(f"backbone.ops={ops!r} must name exactly {NUM_SLOTS} operations, got {len(codes)}")
    indices: list[int] = []
    for slot, code in enumerate(codes):
        if not is_integer(code) or not 0 <= int(code) < len(OPERATIONS):
            raise ValueError(f"backbone.ops[{slot}]={code!r} is not an operation index; {_ALLOWED}")
        indices.append(int(code))
    first, second, third = indices  # NUM_SLOTS of them
    return first, second, third


def ops_name(ops: object) -> str:
    """The paper's architecture name, e.g. ``SMAC_301`` for ops (3, 0, 1)."""
    return "SMAC_" + "".join(str(code) for code in parse_ops(ops))
