"""A study's settings, checked before anything is written: one line each naming the ``study.<key>`` and what is
allowed. Here are the study's own keys (its stages, claims, reserved seeds, pool, default model and the training
overrides every run applies); each stage it runs checks its own section (:class:`~fairnas.study.stages.Stage`'s
``check``)."""

from __future__ import annotations

from collections.abc import Sequence

from omegaconf import DictConfig, OmegaConf

from fairnas.search.parallel import checked_pool
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
    checked_pool(STUDY, study)  # the pool's keys, as search.py checks them
    if not isinstance(study.default_model.name, str) or not study.default_model.name:
        STUDY.fail("default_model.name", study.default_model.name, "a model name")
    check_composes(base, "the study's training overrides")
    default = override_list(study.default_model.overrides, "default_model.overrides")
    check_composes([*base, *default], "study.default_model.overrides")
    for stage in STAGES.values():
        if stage.name in stages and stage.check is not None:
            stage.check(study, base)
