"""Training randomness that does not depend on where a run started: the global RNGs are reseeded every batch.

Data order and augmentation are already pure functions of ``(seed, epoch, index)`` (:mod:`fairnas.data.dataset`).
What is left is the model's own randomness, dropout and drop-path (e.g. timm's ``drop_path_rate``), which draws
from the global torch RNG. Left alone, that stream depends on everything drawn since ``seed_everything``: a run
continued from a checkpoint (``resume_from``) reseeds at its start and evaluates its sanity-check batches before
the next epoch, and even within one run Lightning creates the training DataLoader iterator (which draws its base
seed from the global torch RNG) before or after ``on_train_epoch_start`` depending on how the epoch began, so the
dropout masks of a continued run differ from those of an uninterrupted one. :class:`BatchSeeding` instead seeds
torch (CPU and every CUDA device), numpy and Python's ``random`` right before every training batch from
``(seed, epoch, batch index, global rank)``; a batch's draws are then the same whether the run was interrupted or
not, and no RNG state needs to be carried in the checkpoint.
"""

from __future__ import annotations

import random

import numpy as np
import pytorch_lightning as pl
import torch

STREAM = 0x5EED
"""Spawn key that keeps these seeds apart from the data's ``(seed, epoch)`` shuffling seeds."""


def batch_seed(seed: int, epoch: int, batch_idx: int, rank: int = 0) -> int:
    """A 63-bit seed from ``(seed, epoch, batch_idx, rank)``, stable across processes and platforms."""
    sequence = np.random.SeedSequence([int(seed), int(epoch), int(batch_idx), int(rank)], spawn_key=(STREAM,))
    return int(sequence.generate_state(1, dtype=np.uint64)[0] >> 1)


def seed_all(value: int) -> None:
    """Seed torch (CPU and all CUDA devices), numpy's global RNG and Python's ``random`` with ``value``.

    CUDA is seeded only once it is initialised (a run on the GPU has initialised it before its first batch):
    ``torch.manual_seed`` would otherwise queue a lazy CUDA seeding call, recording a Python stack trace each time.
    """
    torch.default_generator.manual_seed(value)
    if torch.cuda.is_initialized():
        torch.cuda.manual_seed_all(value)
    np.random.seed(value % 2**32)
    random.seed(value)


class BatchSeeding(pl.Callback):
    """Reseed the global RNGs before every training batch from ``(seed, epoch, batch index, global rank)``.

    Makes training continued from an end-of-epoch checkpoint equal to training without the interruption, also with
    dropout or drop-path (see the module docstring).
    """

    def __init__(self, seed: int = 0) -> None:
        self.seed = int(seed)

    def on_train_batch_start(self, trainer: pl.Trainer, pl_module: pl.LightningModule, batch, batch_idx: int) -> None:
        seed_all(batch_seed(self.seed, trainer.current_epoch, batch_idx, trainer.global_rank))
