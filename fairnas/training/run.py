"""One training run: build everything from a composed config, fit, evaluate, write ``metrics.json``. The train
command (:mod:`fairnas.tasks.train`), the tests, the search and the comparison all call :func:`train`;
:func:`train_once` trains a run in its folder, or reads it back when it finished there already (the runner of
``compare.py``'s and the study's runs)."""

from __future__ import annotations

import copy
import errno
import json
import logging
import shutil
import warnings
from pathlib import Path
from typing import Any

import pytorch_lightning as pl
import torch
from hydra.utils import instantiate
from omegaconf import DictConfig, OmegaConf, open_dict
from pytorch_lightning.plugins.io import TorchCheckpointIO

from fairnas.config import CONFIG_DIR, compose_config
from fairnas.io import atomic_path, write_json_atomic, write_text_atomic
from fairnas.mitigations import GroupMeasurement
from fairnas.reporting import Report
from fairnas.run_lock import locks_output_dir
from fairnas.training.build import CHECKPOINT_DIR, LAST_CHECKPOINT, build_model, read_checkpoint
from fairnas.training.epoch_test import TestEveryEpoch
from fairnas.training.profiler import trainer_profiler
from fairnas.training.settings import supported_precision

log = logging.getLogger(__name__)
# Lightning 2.6 calls a deprecated torch pytree API on every step; the warning is upstream's and not actionable.
warnings.filterwarnings("ignore", message=r".*isinstance\(treespec, LeafSpec\)")

RESUME_AUTO = "auto"
CHECKPOINT_HEADROOM = 64 * 2**20  # bytes: a failed checkpoint write with less free space than this is a full disk
BASELINE_DIR = "baseline"
# Settings naming a checkpoint or run folder that a run reads, in the order they are read: the one it continues from
# and those whose weights it starts from (SensitiveNets sets init_from to its mitigation.checkpoint: that file is read
# once, named by mitigation.checkpoint). resume=auto's own last.ckpt is read after them (own_last_checkpoint).
CHECKPOINT_SETTINGS = ("resume_from", "mitigation.checkpoint", "init_from")
RUN_RECORD = "compare_run.json"  # the overrides a run of train_once trained with


class AtomicCheckpointIO(TorchCheckpointIO):
    """Checkpoints written beside their path and renamed onto it (:func:`fairnas.io.atomic_path`): a run killed
    while saving keeps its previous ``last.ckpt``, the end of its last finished epoch, to resume from."""

    def save_checkpoint(self, checkpoint: dict[str, Any], path: str | Path, storage_options: Any = None) -> None:
        """Torch reports a full disk as a failed write of its archive (a RuntimeError); it is raised as the
        ``OSError(ENOSPC)`` it is, so that a search does not record the trial as crashed."""
        try:
            with atomic_path(path) as tmp:
                torch.save(checkpoint, tmp)
        except RuntimeError as error:
            free = shutil.disk_usage(Path(path).parent).free
            if free < CHECKPOINT_HEADROOM:
                message = f"no space left to write checkpoint '{path}' ({free} bytes free)"
                raise OSError(errno.ENOSPC, message) from error
            raise


