"""Where the time of one short training run goes: one ``train(cfg)`` run timed phase by phase.

Phases (wall seconds, from Lightning hooks of a timing callback added to the run's callbacks):

- ``imports``: importing fairnas's training command (torch, Lightning, timm, ...): once per process;
- ``compose``: composing the Hydra config;
- ``build``: from ``train(cfg)`` to the start of fitting: reading the data table, building the model, the loggers
  (W&B's offline run starts here) and the trainer;
- ``first batch``: from the start of fitting to the first training batch (loaders, decoding, the optimiser);
- ``training``: training batches, every epoch;
- ``validation``: the end-of-epoch validation, every epoch (embedding, flip TTA, ranking);
- ``checkpoints``: the rest of every epoch, after validation (best and last checkpoint written, epoch-end hooks);
- ``test``: the final test evaluation, from the end of fitting;
- ``finish``: from the end of the test to ``train`` returning (logger shutdown, ``metrics.json``).

A search trial runs inside the search process, so it pays every phase but ``imports``. Run it alone on the machine
(other processes on the same cores distort every phase):

    python bench/run_costs.py                                # experiment=showcase, default logger (W&B offline)
    python bench/run_costs.py --overrides logger=none trainer.max_epochs=8
"""

from __future__ import annotations

import time

START = time.perf_counter()

import argparse  # noqa: E402  (the imports are part of what is timed)
import collections  # noqa: E402
import tempfile  # noqa: E402

import pytorch_lightning as pl  # noqa: E402

from fairnas.config import compose_config  # noqa: E402
from fairnas.training.run import train  # noqa: E402

IMPORTED = time.perf_counter()
PHASES = ("imports", "compose", "build", "first batch", "training", "validation", "checkpoints", "test", "finish")


class Timeline(pl.Callback):
    """Adds the wall time between Lightning hooks to :data:`PHASES` (``seconds``), counting from ``started`` (set
    just before ``train`` is called); the latest instance is ``Timeline.latest``."""

    started = 0.0
    latest: Timeline | None = None

    def __init__(self) -> None:
        self.seconds: dict[str, float] = collections.defaultdict(float)
        self.last = Timeline.started
        self.first_batch_seen = False
        Timeline.latest = self

    def lap(self, phase: str) -> None:
        now = time.perf_counter()
        self.seconds[phase] += now - self.last
        self.last = now

    def on_fit_start(self, trainer, pl_module) -> None:
        self.lap("build")

    def on_train_epoch_start(self, trainer, pl_module) -> None:
        if self.first_batch_seen:
            self.lap("checkpoints")

    def on_train_batch_start(self, trainer, pl_module, batch, batch_idx) -> None:
        self.lap("training" if self.first_batch_seen else "first batch")
        self.first_batch_seen = True

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx) -> None:
        self.lap("training")

    def on_validation_start(self, trainer, pl_module) -> None:
        self.lap("training" if trainer.state.fn == "fit" else "checkpoints")

    def on_validation_end(self, trainer, pl_module) -> None:
        self.lap("validation")

    def on_train_epoch_end(self, trainer, pl_module) -> None:
        self.lap("checkpoints")

    def on_train_end(self, trainer, pl_module) -> None:
        self.lap("checkpoints")

    def on_test_start(self, trainer, pl_module) -> None:
        self.lap("checkpoints")

    def on_test_end(self, trainer, pl_module) -> None:
        self.lap("test")


def measure(overrides: list[str]) -> dict[str, float]:
    """Seconds per phase of one ``train`` run with ``overrides`` (on top of a timing callback)."""
    with tempfile.TemporaryDirectory() as folder:
        composing = time.perf_counter()
        cfg = compose_config(
            "train", [*overrides, f"+callbacks.timeline._target_={Timeline.__module__}.Timeline"], output_dir=folder
        )
        Timeline.started = time.perf_counter()
        train(cfg)
        Timeline.latest.lap("finish")
    return {"imports": IMPORTED - START, "compose": Timeline.started - composing, **Timeline.latest.seconds}


def main(argv: list[str] | None = None) -> dict[str, float]:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--overrides", nargs="*", default=[], help="train.py overrides after experiment=showcase")
    args = parser.parse_args(argv)
    seconds = measure(["experiment=showcase", *args.overrides])
    total = sum(seconds.get(phase, 0.0) for phase in PHASES)
    print(f"{'phase':12} | {'seconds':>8} | share")
    for phase in PHASES:
        print(f"{phase:12} | {seconds.get(phase, 0.0):8.2f} | {seconds.get(phase, 0.0) / total:5.1%}")
    print(f"{'total':12} | {total:8.2f} |")
    return seconds


if __name__ == "__main__":
    main()
