"""``python compare.py`` / ``fairnas-compare``: every model x mitigation over K seeds, tabulated as thesis Tables
4.4/4.6 (Sec. 4.5.3-4.5.4).

Models are sets of training overrides (``models``), optionally extended by the configurations of a search's front
(``final_front.csv`` or ``pareto_front.csv`` with its space file). With a front, a number of ``seeds`` means
fresh seeds, the smallest that search never trained with (its ``trials.csv`` and ``final_trials.csv`` record them):
the seeds that picked the searched models would favour them. For every model and seed the unmitigated
baseline is trained first: it is the Baseline column, and the mitigations read their inputs from it — Flipped and
Angular the per-group validation accuracies of its ``metrics.json`` (``mitigation.reference_metrics``, used
unless ``mitigation.group`` is set), SensitiveNets its checkpoint as the frozen feature extractor
(``mitigation.checkpoint``). Every run is an ordinary ``train`` run under ``<output_dir>/runs/<model>/<mitigation>/
seed<k>``; a finished run is read back instead of retrained, so an interrupted comparison resumes: the default
output folder is ``outputs/compare/<name>``, so running the same command again reuses every finished run. Finished
runs elsewhere (``reuse_runs``: folders searched for the run records ``train_once`` writes) are read back too when
their training config is the one a cell needs, e.g. the baselines a showcase stage trained already.

The runs go through the search's pool (``n_workers`` at once on a local Dask cluster, or an existing scheduler:
``dask_address`` / ``dask_scheduler_file`` over TLS, as in ``search.py``): every baseline first, then every
mitigation; a failed run stops the comparison with one line once its wave has finished.

Outputs in ``output_dir``: ``runs.csv`` (every run's metrics on ``split``), ``summary.csv`` (mean and standard error
per cell and metric, Pareto flags), ``tables.csv`` / ``tables.md`` (the Table 4.6 format per metric),
``comparison.png`` (all cells), and the same tables and figure to the configured loggers.
"""

from __future__ import annotations

import contextlib
import functools
import itertools
import json
import logging
from collections.abc import Mapping, Sequence
from pathlib import Path

import pandas as pd
from hydra.errors import HydraException
from omegaconf import DictConfig, OmegaConf

from fairnas.config import compose_config, composition_error, resolve_space_path
from fairnas.io import write_text_atomic
from fairnas.metrics import IDENTIFICATION_METRICS
from fairnas.mitigations.grid import BASELINE, Mitigation, choice, grid, path_name
from fairnas.mitigations.table import comparison_figure, comparison_table, markdown_tables, summarize
from fairnas.reporting import Report
from fairnas.run_lock import locks_output_dir
from fairnas.search import load_space
from fairnas.search.final import FINAL_TRIALS_FILE, fresh_seeds
from fairnas.search.outputs import TRIALS_FILE
from fairnas.search.parallel import open_pool_for
from fairnas.tasks.cli import hydra_command
from fairnas.training.build import build_datamodule, model_label
from fairnas.training.run import RUN_RECORD, read_checkpoint_settings
from fairnas.training.run_pool import Job, train_all

log = logging.getLogger(__name__)
SPLITS = ("val", "test")


@locks_output_dir
def run_comparison(cfg: DictConfig) -> pd.DataFrame:
    """Train and evaluate every model x mitigation x seed of ``cfg``; write the outputs; return the summary."""
    _check_settings(cfg)
    output_dir = Path(cfg.output_dir)
    models = collect_models(cfg)
    seeds = seed_list(cfg.seeds, cfg.front)
    log.info("comparing over seeds %s", seeds)
    mitigations = list(cfg.mitigations)
    plan = dict.fromkeys([BASELINE, *mitigations])  # the baseline first, once
    # Compose every pair before the first run trains: checks all overrides and the checkpoints they name, the data
    # each model reads (its groups, its splits), and reads each mitigation's column title and the baseline inputs it
    # declares.
    declared, data_read = {}, set()
    for overrides in models.values():
        for name in plan:
            composed = _compose(cfg, overrides, name)
            read_checkpoint_settings(composed)
            data = OmegaConf.to_yaml(composed.data)
            if data not in data_read:
                data_read.add(data)
                build_datamodule(composed)
            declared[name] = Mitigation.declared(name, _own_overrides(cfg, name), composed.mitigation)
    titles = {name: mitigation.title for name, mitigation in declared.items()}

    finished = FinishedRuns(cfg.get("reuse_runs") or [])
    # Each model and seed in turn, the baseline first: the mitigations of that model and seed read their inputs from
    # it. So the runs go to the pool in two waves, the baselines, then the mitigations.
    order = {pair: rank for rank, pair in enumerate(itertools.product(models, seeds))}
    cells = sorted(grid(list(models), list(declared.values()), seeds), key=lambda cell: order[cell.model, cell.seed])
    baselines: dict[tuple[str, int], Path] = {}
    metrics: dict[Path, dict] = {}
    with contextlib.ExitStack() as stack:
        pool = functools.cache(lambda: stack.enter_context(open_pool_for(cfg)))
        for wave in (BASELINE, "mitigations"):
            jobs = {}
            for cell in cells:
                if (cell.mitigation.name == BASELINE) != (wave == BASELINE):
                    continue
                pair, mitigation = (cell.model, cell.seed), cell.mitigation
                overrides = [*cfg.train_overrides, *models[cell.model], *mitigation.overrides, f"seed={cell.seed}"]
                if pair in baselines:
                    overrides += mitigation.baseline_overrides(baselines[pair])
                reused = finished.find(overrides)
                job = Job(reused or output_dir / "runs" / cell.folder, overrides, same_config=reused is not None)
                jobs[cell.folder] = job
                baselines.setdefault(pair, job.run_dir)
            metrics |= train_all(jobs, pool, f"compare {wave}")
            failed = {folder: result["error"] for folder, result in metrics.items() if "error" in result}
            if failed:
                folder, error = next(iter(failed.items()))
                raise ValueError(f"compare: {len(failed)} run(s) failed, the first {folder}: {error}")
    records = [
        {
            "model": cell.model,
            "mitigation": cell.mitigation.name,
            "seed": cell.seed,
            **{key: float(metrics[cell.folder][cfg.split][key]) for key in IDENTIFICATION_METRICS},
        }
        for cell in cells
        if cell.mitigation.name in mitigations
    ]
    runs = pd.DataFrame(records)
    summary = summarize(runs, list(cfg.metrics))
    write_outputs(runs, summary, titles, cfg)
    return summary


