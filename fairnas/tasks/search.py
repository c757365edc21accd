"""``python search.py`` / ``fairnas-search``: search a space of training configurations for the
error-vs-fairness Pareto front (thesis Sec. 4.4).

Glue between the face-agnostic search (``fairnas.search``) and training: the target trains a configuration with
:func:`~fairnas.tasks.train.train` (continuing lower-budget checkpoints, :mod:`fairnas.tasks.search_target`), and
the Pareto configurations are finally re-trained with several seeds the search never used and reported on validation
and test as mean and standard error (thesis Sec. 4.5.1). The loop settings (``cfg.search``'s fields of
:class:`~fairnas.search.SearchSettings`) are validated before any trial runs.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import logging
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import pandas as pd
from hydra.errors import HydraException
from omegaconf import MISSING, DictConfig, OmegaConf

from fairnas.config import compose_config, resolve_space_path
from fairnas.io import write_csv_atomic
from fairnas.metrics import IDENTIFICATION_METRICS
from fairnas.search import SearchResult, SearchSettings, SearchSpace, load_space, run_search
from fairnas.search.space import check_known_keys
from fairnas.tasks.cli import hydra_command
from fairnas.tasks.reporting import Report
from fairnas.tasks.search_target import TrainingTarget, epochs_saved
from fairnas.tasks.train import read_checkpoint_settings

log = logging.getLogger(__name__)
FINAL_FRONT_FILE = "final_front.csv"
ROBUSTNESS_BIAS = "robustness_bias"  # thesis eq. 2.3, reported with eval.robustness_bias=true


def run_face_search(cfg: DictConfig) -> SearchResult:
    """Run the search described by ``cfg.search``; outputs go to ``cfg.output_dir``."""
    search = cfg.search
    _check_final_seeds(search.final_seeds)
    settings = SearchSettings.from_mapping(
        {name: search[name] for name in SearchSettings.field_names() if name in search}
    )
    output_dir = Path(cfg.output_dir)
    for name in ("pytorch_lightning", "lightning.pytorch", "lightning.fabric"):  # one progress line per trial
        logging.getLogger(name).setLevel(logging.WARNING)
    train_overrides = list(search.train_overrides)
    if ROBUSTNESS_BIAS in settings.objectives:  # evaluated only when asked for: it runs an attack
        train_overrides.append(f"eval.{ROBUSTNESS_BIAS}=true")
    space = load_space(resolve_space_path(search.space), seed=settings.seed)
    trial_config = default_trial_config(space, train_overrides)
    check_space_keys(space, trial_config)
    read_checkpoint_settings(trial_config)  # a bad checkpoint in train_overrides would crash every trial
    target = TrainingTarget(
        space.overrides,
        objectives=settings.objectives,
        trials_dir=output_dir / "trials",
        max_budget=settings.max_budget,
        base_overrides=train_overrides,
        split=search.split,
        continue_across_fidelities=search.continue_across_fidelities,
    )
    # What every trial trains with, beyond the loop settings: a resumed search must not mix in other results.
    invariants = {"train_overrides": train_overrides, "split": search.split}
    result = run_search(
        target, space, settings, output_dir=output_dir, known_objectives=known_objectives(), invariants=invariants
    )
    trained, saved = epochs_saved(output_dir / "trials")
    log.info(
        "search done: %d trials, front of %d; %d epochs trained, %d saved by continuing across fidelities",
        len(result.trials),
        len(result.pareto_front),
        trained,
        saved,
    )
    if search.final_seeds:
        seeds = fresh_seeds(result.trials["seed"], search.final_seeds)
        final = evaluate_front(result, target, seeds=seeds)
        write_csv_atomic(final, output_dir / FINAL_FRONT_FILE)
        log.info("final front over seeds %s:\n%s", seeds, final.to_string(index=False))
    report_search(cfg, result, settings)
    return result


def _check_final_seeds(final_seeds: Any) -> None:
    if final_seeds is not None and (
        isinstance(final_seeds, bool) or not isinstance(final_seeds, int) or final_seeds < 1
    ):
        raise ValueError(
            f"search.final_seeds={final_seeds} must be a positive number of seeds, or null for no final evaluation"
        )


def fresh_seeds(used: Iterable[int], n: int) -> list[int]:
    """The ``n`` smallest non-negative seeds not in ``used`` (the trials' seeds): the final evaluation re-trains
    the front with new seeds rather than reusing the runs whose validation results selected it."""
    used = {int(seed) for seed in used}
    return list(itertools.islice((seed for seed in itertools.count() if seed not in used), n))


def evaluate_front(result: SearchResult, target: TrainingTarget, seeds: Sequence[int]) -> pd.DataFrame:
    """Re-train every Pareto configuration at the maximum budget with each seed; mean and standard error.

    Columns: ``config_id``, ``config`` (JSON), ``n_seeds``, ``seeds`` (JSON list), then
    ``<split>/<objective>_mean`` and ``_sem`` for the validation and test splits.
    """
    rows = []
    for front_row in result.pareto_front.to_dict("records"):
        config = json.loads(front_row["config"])
        runs = [target.run(config, seed, result.max_budget, test=True) for seed in seeds]
        values = pd.DataFrame(
            [
                {f"{split}/{name}": float(run[split][name]) for split in ("val", "test") for name in result.objectives}
                for run in runs
            ]
        )
        summary = {
            "config_id": front_row["config_id"],
            "config": front_row["config"],
            "n_seeds": len(runs),
            "seeds": json.dumps([int(seed) for seed in seeds]),
        }
        for column in values:
            summary[f"{column}_mean"] = values[column].mean()
            summary[f"{column}_sem"] = values[column].sem() if len(values) > 1 else 0.0
        rows.append(summary)
    return pd.DataFrame(rows)


def report_search(cfg: DictConfig, result: SearchResult, settings: SearchSettings) -> None:
    """To the configured loggers: one run per trial (its configuration and objectives) in the group
    ``search.name``, and a summary run with the front and trial tables, the scatter and the hypervolume curve.

    Run ids derive from the output folder and trial id, so reporting a resumed search again updates the same runs
    when synced instead of duplicating them.
    """
    if not cfg.get("logger"):
        return
    name = cfg.search.name
    search_id = hashlib.sha1(str(result.output_dir.resolve()).encode()).hexdigest()[:10]
    for trial in result.trials.to_dict("records"):
        config = {**json.loads(trial["config"]), "budget": trial["budget"], "seed": trial["seed"]}
        with Report(
            cfg,
            config=config,
            name=f"{name}-trial{trial['trial_id']}",
            group=name,
            job_type="trial",
            id=f"{search_id}-trial{trial['trial_id']}",
        ) as report:
            report.metrics({key: trial[key] for key in (*result.objectives, "wall_time_s", "budget")})
    reference = settings.reference_point or result.default_reference_point()
    with Report(cfg, name=f"{name}-summary", group=name, job_type="summary", id=f"{search_id}-summary") as report:
        report.log_table("pareto_front", result.pareto_front)
        report.log_table("trials", result.trials)
        report.log_image("pareto_scatter", result.output_dir / "pareto_front.png")
        report.metrics({"front_size": len(result.pareto_front), "n_trials": len(result.trials)})
        if reference is not None:
            report.log_table("hypervolume_curve", result.hypervolume_curve(reference))
            report.metrics({"hypervolume": result.hypervolume(reference)})


def known_objectives() -> list[str]:
    """Metric names training reports per split, usable as search objectives."""
    return [*IDENTIFICATION_METRICS, ROBUSTNESS_BIAS]


def default_trial_config(space: SearchSpace, train_overrides: Sequence[str]) -> DictConfig:
    """The training config of the space's default configuration: the one the settings of every trial are checked on
    before any runs, since group choices in the space (e.g. ``backbone=timm``) decide which keys exist."""
    default = dict(space.configspace.get_default_configuration())
    try:
        return compose_config("train", [*train_overrides, *space.overrides(default)], output_dir=".")
    except HydraException as error:
        raise ValueError(f"search.space: {str(error).splitlines()[0]} (not a key of the training config)") from None


def check_space_keys(space: SearchSpace, trial_config: DictConfig) -> None:
    """Every key the space sets must exist in the training config it is applied to (before any trial runs)."""
    check_known_keys(space.keys, lambda key: OmegaConf.select(trial_config, key, default=MISSING) is not MISSING)


main = hydra_command(run_face_search, "search")
