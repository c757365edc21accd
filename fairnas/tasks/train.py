"""``python train.py`` / ``fairnas-train``: build everything from a composed config, fit, evaluate, write
``metrics.json``. The CLI, the tests, the search and the comparison all call :func:`train`."""

from __future__ import annotations

import copy
import logging
import warnings
from pathlib import Path
from typing import Any

import pytorch_lightning as pl
import torch
from hydra.utils import instantiate
from omegaconf import DictConfig, OmegaConf, open_dict
from pytorch_lightning.plugins.io import TorchCheckpointIO

from fairnas.config import CONFIG_DIR
from fairnas.io import atomic_path, write_json_atomic, write_text_atomic
from fairnas.mitigations import GroupMeasurement
from fairnas.tasks.cli import hydra_command
from fairnas.tasks.reporting import Report
from fairnas.tasks.checks import supported_precision
from fairnas.tasks.runs import CHECKPOINT_DIR, LAST_CHECKPOINT, build_model

log = logging.getLogger(__name__)
# Lightning 2.6 calls a deprecated torch pytree API on every step; the warning is upstream's and not actionable.
warnings.filterwarnings("ignore", message=r".*isinstance\(treespec, LeafSpec\)")

RESUME_AUTO = "auto"
BASELINE_DIR = "baseline"


class AtomicCheckpointIO(TorchCheckpointIO):
    """Checkpoints written beside their path and renamed onto it (:func:`fairnas.io.atomic_path`): a run killed
    while saving keeps its previous ``last.ckpt``, the end of its last finished epoch, to resume from."""

    def save_checkpoint(self, checkpoint: dict[str, Any], path: str | Path, storage_options: Any = None) -> None:
        with atomic_path(path) as tmp:
            torch.save(checkpoint, tmp)


def train(cfg: DictConfig) -> dict:
    """Train and evaluate one model; returns ``{"val": {...}, "test": {...}, "epochs_trained": n, ...}`` (``test``
    is None with ``eval.test=false``).

    Every input is checked while objects are built, before the first training step. Training continues from
    :func:`resume_checkpoint` up to ``trainer.max_epochs``. SensitiveNets without ``mitigation.checkpoint`` first
    trains the baseline it starts from (:func:`with_trained_baseline`).
    """
    checkpoint = resume_checkpoint(cfg)
    if needs_baseline(cfg):
        cfg = with_trained_baseline(cfg)
    output_dir = Path(cfg.output_dir)
    output_dir.mkdir(parents=True, exist_ok=True)
    pl.seed_everything(cfg.seed, workers=True)
    callbacks = [instantiate(node) for node in (cfg.get("callbacks") or {}).values()]
    if cfg.eval.get("robustness_bias"):
        callbacks.append(instantiate(cfg.eval.robustness))  # fairnas.robustness.RobustnessBiasEvaluation
    module, datamodule = build_model(cfg)
    if isinstance(module.margin_policy, pl.Callback):  # Angular measures its group during training
        callbacks.append(module.margin_policy)
    for callback in callbacks:
        if isinstance(callback, GroupMeasurement):
            callback.check_validation_interval(cfg.trainer.get("check_val_every_n_epoch", 1))
    write_text_atomic(output_dir / "config.yaml", OmegaConf.to_yaml(cfg, resolve=True))
    with Report(cfg) as report:
        trainer: pl.Trainer = instantiate(cfg.trainer, precision=supported_precision(cfg.trainer.precision),
                                          logger=report.loggers or False, callbacks=callbacks,
                                          default_root_dir=str(output_dir), plugins=[AtomicCheckpointIO()])
        trainer.fit(module, datamodule=datamodule, ckpt_path=checkpoint)
        if module.evaluations.get("val", {}).get("epoch") != trainer.current_epoch:
            trainer.validate(module, datamodule=datamodule, verbose=False)
        if cfg.eval.get("test", True):
            trainer.test(module, datamodule=datamodule, verbose=False)

    metrics = {
        "val": module.evaluations["val"],
        "test": module.evaluations.get("test"),
        "epochs_trained": trainer.current_epoch,
        "num_classes": datamodule.num_classes,
        "group_order": datamodule.group_order,
        "init_from": cfg.get("init_from"),
        "mitigation": next((c.summary() for c in callbacks if isinstance(c, GroupMeasurement)), None),
    }
    if trainer.is_global_zero:  # every DDP rank computed the same metrics
        write_json_atomic(output_dir / "metrics.json", metrics)
    log.info("%s -> %s", " | ".join(f"{split} error {metrics[split]['error']:.4f} rank disparity "
                                    f"{metrics[split]['rank_disparity']:.4f}" for split in ("val", "test")
                                    if metrics[split] is not None), output_dir / "metrics.json")
    return metrics


