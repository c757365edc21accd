"""``train(cfg)``: build everything from a composed Hydra config, fit, evaluate, write ``metrics.json``.

``train.py`` (the CLI), the tests and the search all call this one function.
"""

from __future__ import annotations

import logging
import warnings
from pathlib import Path

import pytorch_lightning as pl
from hydra.utils import instantiate
from omegaconf import DictConfig, OmegaConf
from torch import nn

from fairnas.data import FaceDataModule
from fairnas.io import write_json_atomic, write_text_atomic
from fairnas.losses import build_classification_loss
from fairnas.models import FaceEmbedder, build_head
from fairnas.robustness.evaluation import RobustnessBiasEvaluation
from fairnas.training.module import FaceRecognitionModule

log = logging.getLogger(__name__)
# Lightning 2.6 calls a deprecated torch pytree API on every step; the warning is upstream's and not actionable.
warnings.filterwarnings("ignore", message=r".*isinstance\(treespec, LeafSpec\)")


def train(cfg: DictConfig) -> dict:
    """Train and evaluate one model; returns ``{"val": {...}, "test": {...}, "epochs_trained": n}``.

    Every input is checked while objects are built, before the first training step. With ``cfg.resume_from``
    set to a checkpoint, training continues from it up to ``trainer.max_epochs``.
    """
    output_dir = Path(cfg.output_dir)
    output_dir.mkdir(parents=True, exist_ok=True)
    pl.seed_everything(cfg.seed, workers=True)
    module, datamodule = build_model(cfg)
    loggers = [instantiate(node) for node in (cfg.get("logger") or {}).values()]
    trainer: pl.Trainer = instantiate(
        cfg.trainer,
        logger=loggers or False,
        callbacks=[instantiate(cfg.checkpoint, dirpath=str(output_dir / "checkpoints"))],
        default_root_dir=str(output_dir),
    )
    write_text_atomic(output_dir / "config.yaml", OmegaConf.to_yaml(cfg, resolve=True))
    for logger in loggers:
        logger.log_hyperparams(OmegaConf.to_container(cfg, resolve=True))

    trainer.fit(module, datamodule=datamodule, ckpt_path=cfg.get("resume_from"))
    if module.evaluations.get("val", {}).get("epoch") != trainer.current_epoch:
        trainer.validate(module, datamodule=datamodule, verbose=False)
    trainer.test(module, datamodule=datamodule, verbose=False)

    metrics = {
        "val": module.evaluations["val"],
        "test": module.evaluations["test"],
        "epochs_trained": trainer.current_epoch,
        "num_classes": datamodule.num_classes,
        "group_order": datamodule.group_order,
    }
    write_json_atomic(output_dir / "metrics.json", metrics)
    _close_loggers(loggers)
    log.info("val error %.4f rank disparity %.4f | test error %.4f rank disparity %.4f -> %s",
             metrics["val"]["error"], metrics["val"]["rank_disparity"],
             metrics["test"]["error"], metrics["test"]["rank_disparity"], output_dir / "metrics.json")
    return metrics


def build_embedder(cfg: DictConfig) -> nn.Module:
    """Backbone + embedding neck of a training config (untrained), inside the mitigation's ``embedder`` wrapper
    when it has one (SensitiveNets: a removal network on the frozen pre-trained embedder)."""
    embedder = FaceEmbedder(instantiate(cfg.backbone), embedding_dim=cfg.embedding_dim, dropout=cfg.dropout)
    wrapper = (cfg.get("mitigation") or {}).get("embedder")
    return instantiate(wrapper, embedder=embedder) if wrapper else embedder


def build_model(cfg: DictConfig) -> tuple[FaceRecognitionModule, FaceDataModule]:
    """The LightningModule and data module a training config describes (also rebuilds a saved run's model)."""
    # Cheap parts first, so their errors come before the data set is rendered or indexed.
    embedder = build_embedder(cfg)
    loss = build_classification_loss(**cfg.loss)
    optimizer = instantiate(cfg.optimizer)
    regularizers = {name: instantiate(node) for name, node in (cfg.get("regularizer") or {}).items()}
    mitigation = cfg.get("mitigation") or {}
    margin_policy = instantiate(mitigation.margin_policy) if mitigation.get("margin_policy") else None
    evaluators = {}
    if cfg.eval.get("robustness_bias"):
        evaluators["robustness_bias"] = RobustnessBiasEvaluation(**cfg.eval.robustness)
    datamodule = instantiate(cfg.data, seed=cfg.seed)
    module = FaceRecognitionModule(
        embedder=embedder,
        head=build_head(embedding_dim=cfg.embedding_dim, num_classes=datamodule.num_classes, **cfg.head),
        loss=loss,
        optimizer=optimizer,
        scheduler=OmegaConf.to_container(cfg.scheduler, resolve=True) if cfg.get("scheduler") else None,
        group_order=datamodule.group_order,
        regularizers=regularizers,
        tta_flip=cfg.eval.tta_flip,
        rank_by=cfg.eval.rank_by,
        evaluators=evaluators,
        margin_policy=margin_policy,
    )
    return module, datamodule


def _close_loggers(loggers: list) -> None:
    """Finish W&B runs so that the next ``train`` call in the same process starts a new one."""
    for logger in loggers:
        if isinstance(logger, pl.loggers.WandbLogger):
            logger.experiment.finish()