def collect_models(cfg: DictConfig) -> dict[str, list[str]]:
    """Model name -> training overrides: ``cfg.models``, then the configurations of ``cfg.front`` if given."""
    models = {str(name): list(overrides) for name, overrides in (cfg.models or {}).items()}
    if cfg.front is not None:
        models.update(front_models(cfg.front, cfg.front_space, list(cfg.train_overrides)))
    if not models:
        raise ValueError("models: no models to compare; give models (name -> overrides) or a search front")
    folders = [path_name(name) for name in models]
    if len(set(folders)) != len(folders):
        raise ValueError(f"models: names {list(models)} collide as folder names {folders}")
    empty = [name for name, overrides in models.items() if not overrides]
    if empty:
        raise ValueError(
            f"models: {empty} have no overrides; give each model the training overrides that define "
            "it, e.g. +models.SMAC_301='[backbone.ops=301]'"
        )
    return models


def write_outputs(runs: pd.DataFrame, summary: pd.DataFrame, titles: Mapping[str, str], cfg: DictConfig) -> None:
    """runs.csv, summary.csv, tables.csv, tables.md and comparison.png, also to the configured loggers."""
    metrics, scale = list(cfg.metrics), 100.0 if cfg.error_percent else 1.0
    tables = {metric: comparison_table(summary, metric, titles, error_scale=scale) for metric in metrics}
    stacked = pd.concat([table.reset_index().assign(metric=metric) for metric, table in tables.items()])
    markdown = markdown_tables(summary, metrics, titles, split=cfg.split, error_scale=scale)
    with Report(cfg) as report:
        report.table("runs", runs)
        report.table("summary", summary)
        report.table("tables", stacked[["metric", *stacked.columns.drop("metric")]])
        for metric, table in tables.items():
            report.log_table(f"table/{metric}", table.reset_index())
        write_text_atomic(report.output_dir / "tables.md", markdown)
        report.figure("comparison", comparison_figure(summary, metrics, titles, error_scale=scale))
    log.info(
        "comparison on %s (%s; bold: Pareto-optimal):\n%s",
        cfg.split,
        "error in %" if scale == 100 else "error",
        markdown,
    )


def seed_list(seeds: int | Sequence[int], front: str | Path | None = None) -> list[int]:
    """``seeds``: a number of seeds (0 .. seeds-1) or the seeds themselves.

    With ``front`` (a search's front CSV), a number of seeds is the ``seeds`` smallest seeds that search never trained
    with (:func:`search_seeds`), for every model alike so that the comparison stays paired by seed; listed seeds are
    kept, with a warning naming those the search trained with.
    """
    used = search_seeds(front) if front is not None else None
    if isinstance(seeds, int):
        if front is None:
            return list(range(seeds))
        if used is None:
            folder = Path(front).expanduser().parent
            raise ValueError(
                f"front: '{front}' has no {TRIALS_FILE} or {FINAL_TRIALS_FILE} beside it in '{folder}' to tell which "
                f"seeds its search trained with; give the seeds explicitly, e.g. seeds=[3,4,5]"
            )
        return fresh_seeds(used, seeds)
    chosen = [int(seed) for seed in seeds]
    overlap = sorted(set(chosen) & (used or set()))
    if overlap:
        log.warning(
            "seeds %s: the search of %s trained with %s too; the runs that picked its models may favour them",
            chosen,
            front,
            overlap,
        )
    return chosen


