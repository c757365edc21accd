"""The test split evaluated after every training epoch: the per-epoch test metrics a tabular benchmark records
(NAS-Bench-201 keeps every epoch's), without a second training run per budget.

With a fixed learning-rate schedule horizon, epoch ``b`` of one run equals a ``b``-epoch run (the continuation
test proves it), so one run to the maximum budget gives the metrics of every budget.
"""

from __future__ import annotations

import pytorch_lightning as pl
from pytorch_lightning.trainer.states import TrainerFn


class TestEveryEpoch(pl.Callback):
    """``eval.test_every_epoch=true``: after each training epoch's validation, the test split too, logged as
    ``test/<metric>`` and kept in ``module.evaluations["test"]`` (embedded in this process; every rank under DDP)."""

    def on_validation_epoch_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        if trainer.sanity_checking or trainer.state.fn != TrainerFn.FITTING:
            return
        pl_module.evaluate_loader("test", trainer.datamodule.test_dataloader(), trainer.datamodule)
