"""A training callback that holds a run at a known point until the test lets it go, so that a second process, a
kill or a cancelled SLURM job lands mid-run without timing guesses.

Used from the command line as ``+callbacks.gate._target_=tests.gate.Gate +callbacks.gate.path=<go file>`` (the
repository root on ``PYTHONPATH``). At the start of training epoch ``epoch`` a run writes a marker
``<go file>.<n>.waiting`` (JSON: pid, host, run folder, SLURM job; ``n`` counts the runs that reached the gate)
and, unless fewer than ``free`` runs reached it before, waits until ``<go file>`` exists.
"""

from __future__ import annotations

import json
import os
import socket
import time
import uuid
from pathlib import Path

import pytorch_lightning as pl


class Gate(pl.Callback):
    def __init__(self, path: str, epoch: int = 0, free: int = 0):
        self.path = Path(path)
        self.epoch = epoch
        self.free = free

    def on_train_epoch_start(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        if trainer.current_epoch != self.epoch:
            return
        marker = {
            "pid": os.getpid(),
            "host": socket.gethostname(),
            "run_dir": str(trainer.default_root_dir),
            "slurm_job": slurm_job(),
        }
        reached = len(waiting(self.path))
        Path(f"{self.path}.{reached}-{uuid.uuid4().hex[:8]}.waiting").write_text(json.dumps(marker))
        while reached >= self.free and not self.path.exists():
            time.sleep(0.05)


def waiting(path: str | Path) -> list[dict]:
    """The markers of the runs waiting (or that waited) at the gate ``path``."""
    path = Path(path)
    markers = []
    for marker in sorted(path.parent.glob(f"{path.name}.*.waiting")):
        try:
            markers.append(json.loads(marker.read_text()))
        except ValueError:  # being written
            continue
    return markers


def slurm_job() -> str | None:
    """This process's SLURM job as ``squeue`` lists it and ``scancel`` takes it: ``<array id>_<index>`` for an element
    of a job array (``scancel <SLURM_JOB_ID>`` of an element may cancel the whole array), else the job id."""
    if os.environ.get("SLURM_ARRAY_JOB_ID"):
        return f"{os.environ['SLURM_ARRAY_JOB_ID']}_{os.environ['SLURM_ARRAY_TASK_ID']}"
    return os.environ.get("SLURM_JOB_ID")
