"""Distances of a split's probes to the decision boundary, and the robustness-bias evaluation callback of training."""

from __future__ import annotations

import logging
from collections.abc import Mapping

import numpy as np
import pytorch_lightning as pl
import torch
from pytorch_lightning.trainer.states import TrainerFn
from torch.utils.data import DataLoader, Subset

from fairnas.metrics import group_names
from fairnas.robustness.bias import robustness_bias_report
from fairnas.robustness.estimators import DistanceEstimator
from fairnas.robustness.probes import ProbeSet, build_probe_set, check_probe_settings

log = logging.getLogger(__name__)


def measure_distances(
    probes: ProbeSet, estimators: Mapping[str, DistanceEstimator], *, batch_size: int = 64
) -> dict[str, np.ndarray]:
    """Distance of every probe to the boundary of ``probes.classifier``, per estimator name, in pixel units."""
    classifier = probes.classifier
    device = classifier.centres.device
    loader = DataLoader(Subset(probes.dataset, probes.indices.tolist()), batch_size=batch_size)
    parts: dict[str, list[np.ndarray]] = {name: [] for name in estimators}
    done = 0
    for batch in loader:
        pixels = classifier.to_pixels(batch["image"].to(device))
        labels = torch.as_tensor(probes.labels[done : done + len(pixels)], device=device)
        for name, estimator in estimators.items():
            parts[name].append(estimator(classifier, pixels, labels).cpu().numpy())
        done += len(pixels)
        log.info("distances to the boundary: %d/%d probes", done, len(probes.indices))
    return {name: np.concatenate(values) for name, values in parts.items()}


class RobustnessBiasEvaluation(pl.Callback):
    """Adds robustness bias to a validation/test evaluation of training (``eval.robustness_bias=true``).

    At the end of each evaluation of :class:`~fairnas.training.module.FaceRecognitionModule`, this callback adds
    ``robustness_bias`` (max over groups of |sigma|, thesis eq. 2.3) and ``robustness_sigma/<group>``,
    ``robustness_auc/<group>`` from one distance ``estimator`` on a seeded subset of ``max_probes`` probes of the
    split (:mod:`fairnas.robustness.probes`) to the module's ``evaluations`` and to the loggers. Attacks cost far
    more than ranking, so unless ``every_epoch`` it runs only after the last training epoch and on test.
    """

    def __init__(
        self,
        estimator: DistanceEstimator,
        max_probes: int | None = 256,
        gallery_images: int = 1,
        batch_size: int = 64,
        every_epoch: bool = False,
        seed: int = 0,
    ) -> None:
        check_probe_settings(gallery_images, max_probes)
        self.estimator = estimator
        self.max_probes, self.gallery_images, self.batch_size = max_probes, gallery_images, batch_size
        self.every_epoch, self.seed = every_epoch, seed

    def on_validation_epoch_end(self, trainer: pl.Trainer, module: pl.LightningModule) -> None:
        last_epoch = module.current_epoch + 1 >= trainer.max_epochs
        fitting = trainer.state.fn == TrainerFn.FITTING
        if not trainer.sanity_checking and (not fitting or self.every_epoch or last_epoch):
            self._evaluate(trainer, module, "val")

    def on_test_epoch_end(self, trainer: pl.Trainer, module: pl.LightningModule) -> None:
        self._evaluate(trainer, module, "test")

    def _evaluate(self, trainer: pl.Trainer, module: pl.LightningModule, stage: str) -> None:
        dataset = trainer.datamodule.dataset(stage)
        with torch.inference_mode(False), torch.enable_grad():  # attacks need input gradients
            probes = build_probe_set(
                module.embedding_model(),
                dataset,
                split=stage,
                gallery_images=self.gallery_images,
                max_probes=self.max_probes,
                seed=self.seed,
                batch_size=self.batch_size,
            )
            distances = measure_distances(probes, {"estimator": self.estimator}, batch_size=self.batch_size)
        groups = group_names(probes.groups, module.group_order)
        metrics = robustness_bias_report(distances["estimator"], groups, module.group_order).metrics()
        module.evaluations[stage].update(metrics)
        module.log_dict({f"{stage}/{name}": float(value) for name, value in metrics.items()})
