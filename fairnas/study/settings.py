"""What a study's settings (``cfg.study``) mean beyond their values: the search's settings, the seeds it trains
with, and the sweep's models; and the checks the stages share for their sections (``study.<stage>.<key>``, one line
each: :mod:`fairnas.validation`): seeds, model kinds, and the configurations they train."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, cast

from hydra.errors import HydraException
from omegaconf import DictConfig, OmegaConf

from fairnas.config import compose_config, composition_error, resolve_space_path
from fairnas.search import load_space
from fairnas.search.final import fresh_seeds
from fairnas.training.build import instantiate_partial
from fairnas.validation import SettingError, Settings

STUDY = Settings("study.")
MODEL_KINDS = ("default", "searched", "hand-designed")
"""The kinds of model a study compares (``study.mitigations.models`` and ``study.transfer.models`` name some)."""


def search_settings(study: DictConfig) -> dict[str, Any]:
    """The study's search settings: ``conf/search/local.yaml``'s with ``study.search`` on top (resolved); a
    ``total_budget`` of null is ``full_trials`` times ``max_budget`` epochs, so that the default fits any epochs."""
    defaults = compose_config("search", [], output_dir=".").search
    own = cast(dict[str, Any], OmegaConf.to_container(study.search, resolve=True))
    full_trials = own.pop("full_trials", None)
    merged = OmegaConf.to_container(OmegaConf.merge(defaults, OmegaConf.create(own)), resolve=True)
    merged = cast(dict[str, Any], merged)
    if merged["total_budget"] is None and merged.get("n_trials") is None and full_trials is not None:
        full_trials = Settings("study.search.").integer("full_trials", full_trials, minimum=1)
        merged["total_budget"] = full_trials * merged["max_budget"]
    return merged


def planned_search_seeds(settings: dict[str, Any]) -> set[int]:
    """The seeds a search with ``settings`` trains with, as far as they are known before it runs: its own and its final
    stage's fresh ones (SMAC racing ``n_seeds`` > 1 draws more as it goes; the final comparison then avoids those)."""
    seeds = {int(settings["seed"])}
    final = settings.get("final") or {}
    return seeds | set(fresh_seeds(seeds, final["seeds"])) if final.get("seeds") and final.get("top_k") else seeds


def hand_designed_models(study: DictConfig) -> dict[str, list[str]]:
    """The sweep's models, name -> training overrides: ``study.sweep.models`` when given, else every value of the
    ``study.sweep.vary`` hyperparameters of ``study.sweep.space`` (its constants applied, e.g. ``backbone=timm``)."""
    sweep = study.sweep
    if sweep.models:
        return {str(name): list(overrides) for name, overrides in sweep.models.items()}
    space = load_space(resolve_space_path(sweep.space))
    configspace = space.configspace
    unknown = [name for name in sweep.vary if name not in configspace]
    if unknown or not sweep.vary:
        raise ValueError(
            f"study.sweep.vary={list(sweep.vary)}: name hyperparameters of {sweep.space}: {list(configspace)}"
        )
    constants = {name: hp.value for name, hp in configspace.items() if hasattr(hp, "value")}
    models = {}
    for name in sweep.vary:
        hyperparameter = configspace[name]
        values = getattr(hyperparameter, "choices", None) or getattr(hyperparameter, "sequence", None)
        for value in values or ():
            config = {**constants, name: value}
            models[str(value)] = space.overrides(config)
    return models


def seed_count(value: Any, key: str, minimum: int) -> int:
    """``study.<key>``: a number of seeds, at least ``minimum`` (two where a standard error is needed)."""
    try:
        return STUDY.integer(key, value, minimum=minimum)
    except SettingError as error:
        if minimum != 2:
            raise
        raise SettingError(error.key, value, f"{error.allowed} (a standard error needs two)") from None


def model_kinds(value: Any, key: str) -> list[str]:
    """``study.<key>``: model kinds, each once."""
    given = list(STUDY.sequence(key, value, f"a list of model kinds from {list(MODEL_KINDS)}"))
    if not given or any(kind not in MODEL_KINDS for kind in given) or len(set(given)) != len(given):
        raise ValueError(f"study.{key}={given}: each once, from {list(MODEL_KINDS)}")
    return given


def override_list(value: Any, key: str) -> list[str]:
    """``study.<key>``: a list of training overrides (``key=value`` strings)."""
    given = STUDY.sequence(key, value, "a list of training overrides")
    if not all(isinstance(item, str) for item in given):
        STUDY.fail(key, list(given), "a list of training overrides (strings)")
    return list(given)


def check_composes(overrides: Sequence[str], what: str) -> None:
    """The training config of ``overrides`` composes and its data table takes its arguments (e.g. no synthetic-set
    sizes left on a real data set); ``what`` names the setting in the one-line ValueError."""
    try:
        cfg = compose_config("train", list(overrides), output_dir=".")
        instantiate_partial(cfg.data.table, "data.table")
    except HydraException as error:
        raise ValueError(f"{what}: {composition_error(error, 'train', overrides)}") from None
    except ValueError as error:
        raise ValueError(f"{what}: {str(error).splitlines()[0]}") from None
