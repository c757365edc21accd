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

Outputs in ``output_dir``: ``runs.csv`` (every run's metrics on ``split``), ``summary.csv`` (mean and standard error
per cell and metric, Pareto flags), ``tables.csv`` / ``tables.md`` (the Table 4.6 format per metric),
``comparison.png`` (all cells), and the same tables and figure to the configured loggers.
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Mapping, Sequence
from pathlib import Path

import pandas as pd
from hydra.errors import HydraException
from omegaconf import DictConfig, OmegaConf

from fairnas.config import compose_config, resolve_space_path
from fairnas.io import write_json_atomic, write_text_atomic
from fairnas.metrics import IDENTIFICATION_METRICS
from fairnas.mitigations.table import comparison_figure, comparison_table, markdown_tables, summarize
from fairnas.search import load_space
from fairnas.search.final import FINAL_TRIALS_FILE, fresh_seeds
from fairnas.search.result import TRIALS_FILE
from fairnas.tasks.cli import hydra_command
from fairnas.tasks.reporting import Report
from fairnas.tasks.run_lock import locks_output_dir
from fairnas.tasks.runs import model_label
from fairnas.tasks.train import read_checkpoint_settings, train

log = logging.getLogger(__name__)
BASELINE = "none"
SPLITS = ("val", "test")
RUN_RECORD = "compare_run.json"
# Keys a mitigation config may declare to receive the baseline run of the same model and seed.
BASELINE_INPUTS = {"reference_metrics": "metrics.json", "checkpoint": "checkpoints/last.ckpt"}


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
    # Compose every pair before the first run trains: checks all overrides and the checkpoints they name, and reads
    # each mitigation's column title and the baseline inputs it declares.
    titles, baseline_inputs = {}, {}
    for overrides in models.values():
        for name in plan:
            composed = _compose(cfg, overrides, name)
            read_checkpoint_settings(composed)
            declared = composed.mitigation
            titles[name] = declared.get("title", name)
            # a mitigation that starts from its baseline run declares the key (e.g. SensitiveNets' checkpoint)
            baseline_inputs[name] = [key for key in BASELINE_INPUTS if key in declared and name != BASELINE]

    finished = FinishedRuns(cfg.get("reuse_runs") or [])
    records = []
    for model, model_overrides in models.items():
        for seed in seeds:
            baseline_dir = None
            for name in plan:
                overrides = [*cfg.train_overrides, *model_overrides, *_mitigation_overrides(cfg, name), f"seed={seed}"]
                overrides += [
                    f"mitigation.{key}='{baseline_dir / BASELINE_INPUTS[key]}'" for key in baseline_inputs[name]
                ]
                reused = finished.find(overrides)
                run_dir = reused or _run_dir(output_dir, model, name, seed)
                baseline_dir = baseline_dir or run_dir  # the plan's first run is the baseline
                metrics = train_once(run_dir, overrides, same_config=reused is not None)
                if name in mitigations:
                    records.append(
                        {
                            "model": model,
                            "mitigation": name,
                            "seed": seed,
                            **{key: float(metrics[cfg.split][key]) for key in IDENTIFICATION_METRICS},
                        }
                    )
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
    """The finished runs under ``folders`` (those with a :func:`train_once` record and ``metrics.json``), found by
    their training config: composed from the recorded overrides, everything but where the run writes compared."""

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


def train_once(run_dir: Path, overrides: list[str], same_config: bool = False) -> dict:
    """Train one run, or read it back when an earlier invocation finished it with the same overrides (with
    ``same_config``: with overrides that compose the same training config, as :class:`FinishedRuns` found)."""
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


def _compose(cfg: DictConfig, model_overrides: Sequence[str], mitigation: str) -> DictConfig:
    """The training config of a model with a mitigation (overrides checked, nothing built)."""
    overrides = [*cfg.train_overrides, *model_overrides, *_mitigation_overrides(cfg, mitigation)]
    try:
        return compose_config("train", overrides, output_dir=".")
    except HydraException as error:
        raise ValueError(
            f"compare: {str(error).splitlines()[0]} (in the overrides of mitigation "
            f"{mitigation!r} with {list(model_overrides)})"
        ) from None


def _mitigation_overrides(cfg: DictConfig, mitigation: str) -> list[str]:
    return [f"mitigation={mitigation}", *(cfg.mitigation_overrides or {}).get(mitigation, [])]


def _run_dir(output_dir: Path, model: str, mitigation: str, seed: int) -> Path:
    return output_dir / "runs" / path_name(model) / mitigation / f"seed{seed}"


def path_name(name: str) -> str:
    """``name`` as a folder name: every run of other characters than word characters, ``.``, ``+`` and ``-`` an
    underscore."""
    return re.sub(r"[^\w.+-]+", "_", name)


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


main = hydra_command(run_comparison, "compare")
