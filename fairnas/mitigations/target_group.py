"""Which protected group a mitigation acts on: named in config, read from an earlier run, or measured during training
from the model's own validation accuracies (thesis Sec. 4.5.3).

Flipped acts on the group with the better accuracy, Angular on the group with the worse one. The group is

- named directly (``mitigation.group``);
- read from the validation accuracies per group in the ``metrics.json`` of an earlier run on the same data, typically
  the unmitigated baseline of the same model and seed (``mitigation.reference_metrics``, what ``compare.py`` passes);
- or, with neither, measured by the mitigation itself (:class:`GroupMeasurement`): after the validation of epoch
  ``warmup_epochs`` (1 = the first) the model's own per-group validation accuracies choose it, and a mitigation that
  adapts (Angular, as Wang & Deng adapt margins to the groups' accuracies) measures again after every later epoch.
  Until then the mitigation does nothing. The chosen groups are logged (``mitigation/group``, the group's index in
  the group order), kept in the checkpoint (a resumed or continued run goes on with them) and written to
  ``metrics.json`` (``mitigation``).

The validation split is used so that the test split stays untouched by every choice made in training. Ties go to
the first group in the group order.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pytorch_lightning as pl
from pytorch_lightning.trainer.states import TrainerFn

from fairnas.validation import Settings

log = logging.getLogger(__name__)
REFERENCE_SPLIT = "val"


def pick_group(accuracies: Mapping[str, float], group_order: Sequence[str], *, best: bool, source: str) -> str:
    """The group of ``group_order`` with the highest (``best``) or lowest accuracy (``accuracy/<group>`` keys)."""
    values = {group: accuracies.get(f"accuracy/{group}") for group in group_order}
    missing = [group for group, value in values.items() if value is None]
    if missing:
        raise ValueError(f"{source} has no {REFERENCE_SPLIT} accuracy for groups {missing}")
    pick = max if best else min
    return pick(values, key=values.__getitem__)


def group_by_accuracy(metrics_path: str | Path, *, best: bool) -> str:
    """The group with the highest (``best``) or lowest validation accuracy in a run's ``metrics.json``."""
    path = Path(metrics_path).expanduser()
    if not path.is_file():
        raise FileNotFoundError(f"mitigation.reference_metrics: '{path}' does not exist")
    metrics = json.loads(path.read_text())
    return pick_group(
        metrics[REFERENCE_SPLIT], metrics["group_order"], best=best, source=f"mitigation.reference_metrics: '{path}'"
    )


class GroupMeasurement(pl.Callback):
    """The group a mitigation acts on (:attr:`group`; None until measured), as the module docstring describes.

    Args:
        group: the group, or None to read it from ``reference_metrics`` or else to measure it.
        reference_metrics: ``metrics.json`` of an earlier run on the same data.
        best: act on the group with the highest (True, Flipped) or lowest (False, Angular) accuracy.
        warmup_epochs: epochs trained before the first measurement (>= 1).
        every_epoch: measure again after every later epoch (else the first measurement stays).
    """

    def __init__(
        self,
        group: str | None,
        reference_metrics: str | Path | None,
        *,
        best: bool,
        warmup_epochs: int = 1,
        every_epoch: bool = False,
    ):
        Settings("mitigation.").integer("warmup_epochs", warmup_epochs, minimum=1)
        if group is None and reference_metrics is not None:
            group = group_by_accuracy(reference_metrics, best=best)
        self.group = None if group is None else str(group)
        self.measures = group is None
        self.best, self.warmup_epochs, self.every_epoch = best, warmup_epochs, every_epoch
        self.measurements: list[dict[str, Any]] = []

    def check_validation_interval(self, every_n_epochs: int) -> None:
        """A measured group needs the validation of every epoch from ``warmup_epochs`` on; a run that validates
        less often (``trainer.check_val_every_n_epoch``, e.g. a search trial's) would never or rarely measure it."""
        if self.measures and every_n_epochs != 1:
            raise ValueError(
                f"trainer.check_val_every_n_epoch={every_n_epochs}: the mitigation measures its group "
                "from the validation after every epoch; set it to 1, or name the group "
                "(mitigation.group or mitigation.reference_metrics)"
            )

    def on_validation_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        epoch = trainer.current_epoch + 1  # epochs trained
        due = epoch >= self.warmup_epochs and (self.group is None or self.every_epoch)
        if not self.measures or not due or trainer.sanity_checking or trainer.state.fn != TrainerFn.FITTING:
            return
        group_order = list(pl_module.group_order)
        self.group = pick_group(
            pl_module.evaluations[REFERENCE_SPLIT],
            group_order,
            best=self.best,
            source=f"the {REFERENCE_SPLIT} metrics of epoch {epoch}",
        )
        self.measurements.append({"epoch": epoch, "group": self.group})
        log.info(
            "mitigation: group %s measured after epoch %d (%s validation accuracy)",
            self.group,
            epoch,
            "highest" if self.best else "lowest",
        )
        for logger in trainer.loggers:
            logger.log_metrics({"mitigation/group": float(group_order.index(self.group))}, step=trainer.global_step)

    def summary(self) -> dict[str, Any]:
        """What ``metrics.json`` records: the group in use at the end and every measurement."""
        return {"group": self.group, "measured": self.measures, "measurements": list(self.measurements)}

    def state_dict(self) -> dict[str, Any]:
        return {"group": self.group, "measurements": list(self.measurements)}

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        if self.measures:
            self.group, self.measurements = state_dict["group"], list(state_dict["measurements"])
