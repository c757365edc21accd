"""What the benchmark scripts' command lines share: ``--shard K/N`` and quiet training logs."""

from __future__ import annotations

import argparse
import logging
import warnings


def parse_shard(text: str) -> tuple[int, int]:
    """``K/N`` with 0 <= K < N."""
    k, _, n = text.partition("/")
    if not (k.isdigit() and n.isdigit() and int(k) < int(n)):
        raise argparse.ArgumentTypeError(f"--shard must be K/N with 0 <= K < N, got {text!r}")
    return int(k), int(n)


def quiet_training_logs() -> None:
    """Keep the per-trial output of Lightning and SMAC's progress lines out of the benchmark's report."""
    for name in ("pytorch_lightning", "lightning", "lightning.pytorch", "lightning_fabric", "fairnas.search"):
        logging.getLogger(name).setLevel(logging.ERROR)
    warnings.filterwarnings("ignore", category=UserWarning)
    warnings.filterwarnings("ignore", category=DeprecationWarning)
    warnings.filterwarnings("ignore", category=FutureWarning)
