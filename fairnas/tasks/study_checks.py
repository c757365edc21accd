"""A study's settings, checked before anything is written: one line each naming the ``study.<key>`` and what is
allowed (unknown or missing stages, too few seeds for a standard error, a transfer config or model that does not
compose, a search budget below one full trial, claim settings out of range, ...)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from hydra.errors import HydraException
from omegaconf import DictConfig, OmegaConf

from fairnas.config import compose_config, resolve_space_path
from fairnas.search import SearchSettings, load_space
from fairnas.study.claims import ClaimSettings
from fairnas.tasks.checks import check_training_settings
from fairnas.tasks.runs import instantiate_partial

STAGES = ("noise", "sweep", "search", "final", "mitigations", "robustness", "transfer")
NEEDS = {"final": "search", "mitigations": "final", "transfer": "final"}
"""A stage that uses another's results: the final comparison the search's answer, mitigations and transfer the
models the final comparison chose."""
MODEL_KINDS = ("default", "searched", "hand-designed")
"""The kinds of model a study compares (``study.mitigations.models`` names some of them)."""


def check_study(cfg: DictConfig, base: Sequence[str]) -> None:
    """Every setting of ``cfg.study`` and every configuration the study will train (composed from ``base``, the
    training overrides every run applies); raises a one-line ValueError."""
    study = cfg.study
    stages = list(study.stages)
    unknown = [stage for stage in stages if stage not in STAGES]
    if unknown or len(set(stages)) != len(stages) or not stages:
        raise ValueError(f"study.stages={stages}: each once, from {list(STAGES)}")
    for stage, needed in NEEDS.items():
        if stage in stages and needed not in stages:
            raise ValueError(f"study.stages: {stage} needs {needed} (it uses its results); add it or drop {stage}")
    ClaimSettings.from_mapping(OmegaConf.to_container(study.claims))
    reserved = OmegaConf.to_container(study.reserved_seeds)
    if not isinstance(reserved, list) or not all(
        isinstance(seed, int) and not isinstance(seed, bool) and seed >= 0 for seed in reserved
    ):
        raise ValueError(f"study.reserved_seeds={reserved!r} must be a list of seeds >= 0, e.g. [0,1,2]")
    kinds = list(study.mitigations.models)
    if not kinds or any(kind not in MODEL_KINDS for kind in kinds) or len(set(kinds)) != len(kinds):
        raise ValueError(f"study.mitigations.models={kinds}: each once, from {list(MODEL_KINDS)}")
    _seeds(study.noise.seeds, "noise.seeds", 2)
    _seeds(study.sweep.seeds, "sweep.seeds", 1)
    final_seeds = _seeds(study.final.seeds, "final.seeds", 2)
    _seeds(study.final.hand_designed, "final.hand_designed", 0)
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


def search_settings(study: DictConfig) -> dict[str, Any]:
    """The study's search settings: ``conf/search/local.yaml``'s with ``study.search`` on top (resolved); a
    ``total_budget`` of null is ``full_trials`` times ``max_budget`` epochs, so that the default fits any epochs."""
    defaults = compose_config("search", [], output_dir=".").search
    own = OmegaConf.to_container(study.search, resolve=True)
    full_trials = own.pop("full_trials", None)  # type: ignore[union-attr]
    merged = OmegaConf.to_container(OmegaConf.merge(defaults, OmegaConf.create(own)), resolve=True)
    if merged["total_budget"] is None and merged.get("n_trials") is None and full_trials is not None:  # type: ignore[index]
        if isinstance(full_trials, bool) or not isinstance(full_trials, int) or full_trials < 1:
            raise ValueError(f"study.search.full_trials={full_trials!r} must be an integer >= 1")
        merged["total_budget"] = full_trials * merged["max_budget"]  # type: ignore[index]
    return merged  # type: ignore[return-value]


def check_search(settings: dict[str, Any]) -> None:
    """The search settings as ``search.py`` checks them, and a budget that affords a full trial."""
    try:
        values = SearchSettings.from_mapping(
            {key: settings[key] for key in SearchSettings.field_names() if key in settings}
        )
        resolve_space_path(settings["space"])
    except (ValueError, FileNotFoundError) as error:
        raise ValueError(f"study.search: {str(error).splitlines()[0]}") from None
    if values.total_budget is not None and values.total_budget < values.max_budget:
        raise ValueError(
            f"study.search.total_budget={values.total_budget:g} is below one full trial "
            f"(study.search.max_budget={values.max_budget:g} epochs)"
        )


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
        for value in getattr(hyperparameter, "choices", None) or getattr(hyperparameter, "sequence", ()):
            config = {**constants, name: value}
            models[str(value)] = space.overrides(config)
    return models


def _seeds(value: Any, key: str, minimum: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        need = " (a standard error needs two)" if minimum == 2 else ""
        raise ValueError(f"study.{key}={value!r} must be an integer >= {minimum}{need}")
    return value


def _compose(overrides: Sequence[str], what: str) -> None:
    """The training config of ``overrides`` composes and its data table takes its arguments (e.g. no synthetic-set
    sizes left on a real data set)."""
    try:
        cfg = compose_config("train", list(overrides), output_dir=".")
        instantiate_partial(cfg.data.table, "data.table")
    except (HydraException, ValueError) as error:
        raise ValueError(f"{what}: {str(error).splitlines()[0]}") from None
