"""Searchable Dual Path Network (thesis Sec. 4.4.3, Fig. 4.6; Chen et al., 2017).

A DPN block reads the concatenation of a residual path and a dense path, runs it through
1x1 -> 3x3 (grouped, strided) -> 1x1 convolutions, adds the first ``residual_chs`` output channels to the
residual path and concatenates the remaining ``inc`` channels to the dense path. The searchable block keeps this
wiring and replaces the three convolutions with three slots, each any of the nine operations of Table 4.3
(see :mod:`fairnas.models.ops`); ``ops=(3, 0, 1)`` is the paper's SMAC_301.

Slot choices, fixed here because the paper leaves them open:

- Slot 2 takes the place of the 3x3 convolution: it keeps its stride (2 in the first block of stages 2-4) and its
  ``groups``. Its input and output both have ``k_r * 2**stage`` channels, so every operation can be grouped once
  ``groups`` divides ``k_r`` (checked when the network is built).
- Slots 1 and 3 take the place of the 1x1 convolutions: stride 1, ungrouped, any kernel size.
- The projection shortcut (first block of a stage) stays DPN's BN -> ReLU -> 1x1 conv, with stride 2 in the
  downsampling stages.

The stem (conv -> BN -> ReLU, stride 2, then 3x3 max-pool), the final BN -> ELU on the concatenated paths, and the
global average pooling follow timm's ``dpn.py``. Stage ``i`` (0-based) has ``k_sec[i]`` blocks, a residual width
of ``base_width * 2**i`` channels and a dense growth of ``inc_sec[i]`` channels per block; ``base_width=256`` with a
7x7 stem is timm's full-size DPN, ``base_width=64`` with a 3x3 stem its ``small`` variant.
"""

from collections import OrderedDict
from typing import Literal

import torch
from torch import nn

from fairnas.models.ops import build_operation, parse_ops

BlockType = Literal["proj", "down", "normal"]
DualPath = tuple[torch.Tensor, torch.Tensor]


def _bn_relu_conv(in_chs: int, out_chs: int, stride: int) -> nn.Sequential:
    """DPN's pre-activation 1x1 projection shortcut."""
    return nn.Sequential(
        nn.BatchNorm2d(in_chs), nn.ReLU(inplace=True), nn.Conv2d(in_chs, out_chs, 1, stride=stride, bias=False)
    )


class SearchableDualPathBlock(nn.Module):
    """One DPN block whose three convolutions are the searchable operations ``ops`` (Fig. 4.6, right).

    ``block_type`` is ``"proj"`` (first block of the first stage: projection shortcut, stride 1), ``"down"``
    (first block of a later stage: projection shortcut, stride 2) or ``"normal"`` (identity shortcut).
    Returns ``(residual [B, residual_chs, H, W], dense [B, dense_chs, H, W])``.
    """

    def __init__(
        self,
        ops: tuple[int, int, int],
        in_chs: int,
        mid_chs: int,
        residual_chs: int,
        inc: int,
        groups: int,
        block_type: BlockType,
    ) -> None:
        super().__init__()
        self.residual_chs = residual_chs
        stride = 2 if block_type == "down" else 1
        self.projection = None if block_type == "normal" else _bn_relu_conv(in_chs, residual_chs + 2 * inc, stride)
        self.slot1 = build_operation(ops[0], in_chs, mid_chs)
        self.slot2 = build_operation(ops[1], mid_chs, mid_chs, stride=stride, groups=groups)
        self.slot3 = build_operation(ops[2], mid_chs, residual_chs + inc)

    def forward(self, x: torch.Tensor | DualPath) -> DualPath:
        x_in = torch.cat(x, dim=1) if isinstance(x, tuple) else x
        if self.projection is None:
            if not isinstance(x, tuple):
                raise ValueError("a 'normal' dual path block needs the (residual, dense) pair of the previous block")
            shortcut_residual, shortcut_dense = x
        else:
            shortcut = self.projection(x_in)
            shortcut_residual = shortcut[:, : self.residual_chs]
            shortcut_dense = shortcut[:, self.residual_chs :]
        out = self.slot3(self.slot2(self.slot1(x_in)))
        residual = shortcut_residual + out[:, : self.residual_chs]
        dense = torch.cat([shortcut_dense, out[:, self.residual_chs :]], dim=1)
        return residual, dense


class ConcatBnAct(nn.Module):
    """Concatenate the two paths, then BN -> ELU (timm's ``conv5_bn_ac``)."""

    def __init__(self, num_chs: int) -> None:
        super().__init__()
        self.bn = nn.BatchNorm2d(num_chs)
        self.act = nn.ELU(inplace=True)

    def forward(self, x: DualPath) -> torch.Tensor:
        return self.act(self.bn(torch.cat(x, dim=1)))