@locks_output_dir
def train(cfg: DictConfig) -> dict:
    """Train and evaluate one model; returns ``{"val": {...}, "test": {...}, "epochs_trained": n, ...}`` (``test``
    is None with ``eval.test=false``).

    Every checkpoint the run reads is read first, the other inputs while objects are built: before anything is
    written and before the first training step. Training continues from the checkpoint :func:`check_checkpoints`
    returns up to ``trainer.max_epochs``. SensitiveNets without ``mitigation.checkpoint`` first trains the baseline
    it starts from (:func:`with_trained_baseline`).
    """
    checkpoint = check_checkpoints(cfg)
    if needs_baseline(cfg):
        cfg = with_trained_baseline(cfg)
    output_dir = Path(cfg.output_dir)
    output_dir.mkdir(parents=True, exist_ok=True)
    pl.seed_everything(cfg.seed, workers=True)
    callbacks = [instantiate(node) for node in (cfg.get("callbacks") or {}).values()]
    if cfg.eval.get("robustness_bias"):
        callbacks.append(instantiate(cfg.eval.robustness))  # fairnas.robustness.RobustnessBiasEvaluation
    if cfg.eval.get("test_every_epoch"):
        callbacks.append(TestEveryEpoch())
    module, datamodule = build_model(cfg)
    if isinstance(module.margin_policy, pl.Callback):  # Angular measures its group during training
        callbacks.append(module.margin_policy)
    for callback in callbacks:
        if isinstance(callback, GroupMeasurement):
            callback.check_validation_interval(cfg.trainer.get("check_val_every_n_epoch", 1))
    trainer: pl.Trainer = instantiate(  # before anything is written: a bad trainer setting stops here
        cfg.trainer,
        precision=supported_precision(cfg.trainer.precision),
        profiler=trainer_profiler(cfg.trainer.get("profiler")),
        logger=False,
        callbacks=callbacks,
        default_root_dir=str(output_dir),
        plugins=[AtomicCheckpointIO()],
    )
    write_text_atomic(output_dir / "config.yaml", OmegaConf.to_yaml(cfg, resolve=True))
    with Report(cfg) as report:
        trainer.loggers = report.loggers
        trainer.fit(module, datamodule=datamodule, ckpt_path=checkpoint)
        if module.evaluations.get("val", {}).get("epoch") != trainer.current_epoch:
            trainer.validate(module, datamodule=datamodule, verbose=False)
        if cfg.eval.get("test", True) and not cfg.eval.get("test_every_epoch"):
            trainer.test(module, datamodule=datamodule, verbose=False)  # (else the last epoch evaluated it)

    metrics = {
        "val": module.evaluations["val"],
        "test": module.evaluations.get("test"),
        "epochs_trained": trainer.current_epoch,
        "num_classes": datamodule.num_classes,
        "group_order": datamodule.group_order,
        "init_from": cfg.get("init_from"),
        "mitigation": next((c.summary() for c in callbacks if isinstance(c, GroupMeasurement)), None),
        "torch_threads": torch.get_num_threads(),  # what its wall time was measured on (a pool may set it)
    }
    if trainer.is_global_zero:  # every DDP rank computed the same metrics
        write_json_atomic(output_dir / "metrics.json", metrics)
    log.info(
        "%s -> %s",
        " | ".join(
            f"{split} error {metrics[split]['error']:.4f} rank disparity {metrics[split]['rank_disparity']:.4f}"
            for split in ("val", "test")
            if metrics[split] is not None
        ),
        output_dir / "metrics.json",
    )
    return metrics


def train_once(run_dir: Path, overrides: list[str], same_config: bool = False) -> dict:
    """Train one run in ``run_dir``, or read its metrics back when an earlier invocation finished it with the same
    overrides (with ``same_config``: with overrides that compose the same training config, found by the caller)."""
    record = run_dir / RUN_RECORD
    if record.is_file():
        if not same_config and json.loads(record.read_text())["overrides"] != overrides:
            raise ValueError(
                f"output_dir: '{run_dir}' holds a run with other overrides; use a new output_dir or remove that run"
            )
        if (run_dir / "metrics.json").is_file():
            return json.loads((run_dir / "metrics.json").read_text())
    write_json_atomic(record, {"overrides": overrides})
    log.info("training %s", run_dir)
    return train(compose_config("train", overrides, output_dir=run_dir))


def check_checkpoints(cfg: DictConfig) -> str | None:
    """Read every checkpoint the run reads (:func:`~fairnas.training.build.read_checkpoint`), so that a bad one stops it
    with one line before a folder, logger or W&B run is made. Returns the checkpoint file training continues from
    (Lightning restores it in ``fit``): ``resume_from``'s, or with ``resume=auto`` this run's own last checkpoint
    (:func:`own_last_checkpoint`); ``None``: start afresh."""
    check_resume_settings(cfg)
    checkpoint = read_checkpoint_settings(cfg).get("resume_from") or own_last_checkpoint(cfg)
    return str(checkpoint) if checkpoint else None


def check_resume_settings(cfg: DictConfig) -> None:
    """``resume`` is null or ``auto``, and ``auto`` comes without ``resume_from``."""
    resume = cfg.get("resume")
    if resume not in (None, RESUME_AUTO):
        raise ValueError(f"resume={resume!r}; allowed: null, {RESUME_AUTO}")
    if resume == RESUME_AUTO and cfg.get("resume_from"):
        raise ValueError(f"resume={RESUME_AUTO} conflicts with resume_from={cfg.resume_from}; set one of them")


def read_checkpoint_settings(cfg: DictConfig) -> dict[str, Path]:
    """Setting -> checkpoint file of every :data:`CHECKPOINT_SETTINGS` entry that is set, each read; a path that two
    settings name is read once."""
    files, read = {}, {}
    for key in CHECKPOINT_SETTINGS:
        path = OmegaConf.select(cfg, key)
        if path:
            if str(path) not in read:  # (as text: a list, which the reader refuses, is no dictionary key)
                read[str(path)] = read_checkpoint(path, key=key)[0]
            files[key] = read[str(path)]
    return files


def own_last_checkpoint(cfg: DictConfig) -> Path | None:
    """With ``resume=auto``, this run's own ``<output_dir>/checkpoints/last.ckpt`` when it exists (an interrupted run),
    read; else ``None``."""
    last = Path(cfg.output_dir) / CHECKPOINT_DIR / LAST_CHECKPOINT
    if cfg.get("resume") != RESUME_AUTO or not last.is_file():
        return None
    return read_checkpoint(last, key=f"resume={RESUME_AUTO}")[0]


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