def resume_checkpoint(cfg: DictConfig) -> str | None:
    """The checkpoint training continues from: ``resume_from``, or with ``resume=auto`` this run's own
    ``<output_dir>/checkpoints/last.ckpt`` if it exists (an interrupted run); ``None``: start afresh."""
    resume = cfg.get("resume")
    if resume not in (None, RESUME_AUTO):
        raise ValueError(f"resume={resume!r}; allowed: null, {RESUME_AUTO}")
    if resume is None:
        return cfg.get("resume_from")
    if cfg.get("resume_from"):
        raise ValueError(f"resume={RESUME_AUTO} conflicts with resume_from={cfg.resume_from}; set one of them")
    last = Path(cfg.output_dir) / CHECKPOINT_DIR / LAST_CHECKPOINT
    return str(last) if last.is_file() else None


def needs_baseline(cfg: DictConfig) -> bool:
    """Whether ``cfg``'s mitigation starts from a pre-trained run (SensitiveNets) and names none."""
    mitigation = cfg.get("mitigation") or {}
    return "checkpoint" in mitigation and mitigation.checkpoint is None


def with_trained_baseline(cfg: DictConfig) -> DictConfig:
    """``cfg`` starting from its baseline (thesis Sec. 4.5.3: SensitiveNets removes the attribute from a trained
    embedding): trained here first, into ``<output_dir>/baseline``, or reused when its ``metrics.json`` exists."""
    baseline = baseline_config(cfg)
    if (Path(baseline.output_dir) / "metrics.json").is_file():
        log.info("mitigation %s: reusing the baseline in %s", cfg.mitigation.name, baseline.output_dir)
    else:
        build_model(copy.deepcopy(cfg), init_weights=False)  # the mitigation's settings are checked before it trains
        log.info("mitigation %s: training its baseline in %s", cfg.mitigation.name, baseline.output_dir)
        train(baseline)
    cfg = copy.deepcopy(cfg)
    cfg.mitigation.checkpoint = str(Path(baseline.output_dir) / CHECKPOINT_DIR / LAST_CHECKPOINT)
    return cfg


def baseline_config(cfg: DictConfig) -> DictConfig:
    """``cfg`` as ``mitigation=none`` composes it, writing to ``<output_dir>/baseline``: the mitigation and what it
    sets outside ``mitigation`` (conf/mitigation/sensitivenets.yaml: ``init_from``, ``regularizer.<name>``) left out,
    and ``resume_from`` (a checkpoint of the mitigated run); ``resume=auto`` continues an interrupted baseline."""
    baseline = copy.deepcopy(cfg)
    with open_dict(baseline):
        baseline.mitigation = OmegaConf.load(CONFIG_DIR / "mitigation" / "none.yaml").mitigation
        baseline.init_from = None
        baseline.resume_from = None
        baseline.regularizer.pop(cfg.mitigation.name, None)
        baseline.output_dir = str(Path(cfg.output_dir) / BASELINE_DIR)
    return baseline


main = hydra_command(train, "train")