class SearchableDPN(nn.Module):
    """DPN backbone built from searchable blocks; forward(x [B, C, H, W]) -> pooled features [B, num_features]."""

    def __init__(
        self,
        ops: object = (3, 0, 1),
        num_init_features: int = 128,
        k_r: int = 200,
        groups: int = 50,
        k_sec: tuple[int, ...] = (1, 1, 1, 1),
        inc_sec: tuple[int, ...] = (20, 64, 64, 128),
        base_width: int = 256,
        stem_kernel_size: int = 7,
        in_chans: int = 3,
    ) -> None:
        super().__init__()
        self.ops = parse_ops(ops)
        k_sec, inc_sec = tuple(k_sec), tuple(inc_sec)
        _check_widths(num_init_features, k_r, groups, k_sec, inc_sec, base_width, stem_kernel_size)

        blocks: OrderedDict[str, nn.Module] = OrderedDict()
        blocks["stem"] = nn.Sequential(
            nn.Conv2d(in_chans, num_init_features, stem_kernel_size, 2, stem_kernel_size // 2, bias=False),
            nn.BatchNorm2d(num_init_features),
            nn.ReLU(inplace=True),
            nn.MaxPool2d(kernel_size=3, stride=2, padding=1),
        )
        in_chs = num_init_features
        self.stage_ends: list[str] = []  # the last block of every stage
        for stage, (depth, inc) in enumerate(zip(k_sec, inc_sec, strict=True)):
            residual_chs, mid_chs = base_width * 2**stage, k_r * 2**stage
            for index in range(depth):
                block_type: BlockType = "normal" if index else ("proj" if stage == 0 else "down")
                blocks[f"conv{stage + 2}_{index + 1}"] = SearchableDualPathBlock(
                    self.ops, in_chs, mid_chs, residual_chs, inc, groups, block_type
                )
                in_chs = in_chs + inc if index else residual_chs + 3 * inc
            self.stage_ends.append(f"conv{stage + 2}_{depth}")
        blocks["final_bn_act"] = ConcatBnAct(in_chs)

        self.num_features: int = in_chs
        self.features = nn.Sequential(blocks)
        self.pool = nn.Sequential(nn.AdaptiveAvgPool2d(1), nn.Flatten(1))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Pooled features [B, num_features] of images ``x`` [B, C, H, W]."""
        return self.pool(self.features(x))

    def stage_features(self, x: torch.Tensor, last: int = 2) -> list[torch.Tensor]:
        """Feature maps [B, C, H, W] of the last ``last`` stages, earliest first (linear probes, Sec. 4.5.7).

        A stage's output is its last block's residual and dense paths concatenated; the last stage's is taken
        after the final BN -> ELU, i.e. the map :meth:`forward` pools.
        """
        if not 1 <= last <= len(self.stage_ends):
            raise ValueError(f"last={last} must be in [1, {len(self.stage_ends)}] (the number of stages)")
        outputs: list[torch.Tensor] = []
        out: torch.Tensor | DualPath = x
        for name, layer in self.features.named_children():
            out = layer(out)
            if name in self.stage_ends:
                assert isinstance(out, tuple)  # a dual path block's (residual, dense) pair
                outputs.append(torch.cat(out, dim=1))
        assert isinstance(out, torch.Tensor)  # the final BN -> ELU's map
        outputs[-1] = out
        return outputs[-last:]


def _check_widths(
    num_init_features: int,
    k_r: int,
    groups: int,
    k_sec: tuple[int, ...],
    inc_sec: tuple[int, ...],
    base_width: int,
    stem_kernel_size: int,
) -> None:
    for key, value in (
        ("num_init_features", num_init_features),
        ("k_r", k_r),
        ("groups", groups),
        ("base_width", base_width),
        ("stem_kernel_size", stem_kernel_size),
    ):
        if value < 1:
            raise ValueError(f"backbone.{key}={value} must be a positive integer")
    if k_r % groups:
        raise ValueError(f"backbone.groups={groups} must divide backbone.k_r={k_r} (slot 2 is a grouped operation)")
    if len(k_sec) != len(inc_sec) or not k_sec:
        raise ValueError(f"backbone.k_sec={k_sec} and backbone.inc_sec={inc_sec} must be non-empty and equally long")
    if min(k_sec) < 1 or min(inc_sec) < 1:
        raise ValueError(f"backbone.k_sec={k_sec} and backbone.inc_sec={inc_sec} must hold positive integers")


DPN_PRESETS: dict[str, dict[str, object]] = {
    # Thesis Sec. 4.4: dpn107's widths with one searchable block per stage.
    "paper": dict(
        num_init_features=128,
        k_r=200,
        groups=50,
        k_sec=(1, 1, 1, 1),
        inc_sec=(20, 64, 64, 128),
        base_width=256,
        stem_kernel_size=7,
    ),
    # CPU-sized: trains on 64x64 faces in tests and smoke runs on two cores.
    "tiny": dict(
        num_init_features=16,
        k_r=16,
        groups=4,
        k_sec=(1, 1, 1, 1),
        inc_sec=(8, 16, 16, 32),
        base_width=32,
        stem_kernel_size=3,
    ),
}
"""The DPN sizes ``backbone.preset`` names: ``paper`` (thesis Sec. 4.4) and ``tiny`` (CPU-sized)."""


def build_dpn(preset: str = "tiny", ops: object = (3, 0, 1), **overrides: object) -> SearchableDPN:
    """Build a searchable DPN from a preset of :data:`DPN_PRESETS`, with ``overrides`` replacing preset values."""
    if preset not in DPN_PRESETS:
        raise ValueError(f"backbone.preset={preset!r} is not a DPN preset; allowed: {', '.join(DPN_PRESETS)}")
    allowed = set(DPN_PRESETS[preset]) | {"in_chans"}
    unknown = sorted(set(overrides) - allowed)
    if unknown:
        raise ValueError(f"backbone.{unknown[0]} is not a DPN argument; allowed: {', '.join(sorted(allowed))}")
    return SearchableDPN(ops=ops, **{**DPN_PRESETS[preset], **overrides})  # type: ignore[arg-type]
