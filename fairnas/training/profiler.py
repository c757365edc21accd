"""The trainer's profiler when none is asked for: Lightning's pass-through profiler without its per-hook cost.

Lightning wraps every hook it calls (about 24 a training step, more with each callback) in
``trainer.profiler.profile(...)``. Its default, ``PassThroughProfiler``, records nothing but still builds a
generator-based context manager for each call, about 0.7 microseconds apiece; :class:`NoProfiler` hands back one
shared no-op context instead (``python bench/training_speed.py --parts overhead`` measures the difference).
``trainer.profiler=simple`` (or ``advanced``, ``pytorch``) still selects one of Lightning's profilers.
"""

from __future__ import annotations

import contextlib

from pytorch_lightning.profilers import PassThroughProfiler, Profiler

LIGHTNING_PROFILERS = ("simple", "advanced", "pytorch", "xla")
"""The names ``pl.Trainer(profiler=...)`` takes."""
_NOTHING = contextlib.nullcontext()


class NoProfiler(PassThroughProfiler):
    """Profiles nothing, at no per-hook cost: ``profile`` returns the same no-op context manager every time."""

    def profile(self, action_name: str) -> contextlib.nullcontext:
        return _NOTHING


def trainer_profiler(configured: str | Profiler | None) -> str | Profiler:
    """The ``profiler`` argument of a ``pl.Trainer``: ``configured`` (``trainer.profiler``) when set, else
    :class:`NoProfiler`."""
    return configured or NoProfiler()
