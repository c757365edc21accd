"""Learning-rate schedules defined over a fixed horizon.

The horizon is fixed in epochs, independent of how long a run actually trains: a run stopped after ``b`` epochs and
continued to ``b'`` follows the same curve as a run trained to ``b'`` directly, which is what multi-fidelity search
needs when it promotes a configuration.
"""

from __future__ import annotations

import math

import torch


def warmup_cosine_factor(step: int, *, warmup_steps: int, total_steps: int, min_ratio: float = 0.0) -> float:
    """Multiplier of the base learning rate: linear warm-up, then cosine decay to ``min_ratio`` at ``total_steps``."""
    if step < warmup_steps:
        return (step + 1) / warmup_steps
    progress = min(1.0, (step - warmup_steps) / max(1, total_steps - warmup_steps))
    return min_ratio + (1.0 - min_ratio) * 0.5 * (1.0 + math.cos(math.pi * progress))


def warmup_cosine(
    optimizer: torch.optim.Optimizer,
    *,
    steps_per_epoch: int,
    horizon_epochs: float,
    warmup_epochs: float = 0.0,
    min_lr_ratio: float = 0.0,
) -> torch.optim.lr_scheduler.LRScheduler:
    """Warm-up + cosine over ``horizon_epochs``, stepped every optimiser step (``conf/scheduler/cosine.yaml``)."""
    if horizon_epochs <= 0:
        raise ValueError(f"scheduler.horizon_epochs={horizon_epochs} must be > 0")
    total = max(1, round(horizon_epochs * steps_per_epoch))
    warmup = min(round(warmup_epochs * steps_per_epoch), total - 1)

    def factor(step: int) -> float:
        return warmup_cosine_factor(step, warmup_steps=warmup, total_steps=total, min_ratio=min_lr_ratio)

    return torch.optim.lr_scheduler.LambdaLR(optimizer, factor)


def constant(optimizer: torch.optim.Optimizer, *, steps_per_epoch: int, horizon_epochs: float) -> None:
    """No schedule: the optimiser's learning rate throughout (``conf/scheduler/constant.yaml``)."""
    return None
