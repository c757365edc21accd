"""The LightningModule: the one place where backbone, head, regularisers and metrics meet."""

from __future__ import annotations

import functools
import math
import operator
from collections.abc import Callable, Mapping, Sequence

import pytorch_lightning as pl
import torch
from pytorch_lightning.trainer.states import TrainerFn
from torch import nn

from fairnas.metrics import face_identification_metrics, group_names
from fairnas.models.neck import normalized_embedding
from fairnas.robustness.probes import EmbeddingModel
from fairnas.training.distributed import gather_split

EVAL_STAGES = ("val", "test")
FINITE_CHECK_EVERY = 50
"""Training steps between reads of whether every loss was finite (each read waits for the GPU's queued work)."""
_PLAIN_ATTRIBUTES = frozenset({"_current_fx_name", "_loss_finite", "_unchecked_batches", "_unlogged"})


class FaceRecognitionModule(pl.LightningModule):
    """Trains ``embedder`` (backbone + embedding neck) through a margin ``head`` on the training identities.

    Evaluation is open-set (thesis Sec. 4.3.4): embeddings of held-out identities are ranked by distance and the
    per-group error and rank give the fairness metrics (``fairnas.metrics``). ``regularizers`` maps a name to a
    module ``reg(batch=..., embeddings=..., logits=..., module=...) -> scalar`` with a ``weight`` attribute; each
    is added to the loss with its weight and logged as ``train/<name>``. A regulariser with a true
    ``requires_input_grad`` attribute gets a batch whose ``image`` requires gradients (the embeddings are then
    differentiable in the input). Each evaluation's metrics are kept in ``evaluations[stage]``, where callbacks
    may add theirs (e.g. :class:`fairnas.robustness.RobustnessBiasEvaluation`).
    ``margin_policy(batch=..., embeddings=..., module=...) -> margins [B]`` overrides the head's margin per training
    sample (e.g. :class:`fairnas.mitigations.GroupMargins`, group-dependent margins). ``scheduler(optimizer,
    steps_per_epoch=..., horizon_epochs=...)`` builds the learning-rate schedule (:mod:`fairnas.training.schedule`;
    the horizon defaults to ``max_epochs``). ``config``, the run's resolved training config, is saved in every
    checkpoint (``hyper_parameters["config"]``), so a checkpoint alone rebuilds its run. A training batch with a
    ``loss_weight`` per image (group re-weighting, :mod:`fairnas.data.sampling`) is trained on the weighted mean of
    the per-sample classification losses: ``loss`` then returns one value per sample.
    """

    def __init__(
        self,
        embedder: nn.Module,
        head: nn.Module,
        loss: nn.Module,
        optimizer: Callable[..., torch.optim.Optimizer],
        scheduler: Callable[..., torch.optim.lr_scheduler.LRScheduler | None] | None,
        group_order: Sequence[str],
        regularizers: Mapping[str, nn.Module] | None = None,
        tta_flip: bool = True,
        rank_by: str = "identity",
        margin_policy: Callable[..., torch.Tensor] | None = None,
        horizon_epochs: float | None = None,
        config: Mapping | None = None,
    ):
        super().__init__()
        self.save_hyperparameters({"config": dict(config or {})}, logger=False)
        self.embedder, self.head, self.loss = embedder, head, loss
        self.regularizers = nn.ModuleDict(dict(regularizers or {}))
        self.optimizer_factory, self.scheduler_factory, self.horizon_epochs = optimizer, scheduler, horizon_epochs
        self.group_order, self.tta_flip, self.rank_by = list(group_order), tta_flip, rank_by
        self.margin_policy = margin_policy
        self.evaluations: dict[str, dict[str, float]] = {}
        self._outputs: dict[str, list[dict[str, torch.Tensor]]] = {stage: [] for stage in EVAL_STAGES}
        self._loss_finite: torch.Tensor | None = None
        self._unchecked_batches = 0  # training batches since the last check of _loss_finite
        self._unlogged: tuple[torch.Tensor, dict[str, torch.Tensor], int] | None = None  # this step's, if not logged

    def __setattr__(self, name: str, value) -> None:
        # Lightning sets _current_fx_name around every hook it calls (24 a training step); nn.Module's
        # __setattr__ checks each value against parameters, modules and buffers, a few microseconds apiece. These
        # attributes are never any of those, so they are set directly (bench/training_speed.py --parts overhead).
        if name in _PLAIN_ATTRIBUTES:
            object.__setattr__(self, name, value)
        else:
            super().__setattr__(name, value)

    def forward(self, images: torch.Tensor) -> torch.Tensor:
        """The face embedding (the neck's output), before L2 normalisation."""
        return self.embedder(images)

    def training_step(self, batch: dict, batch_idx: int) -> torch.Tensor:
        if any(getattr(regularizer, "requires_input_grad", False) for regularizer in self.regularizers.values()):
            batch["image"].requires_grad_(True)
        embeddings = self.embedder(batch["image"])
        margin = self.margin_policy(batch=batch, embeddings=embeddings, module=self) if self.margin_policy else None
        output = self.head(embeddings, batch["label"], margin=margin)
        classification = self.loss(output.logits, batch["label"])
        if "loss_weight" in batch:  # group re-weighting: the loss gives one value per sample (data.group_sampling)
            weight = batch["loss_weight"]
            classification = (weight * classification).sum() / weight.sum()
        terms = {"classification": classification, **output.aux_losses}
        for name, regularizer in self.regularizers.items():
            terms[name] = regularizer.weight * regularizer(
                batch=batch, embeddings=embeddings, logits=output.logits, module=self
            )
        loss = functools.reduce(operator.add, terms.values())  # not sum(): its 0 + tensor is one more operator a step
        finite = torch.isfinite(loss)  # kept on the device: reading it here would wait for the GPU (no grad: a bool)
        self._loss_finite = finite if self._loss_finite is None else self._loss_finite & finite
        self._unchecked_batches += 1
        if self._should_log_step():
            self._log_step(loss, terms, len(batch["label"]))
            self._unlogged = None
        else:  # logged after all if training stops after this step (see on_train_batch_end)
            self._unlogged = (loss, terms, len(batch["label"]))
        return loss

    def _log_step(self, loss: torch.Tensor, terms: Mapping[str, torch.Tensor], batch_size: int) -> None:
        """``train/loss`` and ``train/<term>`` of this step, in one ``log_dict`` call (the loss on the progress
        bar when there is one)."""
        if self._has_progress_bar():
            self.log("train/loss", loss, prog_bar=True, batch_size=batch_size)
            values: dict[str, torch.Tensor] = {}
        else:
            values = {"train/loss": loss.detach()}
        values.update({f"train/{name}": value.detach() for name, value in terms.items()})
        self.log_dict(values, batch_size=batch_size)

    def _should_log_step(self) -> bool:
        """Whether this training step's losses are logged: only in the steps whose metrics Lightning hands to the
        loggers (every ``trainer.log_every_n_steps``-th step, and a step after which training stops; one that a
        callback stops is logged in ``on_train_batch_end``), or in every step when a progress bar shows the
        loss. The loggers' curves are the same as when every step is logged; the other steps skip Lightning's
        logging machinery, the largest share of a step's host time on a small model (``python
        bench/training_speed.py --parts overhead``)."""
        trainer = self._trainer
        if trainer is None or self._has_progress_bar():
            return True
        return trainer._logger_connector.should_update_logs

    def _has_progress_bar(self) -> bool:
        """Whether a progress bar shows the loss. Lightning reads a progress-bar value back from the device after
        every step, which on a GPU waits for the queued work, so without a bar the loss is not put there."""
        return self._trainer is not None and self._trainer.progress_bar_callback is not None

    def on_train_batch_end(self, outputs, batch: dict, batch_idx: int) -> None:
        if self._unlogged is not None and self.trainer.should_stop:  # e.g. a callback stopped training here:
            self._log_step(*self._unlogged)  # Lightning hands this step's metrics to the loggers
        self._unlogged = None
        if (batch_idx + 1) % FINITE_CHECK_EVERY == 0:
            self._check_finite_loss()

    def on_train_epoch_end(self) -> None:
        self._check_finite_loss()

    def _check_finite_loss(self) -> None:
        """Raise if a training loss since the last check was not finite: one read of the device-side flag every
        :data:`FINITE_CHECK_EVERY` steps and at the end of each epoch, instead of a synchronisation in every step."""
        finite, self._loss_finite = self._loss_finite, None
        batches, self._unchecked_batches = self._unchecked_batches, 0
        if finite is not None and not bool(finite):
            raise FloatingPointError(
                f"non-finite training loss in the {batches} training batches up to step {self.global_step}"
                f" (epoch {self.current_epoch})"
            )

    def embed(self, images: torch.Tensor) -> torch.Tensor:
        """L2-normalised evaluation embeddings (with flip test-time augmentation when ``tta_flip``)."""
        return normalized_embedding(self.embedder, images, self.tta_flip)

    def embedding_model(self) -> EmbeddingModel:
        """What robustness measurements need of this model: its evaluation embedding and the head's class centres."""
        return EmbeddingModel(self.embed, self.head.weight, float(self.head.scale), self.device)

    def _eval_step(self, stage: str, batch: dict) -> None:
        self._outputs[stage].append(
            {
                "embedding": self.embed(batch["image"]).cpu(),
                "label": batch["label"].cpu(),
                "group": batch["group"].cpu(),
                "index": batch["index"].cpu(),
            }
        )

    def validation_step(self, batch: dict, batch_idx: int) -> None:
        self._eval_step("val", batch)

    def test_step(self, batch: dict, batch_idx: int) -> None:
        self._eval_step("test", batch)

    def on_validation_epoch_start(self) -> None:
        self.evaluations["val"] = {}

    def on_test_epoch_start(self) -> None:
        self.evaluations["test"] = {}

    def on_validation_epoch_end(self) -> None:
        self._evaluate("val")

    def on_test_epoch_end(self) -> None:
        self._evaluate("test")

    @torch.no_grad()
    def evaluate_loader(self, stage: str, loader, datamodule: pl.LightningDataModule) -> None:
        """Evaluate ``stage`` from ``loader`` outside Lightning's evaluation loops (e.g. the test split inside
        the fit loop): each batch is moved to the device and transformed as Lightning does, then :meth:`_evaluate`."""
        self.evaluations[stage] = {}
        was_training = self.training
        self.eval()
        for batch in loader:
            self._eval_step(
                stage, datamodule.on_after_batch_transfer(self.transfer_batch_to_device(batch, self.device, 0), 0)
            )
        self._evaluate(stage)
        self.train(was_training)

    def _evaluate(self, stage: str) -> None:
        outputs, self._outputs[stage] = self._outputs[stage], []
        if self.trainer.sanity_checking or not outputs:
            return
        # Under DDP every rank gathers the whole split and computes the same metrics (fairnas.training.distributed).
        split = gather_split({key: torch.cat([o[key] for o in outputs]) for key in outputs[0]}, self.device)
        metrics = face_identification_metrics(
            split["embedding"],
            split["label"],
            group_names(split["group"].numpy(), self.group_order),
            group_order=self.group_order,
            rank_by=self.rank_by,
            normalize=False,
        )
        fitting = self.trainer.state.fn == TrainerFn.FITTING
        self.evaluations[stage].update(metrics, epoch=self.current_epoch + 1 if fitting else self.current_epoch)
        self.log_dict(
            {f"{stage}/{name}": float(value) for name, value in metrics.items()}, sync_dist=self.trainer.world_size > 1
        )  # equal on every rank: the mean is the value

    def configure_optimizers(self):
        optimizer = self.optimizer_factory(params=self.parameters())
        if self.scheduler_factory is None:
            return optimizer
        steps_per_epoch = math.ceil(self.trainer.estimated_stepping_batches / max(1, self.trainer.max_epochs))
        scheduler = self.scheduler_factory(
            optimizer, steps_per_epoch=steps_per_epoch, horizon_epochs=self.horizon_epochs or self.trainer.max_epochs
        )
        if scheduler is None:
            return optimizer
        return {"optimizer": optimizer, "lr_scheduler": {"scheduler": scheduler, "interval": "step"}}