def search_seeds(front: str | Path) -> set[int] | None:
    """The training seeds of the search whose front CSV is ``front``: the ``seed`` column of ``trials.csv`` and
    ``final_trials.csv`` beside it, each if present; None if neither is."""
    folder = Path(front).expanduser().parent
    files = [path for path in (folder / TRIALS_FILE, folder / FINAL_TRIALS_FILE) if path.is_file()]
    if not files:
        return None
    return {int(seed) for path in files for seed in pd.read_csv(path, usecols=["seed"])["seed"].dropna()}


class FinishedRuns:
    """The finished runs under ``folders`` (those with a :func:`~fairnas.training.run.train_once` record and
    ``metrics.json``), found by their training config: composed from the recorded overrides, everything but where
    the run writes compared."""

    def __init__(self, folders: Sequence[str | Path]):
        self.runs: dict[str, Path] = {}
        for folder in map(Path, folders):
            if not folder.is_dir():
                raise FileNotFoundError(f"reuse_runs: '{folder}' is not a folder")
            for record in sorted(folder.rglob(RUN_RECORD)):
                if (record.parent / "metrics.json").is_file():
                    overrides = json.loads(record.read_text())["overrides"]
                    self.runs.setdefault(training_config_key(overrides), record.parent)

    def find(self, overrides: Sequence[str]) -> Path | None:
        """The folder of a finished run with the training config ``overrides`` compose, if there is one."""
        return self.runs.get(training_config_key(overrides)) if self.runs else None


def training_config_key(overrides: Sequence[str]) -> str:
    """The training config ``overrides`` compose, as a string that two equal configs share (output paths fixed)."""
    config = compose_config("train", list(overrides), output_dir=".")
    return json.dumps(OmegaConf.to_container(config, resolve=False), sort_keys=True)


def _compose(cfg: DictConfig, model_overrides: Sequence[str], mitigation: str) -> DictConfig:
    """The training config of a model with a mitigation (overrides checked, nothing built)."""
    overrides = [*cfg.train_overrides, *model_overrides, *choice(mitigation, _own_overrides(cfg, mitigation))]
    try:
        return compose_config("train", overrides, output_dir=".")
    except HydraException as error:
        raise ValueError(
            f"compare: {composition_error(error, 'train', overrides)} (in the overrides of mitigation "
            f"{mitigation!r} with {list(model_overrides)})"
        ) from None


def _own_overrides(cfg: DictConfig, mitigation: str) -> list[str]:
    return list((cfg.mitigation_overrides or {}).get(mitigation, []))


def front_models(front: str | Path, space: str | Path, train_overrides: Sequence[str] = ()) -> dict[str, list[str]]:
    """Model name -> training overrides for every configuration of a search's front CSV (``final_front.csv`` or
    ``pareto_front.csv``) over the space file ``space``.

    Names are the architecture and head (``SMAC_301_cosface``), with the configuration id where two coincide.
    """
    path = Path(front).expanduser()
    if not path.is_file():
        raise FileNotFoundError(f"front: '{path}' does not exist")
    rows = pd.read_csv(path)
    if not {"config", "config_id"} <= set(rows.columns):
        raise ValueError(
            f"front: '{path}' lacks the columns config and config_id of a search's pareto_front.csv / final_front.csv"
        )
    search_space = load_space(resolve_space_path(str(space)))
    models: dict[str, list[str]] = {}
    for row in rows.itertuples():
        overrides = search_space.overrides(json.loads(row.config))
        name = model_label(compose_config("train", [*train_overrides, *overrides], output_dir="."))
        models[name if name not in models else f"{name}_{row.config_id}"] = overrides
    return models


def _check_settings(cfg: DictConfig) -> None:
    """The comparison's own settings, before anything is composed or trained."""
    if cfg.split not in SPLITS:
        raise ValueError(f"split={cfg.split!r}; allowed: {list(SPLITS)}")
    unknown = [metric for metric in cfg.metrics if metric not in IDENTIFICATION_METRICS]
    if unknown or not cfg.metrics:
        raise ValueError(f"metrics: {unknown or 'none given'}; allowed: {list(IDENTIFICATION_METRICS)}")
    seeds = OmegaConf.to_object(cfg.seeds) if OmegaConf.is_config(cfg.seeds) else cfg.seeds
    count = isinstance(seeds, int) and seeds >= 1
    listed = isinstance(seeds, list) and seeds and all(isinstance(s, int) and s >= 0 for s in seeds)
    if not (count or (listed and len(set(seeds)) == len(seeds))):
        raise ValueError(
            f"seeds={seeds!r} must be a positive number of seeds or a list of distinct seeds >= 0, e.g. [3,4]"
        )
    if not cfg.mitigations or len(set(cfg.mitigations)) != len(cfg.mitigations):
        raise ValueError(f"mitigations={list(cfg.mitigations or [])} must name each mitigation once")
    if not isinstance(cfg.n_workers, int) or cfg.n_workers < 1:
        raise ValueError(f"n_workers={cfg.n_workers!r} must be an integer >= 1")


main = hydra_command(run_comparison, "compare")
