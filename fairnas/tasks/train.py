"""``python train.py`` / ``fairnas-train``: build everything from a composed config, fit, evaluate, write
``metrics.json``. The CLI, the tests, the search and the comparison all call :func:`train`."""

from __future__ import annotations

import logging
import warnings
from pathlib import Path

import pytorch_lightning as pl
from hydra.utils import instantiate
from omegaconf import DictConfig, OmegaConf

from fairnas.io import write_json_atomic, write_text_atomic
from fairnas.tasks.cli import hydra_command
from fairnas.tasks.reporting import Report
from fairnas.tasks.runs import build_model

log = logging.getLogger(__name__)
# Lightning 2.6 calls a deprecated torch pytree API on every step; the warning is upstream's and not actionable.
warnings.filterwarnings("ignore", message=r".*isinstance\(treespec, LeafSpec\)")


def train(cfg: DictConfig) -> dict:
    """Train and evaluate one model; returns ``{"val": {...}, "test": {...}, "epochs_trained": n, ...}``.

    Every input is checked while objects are built, before the first training step. With ``cfg.resume_from``
    set to a checkpoint, training continues from it up to ``trainer.max_epochs``.
    """
    output_dir = Path(cfg.output_dir)
    output_dir.mkdir(parents=True, exist_ok=True)
    pl.seed_everything(cfg.seed, workers=True)
    callbacks = [instantiate(node) for node in (cfg.get("callbacks") or {}).values()]
    if cfg.eval.get("robustness_bias"):
        callbacks.append(instantiate(cfg.eval.robustness))  # fairnas.robustness.RobustnessBiasEvaluation
    module, datamodule = build_model(cfg)
    write_text_atomic(output_dir / "config.yaml", OmegaConf.to_yaml(cfg, resolve=True))
    with Report(cfg) as report:
        trainer: pl.Trainer = instantiate(cfg.trainer, logger=report.loggers or False, callbacks=callbacks,
                                          default_root_dir=str(output_dir))
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
    log.info("val error %.4f rank disparity %.4f | test error %.4f rank disparity %.4f -> %s",
             metrics["val"]["error"], metrics["val"]["rank_disparity"],
             metrics["test"]["error"], metrics["test"]["rank_disparity"], output_dir / "metrics.json")
    return metrics


main = hydra_command(train, "train")
