"""A study's settings, checked before anything is written: one line each naming the ``study.<key>`` and what is
allowed (unknown or missing stages, too few seeds for a standard error, a transfer config or model that does not
compose, a search budget below one full trial, claim settings out of range, ...)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from hydra.errors import HydraException
from omegaconf import DictConfig, OmegaConf

from fairnas.config import compose_config, resolve_space_path
from fairnas.study.claims import ClaimSettings
from fairnas.study.settings import hand_designed_models, search_settings
from fairnas.study.stages import check_stages
from fairnas.tasks.checks import check_training_settings
from fairnas.tasks.search import FaceSearch
from fairnas.training.build import instantiate_partial
from fairnas.validation import Settings, is_integer

STUDY = Settings("study.")
MODEL_KINDS = ("default", "searched", "hand-designed")
"""The kinds of model a study compares (``study.mitigations.models`` and ``study.transfer.models`` name some)."""


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
    _kinds(study.mitigations.models, "mitigations.models")
    transferred = _kinds(study.transfer.models, "transfer.models")
    if "searched" not in transferred or len(transferred) < 2:
        raise ValueError(f"study.transfer.models={transferred}: the searched model and at least one baseline kind")
    _seeds(study.noise.seeds, "noise.seeds", 2)
    _seeds(study.sweep.seeds, "sweep.seeds", 1)
    final_seeds = _seeds(study.final.seeds, "final.seeds", 2)
    _seeds(study.final.hand_designed, "final.hand_designed", 0)
    hand_designed_seeds = final_seeds
    if study.final.hand_designed_seeds is not None:
        hand_designed_seeds = _seeds(study.final.hand_designed_seeds, "final.hand_designed_seeds", 2)
        if hand_designed_seeds > final_seeds:
            raise ValueError(
                f"study.final.hand_designed_seeds={hand_designed_seeds} must be at most study.final.seeds={final_seeds}"
            )
    if "hand-designed" in study.mitigations.models and study.mitigations.seeds > hand_designed_seeds:
        raise ValueError(
            f"study.mitigations.seeds={study.mitigations.seeds} must be at most study.final.hand_designed_seeds="
            f"{hand_designed_seeds} (the hand-designed model's baselines)"
        )
    for stage in ("mitigations", "robustness", "transfer"):
        seeds = _seeds(study[stage].seeds, f"{stage}.seeds", 2)
        if stage != "robustness" and stage in stages and seeds > final_seeds:
            raise ValueError(f"study.{stage}.seeds={seeds} must be at most study.final.seeds={final_seeds}")
    _compose(base, "the study's training overrides")
    check_training_settings(compose_config("train", list(base), output_dir="."))
    _compose([*base, *study.default_model.overrides], "study.default_model.overrides")
    if "transfer" in stages:
        _compose([*base, *study.transfer.overrides], "study.transfer.overrides")
    for name in study.mitigations.names if "mitigations" in stages else ():
        _compose(
            [*base, f"mitigation={name}", *(study.mitigations.overrides or {}).get(name, [])],
            f"study.mitigations.names ({name})",
        )
    if "robustness" in stages:
        _compose([*base, "regularizer=robustness_bias", *study.robustness.overrides], "study.robustness.overrides")
    if "sweep" in stages:
        for name, overrides in hand_designed_models(study).items():
            _compose([*base, *overrides], f"study.sweep model {name!r}")
    if "search" in stages:
        check_search(search_settings(study))


def _kinds(value: Any, key: str) -> list[str]:
    """``study.<key>``: model kinds, each once."""
    kinds = list(value)
    if not kinds or any(kind not in MODEL_KINDS for kind in kinds) or len(set(kinds)) != len(kinds):
        raise ValueError(f"study.{key}={kinds}: each once, from {list(MODEL_KINDS)}")
    return kinds


def check_search(settings: dict[str, Any]) -> None:
    """The search settings as ``search.py`` checks them, and a budget that affords a full trial."""
    try:
        values = FaceSearch.from_mapping(settings).settings
        resolve_space_path(settings["space"])
    except (ValueError, FileNotFoundError) as error:
        raise ValueError(f"study.search: {str(error).splitlines()[0]}") from None
    if values.total_budget is not None and values.total_budget < values.max_budget:
        raise ValueError(
            f"study.search.total_budget={values.total_budget:g} is below one full trial "
            f"(study.search.max_budget={values.max_budget:g} epochs)"
        )


def _seeds(value: Any, key: str, minimum: int) -> int:
    """``study.<key>``: a number of seeds, at least ``minimum`` (two: a standard error needs two)."""
    if not is_integer(value) or value < minimum:
        STUDY.fail(key, value, f"an integer >= {minimum}{' (a standard error needs two)' if minimum == 2 else ''}")
    return int(value)


def _compose(overrides: Sequence[str], what: str) -> None:
    """The training config of ``overrides`` composes and its data table takes its arguments (e.g. no synthetic-set
    sizes left on a real data set)."""
    try:
        cfg = compose_config("train", list(overrides), output_dir=".")
        instantiate_partial(cfg.data.table, "data.table")
    except (HydraException, ValueError) as error:
        raise ValueError(f"{what}: {str(error).splitlines()[0]}") from None
