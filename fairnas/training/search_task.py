"""``python search.py``: search a space of training configurations for the error-vs-fairness Pareto front.

Glue between the face-agnostic search (``fairnas.search``) and training: the target trains a configuration
with ``train(cfg)`` (continuing lower-budget checkpoints), and the Pareto configurations are finally re-trained
with several seeds and reported on validation and test as mean and standard error (thesis Sec. 4.5.1).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence
from pathlib import Path

import pandas as pd
from hydra.errors import HydraException
from omegaconf import MISSING, DictConfig, OmegaConf

from fairnas.config import CONFIG_DIR, compose_config
from fairnas.io import write_text_atomic
from fairnas.metrics import IDENTIFICATION_METRICS
from fairnas.search import SearchResult, SearchSpace, load_space, run_search
from fairnas.search.space import check_known_keys
from fairnas.search.wandb_summary import log_search_to_wandb
from fairnas.training.target import TrainingTarget, epochs_saved

log = logging.getLogger(__name__)
FINAL_FRONT_FILE = "final_front.csv"
ROBUSTNESS_BIAS = "robustness_bias"  # thesis eq. 2.3, reported with eval.robustness_bias=true


def run_face_search(cfg: DictConfig) -> SearchResult:
    """Run the search described by ``cfg.search``; outputs go to ``cfg.output_dir``."""
    settings = cfg.search
    output_dir = Path(cfg.output_dir)
    for name in ("pytorch_lightning", "lightning.pytorch", "lightning.fabric"):  # one progress line per trial
        logging.getLogger(name).setLevel(logging.WARNING)
    train_overrides = list(settings.train_overrides)
    if ROBUSTNESS_BIAS in settings.objectives:  # evaluated only when asked for: it runs an attack
        train_overrides.append(f"eval.{ROBUSTNESS_BIAS}=true")
    space = load_space(resolve_space_path(settings.space), seed=settings.seed)
    check_space_keys(space, train_overrides)
    target = TrainingTarget(
        space.overrides,
        objectives=settings.objectives,
        trials_dir=output_dir / "trials",
        max_budget=settings.max_budget,
        base_overrides=train_overrides,
        split=settings.split,
        continue_across_fidelities=settings.continue_across_fidelities,
    )
    result = run_search(
        target,
        space,
        objectives=list(settings.objectives),
        min_budget=settings.min_budget,
        max_budget=settings.max_budget,
        eta=settings.eta,
        total_budget=settings.total_budget,
        n_trials=settings.n_trials,
        strategy=settings.strategy,
        seed=settings.seed,
        output_dir=output_dir,
        n_workers=settings.n_workers,
        multi_objective=settings.multi_objective,
        rho=settings.rho,
        objective_weights=_list_or_none(settings.objective_weights),
        scheduler=settings.scheduler,
        dask_address=settings.dask_address,
        dask_scheduler_file=settings.dask_scheduler_file,
        crash_cost=_list_or_none(settings.crash_cost) or 1000.0,
        reference_point=_list_or_none(settings.reference_point),
        known_objectives=known_objectives(),
    )
    trained, saved = epochs_saved(output_dir / "trials")
    log.info("search done: %d trials, front of %d; %d epochs trained, %d saved by continuing across fidelities",
             len(result.trials), len(result.pareto_front), trained, saved)
    if settings.final_seeds > 0:
        final = evaluate_front(result, target, seeds=range(settings.final_seeds))
        write_text_atomic(output_dir / FINAL_FRONT_FILE, final.to_csv(index=False))
        log.info("final front over %d seeds:\n%s", settings.final_seeds, final.to_string(index=False))
    log_search_to_wandb(result, settings.name, enabled=settings.wandb.enabled, project=settings.wandb.project,
                        mode=settings.wandb.mode, reference_point=_list_or_none(settings.reference_point))
    return result


def evaluate_front(result: SearchResult, target: TrainingTarget, seeds: Sequence[int]) -> pd.DataFrame:
    """Re-train every Pareto configuration at the maximum budget with each seed; mean and standard error.

    Columns: ``config_id``, ``config`` (JSON), ``n_seeds``, then ``<split>/<objective>_mean`` and ``_sem`` for
    the validation and test splits.
    """
    rows = []
    for front_row in result.pareto_front.to_dict("records"):
        config = json.loads(front_row["config"])
        runs = [target.run(config, seed, result.max_budget) for seed in seeds]
        values = pd.DataFrame([
            {f"{split}/{name}": float(run[split][name]) for split in ("val", "test") for name in result.objectives}
            for run in runs
        ])
        summary = {"config_id": front_row["config_id"], "config": front_row["config"], "n_seeds": len(runs)}
        for column in values:
            summary[f"{column}_mean"] = values[column].mean()
            summary[f"{column}_sem"] = values[column].sem() if len(values) > 1 else 0.0
        rows.append(summary)
    return pd.DataFrame(rows)


def known_objectives() -> list[str]:
    """Metric names training reports per split, usable as search objectives."""
    return [*IDENTIFICATION_METRICS, ROBUSTNESS_BIAS]


def resolve_space_path(space: str) -> Path:
    """A space file path as given, or relative to the repository (``searchspaces/dpn_paper.yaml``)."""
    path = Path(space).expanduser()
    if not path.is_file() and (CONFIG_DIR.parent / path).is_file():
        path = CONFIG_DIR.parent / path
    if not path.is_file():
        raise FileNotFoundError(f"search.space: space file '{space}' does not exist")
    return path


def check_space_keys(space: SearchSpace, train_overrides: Sequence[str]) -> None:
    """Every key the space sets must exist in the training config it is applied to (before any trial runs).

    The config is composed with the space's default configuration applied, since group choices in the space
    (e.g. ``backbone=timm``) decide which keys exist.
    """
    default = dict(space.configspace.get_default_configuration())
    try:
        cfg = compose_config("train", [*train_overrides, *space.overrides(default)], output_dir=".")
    except HydraException as error:
        raise ValueError(f"search.space: {str(error).splitlines()[0]} (not a key of the training config)") from None
    check_known_keys(space.keys, lambda key: OmegaConf.select(cfg, key, default=MISSING) is not MISSING)


def _list_or_none(value) -> list | None:
    return None if value is None else list(value) if OmegaConf.is_list(value) else value
