"""Training settings the libraries would only trip over mid-run, or silently accept: checked while a run is built,
before data is read, each failure one line naming the key and what is allowed; and the precision a device runs."""

from __future__ import annotations

from typing import Any

import torch
from omegaconf import DictConfig
from torch import nn

from fairnas.reporting import check_loggers
from fairnas.training.profiler import LIGHTNING_PROFILERS
from fairnas.validation import Settings

PRECISIONS = (
    "32-true",
    "bf16-mixed",
    "16-mixed",
    "bf16-true",
    "16-true",
    "64-true",
    "transformer-engine",
    "transformer-engine-float16",
)
"""Lightning's ``Trainer(precision=...)`` values; :data:`PRECISION_ALIASES` are its older names of some."""
PRECISION_ALIASES = {
    "32": "32-true",
    32: "32-true",
    "16": "16-mixed",
    16: "16-mixed",
    "64": "64-true",
    64: "64-true",
    "bf16": "bf16-mixed",
}
CPU_PRECISIONS = ("32-true", "bf16-mixed", "bf16-true", "16-true", "64-true")
"""The precisions Lightning trains on the CPU as named (fp16 mixed precision becomes bf16; Transformer Engine needs
CUDA)."""


def check_training_settings(cfg: DictConfig) -> None:
    """Epochs and batch sizes are positive integers; a learning rate is a positive number; ``channels_last`` and
    ``compile`` are booleans; a profiler is null, one Lightning names or a ``_target_`` config; a GPU accelerator
    needs a GPU; the precision is one the accelerator runs (:func:`check_precision`); every logger's package is
    installed."""
    settings = Settings()
    settings.integer("trainer.max_epochs", cfg.trainer.get("max_epochs"), minimum=1)
    settings.integer("data.batch_size", cfg.data.get("batch_size"), minimum=1)
    settings.integer("data.eval_batch_size", cfg.data.get("eval_batch_size"), minimum=1)
    settings.positive("optimizer.lr", cfg.optimizer.get("lr"))
    for key in ("channels_last", "compile"):
        settings.boolean(key, cfg.get(key, False))
    profiler = cfg.trainer.get("profiler")
    if profiler is not None and not isinstance(profiler, DictConfig) and profiler not in LIGHTNING_PROFILERS:
        settings.fail("trainer.profiler", profiler, f"null (none) or one of {list(LIGHTNING_PROFILERS)}")
    accelerator = cfg.trainer.get("accelerator")
    if accelerator in ("gpu", "cuda") and not torch.cuda.is_available():
        raise ValueError(
            f"trainer.accelerator={accelerator} (trainer=gpu, trainer=ddp) needs a CUDA GPU and none is "
            "visible; use trainer=cpu, or trainer.accelerator=cpu to run DDP processes on the CPU"
        )
    check_precision(cfg.trainer.get("precision"), accelerator)
    check_loggers(cfg)


def check_precision(precision: Any, accelerator: str | None) -> None:
    """``trainer.precision`` is one of Lightning's (null: its default, 32-true), and one the accelerator runs as
    named: on the CPU Lightning would train fp16 mixed precision (``16-mixed``) in bf16 after a warning."""
    name = PRECISION_ALIASES.get(precision, precision) if isinstance(precision, str | int) else precision
    if precision is not None and name not in PRECISIONS:
        Settings().fail("trainer.precision", precision, f"one of {list(PRECISIONS)} (or an alias: 32, 16, 64, bf16)")
    on_cpu = accelerator == "cpu" or (accelerator == "auto" and not torch.cuda.is_available())
    if on_cpu and name == "16-mixed":
        where = "trainer.accelerator=cpu" if accelerator == "cpu" else "trainer.accelerator=auto, no GPU visible"
        Settings().fail(
            "trainer.precision",
            precision,
            f"one of {list(CPU_PRECISIONS)} on the CPU ({where}): Lightning would train 16-mixed in bf16-mixed there",
        )


def supported_precision(precision: str) -> str:
    """``precision`` as the device can run it: bf16 mixed precision falls back to fp16 mixed precision on a GPU
    without bfloat16 support (before Ampere)."""
    if str(precision).startswith("bf16") and torch.cuda.is_available() and not torch.cuda.is_bf16_supported():
        return "16-mixed"
    return precision


def check_input_size(embedder: nn.Module, image_size: int) -> None:
    """One forward pass of two blank ``image_size`` images: a backbone that cannot take that size (e.g. a ViT
    built for 224 px) fails here with the key to change, not in the first training step."""
    was_training = embedder.training
    try:
        with torch.no_grad():
            embedder.eval()(torch.zeros(2, 3, image_size, image_size))
    except (RuntimeError, AssertionError, ValueError) as error:
        detail = str(error).splitlines()[0] if str(error) else type(error).__name__
        raise ValueError(
            f"data.transforms.image_size={image_size}: the backbone cannot take {image_size}x"
            f"{image_size} images ({detail})"
        ) from None
    finally:
        embedder.train(was_training)
