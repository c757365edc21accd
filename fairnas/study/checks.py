"""A study's settings, checked before anything is written: one line each naming the ``study.<key>`` and what is
allowed. Here are the study's own keys (its stages, claims, reserved seeds, pool, default model and the training
overrides every run applies); each stage it runs checks its own section (:class:`~fairnas.study.stages.Stage`'s
``check``)."""

from __future__ import annotations

from collections.abc import Sequence

from omegaconf import DictConfig, OmegaConf

from fairnas.study.claims import ClaimSettings
from fairnas.study.settings import STUDY, check_composes, override_list
from fairnas.study.stages import STAGES, check_stages
from fairnas.validation import is_integer


def check_study(cfg: DictConfig, base: Sequence[str]) -> None:
    """Every setting of ``cfg.study`` and every configuration the study will train (composed from ``base``, the
    training overrides every run applies); raises a one-line ValueError."""
    study = cfg.study
    stages = list(study.stages)
    check_stages(stages)
    ClaimSettings.from_mapping(OmegaConf.to_container(study.claims))
    reserved = OmegaConf.to_container(study.reserved_seeds)
    if not isinstance(reserved, list) or not all(is_integer(seed) and seed >= 0 for seed in reserved):
        STUDY.fail("reserved_seeds", reserved, "a list of seeds >= 0, e.g. [0,1,2]")
    check_pool(study)
    if not isinstance(study.default_model.name, str) or not study.default_model.name:
        STUDY.fail("default_model.name", study.default_model.name, "a model name")
    check_composes(base, "the study's training overrides")
    default = override_list(study.default_model.overrides, "default_model.overrides")
    check_composes([*base, *default], "study.default_model.overrides")
    for stage in STAGES.values():
        if stage.name in stages and stage.check is not None:
            stage.check(study, base)


def check_pool(study: DictConfig) -> None:
    """The pool's keys (``study.n_workers``, ``study.dask_*``), with the ranges ``search.py`` allows."""
    STUDY.integer("n_workers", study.n_workers, minimum=1)
    STUDY.positive("dask_timeout", study.dask_timeout, "(seconds)")
    STUDY.boolean("dask_insecure", study.dask_insecure)
    for key in ("dask_address", "dask_scheduler_file", "dask_tls"):
        if study[key] is not None and not isinstance(study[key], str):
            STUDY.fail(key, study[key], "a string or null")
    if study.dask_address is not None and study.dask_scheduler_file is not None:
        raise ValueError("give study.dask_address or study.dask_scheduler_file, not both")
