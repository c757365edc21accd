"""``python search.py`` / ``fairnas-search``: search a space of training configurations for the
error-vs-fairness Pareto front (thesis Sec. 4.4).

Glue between the face-agnostic search (``fairnas.search``) and training: the target trains a configuration with
:func:`~fairnas.training.run.train` (continuing lower-budget checkpoints, :mod:`fairnas.training.search_target`), and
the final stage re-trains the best configurations with seeds the search never used, reported on validation and
test as mean and standard error (thesis Sec. 4.5.1; :mod:`fairnas.search.final`). The loop settings
(``cfg.search``'s fields of :class:`~fairnas.search.SearchSettings`) are validated before any trial runs.
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import json
import logging
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from hydra.errors import HydraException
from omegaconf import MISSING, DictConfig, OmegaConf

from fairnas.config import compose_config, resolve_space_path
from fairnas.metrics import IDENTIFICATION_METRICS
from fairnas.reporting import Report, check_loggers
from fairnas.run_lock import locks_output_dir
from fairnas.search import SearchResult, SearchSettings, SearchSpace, load_space, run_search
from fairnas.search.loop import SearchProgress, TrialObserver
from fairnas.search.sections import check_choice
from fairnas.search.space import check_known_keys
from fairnas.tasks.cli import hydra_command
from fairnas.training.module import EVAL_STAGES
from fairnas.training.run import read_checkpoint_settings
from fairnas.training.search_target import TrainingTarget, epochs_saved
from fairnas.training.settings import check_training_settings

log = logging.getLogger(__name__)
ROBUSTNESS_BIAS = "robustness_bias"  # thesis eq. 2.3, reported with eval.robustness_bias=true


@dataclasses.dataclass(frozen=True)
class FaceSearch:
    """A search of training configurations: the loop's settings, the space file, the overrides every trial trains
    with, the split its objectives are read from, and whether a promoted configuration continues its checkpoint."""

    settings: SearchSettings
    space: str
    train_overrides: tuple[str, ...]
    split: str
    continue_across_fidelities: bool
    benchmark: str | None = None
    """A benchmark problem searched instead of training (:func:`search_benchmark`), by its name in
    :data:`fairnas.benchmarks.problems.PROBLEMS`."""

    @classmethod
    def from_mapping(cls, search: Mapping[str, Any]) -> FaceSearch:
        """From ``cfg.search`` (or the same keys in a dict); the loop settings are validated here."""
        settings = SearchSettings.from_section(search)
        benchmark = search.get("benchmark")
        if benchmark is not None and benchmark not in _benchmark_problems():
            allowed = sorted(_benchmark_problems())
            raise ValueError(f"search.benchmark: unknown problem {benchmark!r}; allowed: {allowed} or null")
        return cls(
            settings,
            search["space"],
            tuple(search["train_overrides"]),
            check_choice("split", search["split"], EVAL_STAGES),  # the splits a trial's metrics.json reports
            search["continue_across_fidelities"],
            benchmark,
        )


@locks_output_dir
def run_face_search(cfg: DictConfig) -> SearchResult:
    """Run the search described by ``cfg.search`` and its final stage; outputs go to ``cfg.output_dir``."""
    search, output_dir = FaceSearch.from_mapping(cfg.search), Path(cfg.output_dir)
    check_loggers(cfg)  # the search's own summary run starts after its first trial
    with contextlib.ExitStack() as stack:
        live = LiveSummary(cfg, search, stack)
        result = search_faces(search, output_dir, on_trial=live if cfg.get("logger") else None)
        if live.report is not None:
            log_summary(live.report, result, search.settings)
    if live.report is None:
        report_search(cfg, result, search.settings)
    else:
        report_trials(cfg, result)
    return result


class LiveSummary:
    """The search's W&B summary run while the search runs: opened when the first trial finishes, once every input
    check has passed (bad input writes nothing), then told the front after each trial (:func:`log_progress`).
    Trials that train with loggers of their own in this process would write into an open run (Lightning's
    WandbLogger reuses it), so then it stays closed and the summary is written at the end."""

    def __init__(self, cfg: DictConfig, search: FaceSearch, stack: contextlib.ExitStack):
        self._cfg, self._search, self._stack = cfg, search, stack
        self.report: Report | None = None
        self._refused = False

    def __call__(self, progress: SearchProgress) -> None:
        if self.report is None and not self._refused:
            self._refused = _trials_log_here(self._search)
            if not self._refused:
                self.report = self._stack.enter_context(summary_report(self._cfg, progress.output_dir))
        if self.report is not None:
            log_progress(self.report, progress)


def _trials_log_here(search: FaceSearch) -> bool:
    """Whether trials train in this process with loggers of their own: a W&B run open here for the live front would
    then take their logs (Lightning's WandbLogger reuses the open run), so the front is reported at the end."""
    settings = search.settings
    in_process = settings.n_workers == 1 and settings.dask_address is None and settings.dask_scheduler_file is None
    if in_process and compose_config("train", list(search.train_overrides), output_dir=".").get("logger"):
        log.info("the front reaches W&B when the search ends: its trials log to W&B in this process")
        return True
    return False


def search_faces(search: FaceSearch, output_dir: Path, on_trial: TrialObserver | None = None) -> SearchResult:
    """Run ``search`` and its final stage with outputs in ``output_dir`` (reported by :func:`report_search`);
    ``on_trial`` is told the search so far after each trial (``run_search``'s)."""
    if search.benchmark is not None:
        return search_benchmark(search, output_dir, on_trial)
    settings = search.settings
    for name in ("pytorch_lightning", "lightning.pytorch", "lightning.fabric"):  # one progress line per trial
        logging.getLogger(name).setLevel(logging.WARNING)
    train_overrides = list(search.train_overrides)
    if ROBUSTNESS_BIAS in settings.objectives:  # evaluated only when asked for: it runs an attack
        train_overrides.append(f"eval.{ROBUSTNESS_BIAS}=true")
    space = load_space(resolve_space_path(search.space), seed=settings.seed)
    trial_config = default_trial_config(space, train_overrides)
    check_space_keys(space, trial_config)
    check_training_settings(trial_config)  # a missing logger package or GPU would crash every trial
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
    final_target = target.reporting_test()  # the final stage's runs also evaluate the test split
    result = run_search(
        target,
        space,
        settings,
        output_dir=output_dir,
        known_objectives=known_objectives(),
        invariants=invariants,
        final_target=final_target,
        final_metrics=final_target.extra_metrics,
        on_trial=on_trial,
    )
    trained, saved = epochs_saved(output_dir / "trials")
    final_epochs = 0.0 if result.final is None else result.final.epochs
    log.info(
        "search done: %d trials, front of %d; %d epochs trained (%g of them by the final stage), %d saved by "
        "continuing across fidelities",
        len(result.trials),
        len(result.pareto_front),
        trained,
        final_epochs,
        saved,
    )
    if result.final is not None:
        log.info("final front (mean and standard error over seeds):\n%s", result.final.front.to_string(index=False))
    return result


def search_benchmark(search: FaceSearch, output_dir: Path, on_trial: TrialObserver | None = None) -> SearchResult:
    """``search.benchmark``: the search's strategy and settings on a benchmark problem (:mod:`fairnas.benchmarks`,
    e.g. the surrogate of the paper's whole space) instead of training: the problem's space, objectives and
    simulated trials replace ``search.space``, training and ``search.train_overrides``. A search takes seconds, to try a
    strategy or its settings before spending GPU hours; its outputs are a search's."""
    problem = _benchmark_problems()[str(search.benchmark)]()
    settings = search.settings
    if settings.min_budget < problem.min_budget or settings.max_budget > problem.max_budget:
        raise ValueError(
            f"search.benchmark={search.benchmark} has budgets {problem.min_budget:g} to {problem.max_budget:g} epochs; "
            f"search.min_budget={settings.min_budget:g} and search.max_budget={settings.max_budget:g} must lie within"
        )
    target, _ = problem.make_target(output_dir, search.continue_across_fidelities, settings.seed)
    log.info("searching the benchmark %s instead of training (search.space and train_overrides unused)", problem.name)
    result = run_search(
        target,
        problem.space,
        settings,
        output_dir=output_dir,
        known_objectives=problem.objectives,
        invariants={"benchmark": problem.name},
        on_trial=on_trial,
    )
    log.info("search done: %d trials, front of %d", len(result.trials), len(result.pareto_front))
    return result


def _benchmark_problems() -> dict[str, Any]:
    """The benchmark problems by name, imported only when a search names one (scikit-learn and the tables load with
    them, which a training search does not need at start-up)."""
    from fairnas.benchmarks.problems import PROBLEMS

    return PROBLEMS


def report_search(cfg: DictConfig, result: SearchResult, settings: SearchSettings) -> None:
    """A finished search to the configured loggers: its summary run (:func:`log_summary`) and one run per trial
    (:func:`report_trials`)."""
    if not cfg.get("logger"):
        return
    with summary_report(cfg, result.output_dir) as summary:
        log_summary(summary, result, settings)
    report_trials(cfg, result)


def summary_report(cfg: DictConfig, output_dir: Path) -> Report:
    """The search's summary run in the group ``search.name``. Its id derives from the output folder, so reporting a
    resumed search again updates the same run when synced instead of duplicating it."""
    name = cfg.search.name
    return Report(cfg, name=f"{name}-summary", group=name, job_type="summary", id=f"{_search_id(output_dir)}-summary")


def log_progress(report: Report, progress: SearchProgress) -> None:
    """The search so far, after a trial finished: trials, consumed budget, front size and hypervolume (charted
    against the trials, ``trainer/global_step``) and the current Pareto front as a table."""
    report.metrics(dict(progress.curve_row), step=int(progress.curve_row["n_trials"]))
    report.log_table("pareto_front", progress.pareto_front)


def log_summary(report: Report, result: SearchResult, settings: SearchSettings) -> None:
    """The finished search: the front and trial tables, the scatter (a PNG and native W&B scatter plots of the
    trials and of the final stage's candidates) and the hypervolume curve."""
    reference = settings.reference_point or result.default_reference_point()
    report.log_table("pareto_front", result.pareto_front)
    report.log_table("trials", result.trials)
    report.log_image("pareto_scatter", result.output_dir / "pareto_front.png")
    report.metrics({"front_size": len(result.pareto_front), "n_trials": len(result.trials)})
    if len(result.objectives) > 1:  # native, interactive W&B scatter plots of the first two objectives
        x, y = result.objectives[:2]
        report.scatter("trials_scatter", result.trials[result.trials["status"] == "success"], x, y)
        if result.final is not None:
            report.scatter("final_front_scatter", result.final.candidates, f"{x}_mean", f"{y}_mean")
    if result.final is not None:
        report.log_table("final_front", result.final.front)
        report.log_table("final_trials", result.final.trials)
        report.metrics({"final_front_size": len(result.final.front), "final_epochs": result.final.epochs})
    if reference is not None:
        report.log_table("hypervolume_curve", result.hypervolume_curve(reference))
        report.metrics({"hypervolume": result.hypervolume(reference)})


def report_trials(cfg: DictConfig, result: SearchResult) -> None:
    """One run per trial (its configuration and objectives) in the group ``search.name``, ids derived from the
    output folder and trial id."""
    if not cfg.get("logger"):
        return
    name, search_id = cfg.search.name, _search_id(result.output_dir)
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


def _search_id(output_dir: Path) -> str:
    return hashlib.sha1(str(output_dir.resolve()).encode()).hexdigest()[:10]


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
