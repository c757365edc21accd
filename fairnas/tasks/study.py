"""``python study.py`` / ``fairnas-study``: thesis Chapter 4 as one command, on any data set, on one machine or a
cluster, ending in one report a person reads.

Stages (``study.stages``; each sized in ``conf/study/``):

- ``noise``: the default model with ``study.noise.seeds`` seeds (the final comparison's): the seed noise every
  comparison is read against;
- ``sweep``: hand-designed models (Sec. 4.3), from a space file's architectures or a list, one seed each;
- ``search``: ``search.py``'s search (any strategy) with its final stage (Sec. 4.4-4.5.1): the search's answer;
- ``final``: the searched candidate (chosen by the search's final stage: the answer's configuration of lowest
  error), the default model and the best hand-designed models re-trained with ``study.final.seeds`` fresh seeds
  (neither the search's nor its final stage's), shared by every model so that comparisons are paired;
- ``mitigations``: Balanced, Flipped, Angular, SensitiveNets (Sec. 4.5.3, Table 4.6) on the default, the best searched
  and the best hand-designed model (``study.mitigations.models`` names the kinds); their baselines are the final
  comparison's runs;
- ``robustness``: AdvERM vs plain training of the default model (Sec. 2.9), robustness bias from DeepFool;
- ``transfer``: the compared models on a second data set (``study.transfer.overrides``; Tables 4.5 / 4.8).

Every training run is an ordinary ``train`` run (:mod:`fairnas.tasks.study_runs`) sent through the search's pool
(``study.n_workers``, or a Dask scheduler as in ``search.py``), read back when an earlier invocation finished it, so
an interrupted study resumes; a crashed run is recorded and left out of the claims it feeds, which say so. Every
claim is decided by a paired test (:mod:`fairnas.study.claims`). Writes ``outputs/study/<name>/``: ``runs.csv``,
``claims.csv``, a table per stage, figures (the claims' forest plot first), ``report.md``, a self-contained
``report.html``, and one W&B run (the ``logger`` group, as in ``train.py``) with the tables, the page and the fronts
as native scatter plots.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import logging
import math
import shutil
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pandas as pd
from hydra.core.hydra_config import HydraConfig
from omegaconf import DictConfig, OmegaConf

from fairnas.config import compose_config, resolve_space_path
from fairnas.mitigations.table import markdown_tables, summarize
from fairnas.search import SearchResult, load_space
from fairnas.search.final import fresh_seeds
from fairnas.search.parallel import DaskPool, TrialPool, open_pool
from fairnas.study import claims as verdicts
from fairnas.study.inference import min_seeds
from fairnas.study.report import StageReport, forest_figure, scatter_figure, write_pages
from fairnas.tasks.cli import hydra_command
from fairnas.tasks.compare import BASELINE_INPUTS
from fairnas.tasks.reporting import Report
from fairnas.tasks.run_lock import locks_output_dir
from fairnas.tasks.search import run_face_search
from fairnas.tasks.study_checks import check_study, hand_designed_models, search_settings
from fairnas.tasks.study_runs import RunSpec, changes_training, not_applicable, run_all

log = logging.getLogger(__name__)
STUDY_KEYS = ("study", "name", "hydra", "logger", "output_dir")
"""Override keys that set up the study itself, not the training every run does."""
RUN_SETTINGS = ("logger=none", "trainer.enable_progress_bar=false", "trainer.enable_model_summary=false")
ROBUSTNESS_ARMS = {"plain": ["eval.robustness_bias=true"], "AdvERM": ["regularizer=robustness_bias"]}


@locks_output_dir
def run_study(cfg: DictConfig, overrides: Sequence[str] | None = None) -> pd.DataFrame:
    """Run ``cfg.study``'s stages; every run applies ``overrides`` (default: the command line's training overrides).
    Returns the runs table (also ``runs.csv``)."""
    base = [*training_overrides(cfg, overrides), *RUN_SETTINGS]
    check_study(cfg, base)
    study = Study(cfg, base)
    with study.pool_context():
        for stage in cfg.study.stages:
            study.run_stage(stage)
    study.write_report()
    return study.runs


def planned_search_seeds(settings: dict[str, Any]) -> set[int]:
    """The seeds a search with ``settings`` trains with, as far as they are known before it runs: its own and its final
    stage's fresh ones (SMAC racing ``n_seeds`` > 1 draws more as it goes; the final comparison then avoids those)."""
    seeds = {int(settings["seed"])}
    final = settings.get("final") or {}
    return seeds | set(fresh_seeds(seeds, final["seeds"])) if final.get("seeds") and final.get("top_k") else seeds


def training_overrides(cfg: DictConfig, overrides: Sequence[str] | None) -> list[str]:
    """The overrides every run applies: ``overrides``, or the command line's, without those of the study itself."""
    if overrides is None:
        overrides = list(HydraConfig.get().overrides.task) if HydraConfig.initialized() else []
    return [item for item in overrides if item.lstrip("+~").split("=", 1)[0].split(".", 1)[0] not in STUDY_KEYS]


class Study:
    """A study's state: its settings, the runs so far, the models each stage chose, and the report's stages."""

    def __init__(self, cfg: DictConfig, base: list[str]):
        self.cfg, self.settings, self.base = cfg, cfg.study, base
        self.output_dir = Path(cfg.output_dir)
        self.runs = pd.DataFrame()
        self.reports: list[StageReport] = []
        self.default = self.settings.default_model.name
        self.models: dict[str, tuple[str, tuple[str, ...]]] = {
            self.default: ("default", tuple(self.settings.default_model.overrides))
        }  # name -> (kind, overrides)
        self.searched: list[str] = []
        self.search_result: SearchResult | None = None
        # Comparisons train with seeds the search never saw, neither in its trials nor in its final stage, which
        # chose the answer by them (re-using those seeds would favour the answer). The default model's noise seeds
        # are the same, so that its final-comparison runs are read back (also when a later invocation adds stages).
        self.reserved = {int(seed) for seed in self.settings.reserved_seeds}
        reserved = planned_search_seeds(search_settings(self.settings)) | self.reserved
        self.noise_seeds = fresh_seeds(reserved, self.settings.noise.seeds)
        self.final_seeds = fresh_seeds(reserved, self.settings.final.seeds)
        self.claims: list[verdicts.Claim] = []
        self.claim_settings = verdicts.ClaimSettings.from_mapping(OmegaConf.to_container(cfg.study.claims))
        self._pools: list[TrialPool] = []
        self._stack = contextlib.ExitStack()
        # Tables and figures are written as the stages go (files only); the W&B run gets them at the end, so that it
        # is not open while the search reports its own runs.
        self._files = Report(OmegaConf.create({"logger": {}}), output_dir=self.output_dir)
        self._scatters: list[tuple[str, pd.DataFrame, str, str, str]] = []

    # ---- running --------------------------------------------------------------------------------------------------

    @contextlib.contextmanager
    def pool_context(self) -> Iterator[None]:
        with self._stack:
            yield

    def pool(self) -> TrialPool:
        """The study's pool, opened when a run first needs it."""
        if not self._pools:
            settings = self.settings
            self._pools.append(
                self._stack.enter_context(
                    open_pool(
                        settings.n_workers,
                        dask_address=settings.dask_address,
                        dask_scheduler_file=settings.dask_scheduler_file,
                        tls=settings.dask_tls,
                        insecure=settings.dask_insecure,
                    )
                )
            )
        return self._pools[0]

    def train(self, specs: Sequence[RunSpec], stage: str) -> pd.DataFrame:
        rows = run_all(specs, output_dir=self.output_dir, overrides=self._overrides, pool=self.pool, stage=stage)
        self.runs = pd.concat([self.runs, rows], ignore_index=True)
        if len(rows) and (rows["status"] != "success").all():  # nothing left to measure: stop, naming why
            first = rows.iloc[0]
            raise ValueError(
                f"study {stage}: all {len(rows)} runs crashed, e.g. {first['run_dir']}: {first['error_message']}"
            )
        return rows

    def _overrides(self, spec: RunSpec) -> list[str]:
        return spec.training_overrides(self.base, list(self.settings.transfer.overrides))

    def specs(self, models: Sequence[str], seeds: Sequence[int], **fields) -> list[RunSpec]:
        return [
            RunSpec(model, self.models[model][0], self.models[model][1], seed, **fields)
            for model in models
            for seed in seeds
        ]

    def run_stage(self, stage: str) -> None:
        log.info("study: stage %s", stage)
        started = time.perf_counter()
        report = getattr(self, f"_{stage}")()
        report.seconds = time.perf_counter() - started
        self.reports.append(report)

    # ---- stages ---------------------------------------------------------------------------------------------------

    def _noise(self) -> StageReport:
        runs = self.train(self.specs([self.default], self.noise_seeds), "noise")
        noise = verdicts.seed_noise(runs, self.default)
        table = self._files.table("noise", noise)
        findings = [
            f"{row['metric']} of {self.default}: {verdicts.fmt(row['mean'], row['seed s.e.'])} (seed s.d. "
            f"{row['seed s.d.']:.3f}) over {row['seeds']} seeds"
            for row in noise.to_dict("records")
        ]
        return StageReport(
            "noise",
            "Seed noise of the default model",
            "How much one model moves with its training seed: every difference below is read against it.",
            findings + self._crashes(runs),
            {"noise": table},
            {},
            math.nan,
        )

    def _sweep(self) -> StageReport:
        models = hand_designed_models(self.settings)
        for name, overrides in models.items():
            self.models[name] = ("hand-designed", tuple(overrides))
        runs = self.train(self.specs(list(models), range(self.settings.sweep.seeds)), "sweep")
        summary = verdicts.model_summary(runs).sort_values("val/error_mean")
        table = self._files.table("sweep", summary)
        figure = self._files.figure("sweep", scatter_figure(summary, "hand-designed sweep"))
        best = summary.iloc[0] if len(summary) else None
        findings = [
            f"Lowest validation error: {best['model']} ({best['val/error_mean']:.3f}, rank disparity "
            f"{best['val/rank_disparity_mean']:.2f}); {len(summary)} models, {self.settings.sweep.seeds} seed(s) each."
            if best is not None
            else "No hand-designed model finished."
        ]
        return StageReport(
            "sweep",
            "Hand-designed models (Sec. 4.3)",
            "Error and rank disparity of standard architectures trained with the study's recipe.",
            findings + self._crashes(runs),
            {"sweep": table},
            {"sweep": figure},
            math.nan,
        )

    def _search(self) -> StageReport:
        settings = search_settings(self.settings)
        cfg = compose_config("search", [], output_dir=self.output_dir / "search")
        cfg.search = OmegaConf.create(settings)
        cfg.search.name = f"{self.cfg.name}-search"
        cfg.search.train_overrides = list(self.base)
        cfg.logger = self._report_config().logger
        if self.settings.n_workers > 1 or self.settings.dask_address or self.settings.dask_scheduler_file:
            pool = self.pool()  # the search runs on the study's workers
            cfg.search.n_workers = pool.capacity
            cfg.search.dask_address = pool.address if isinstance(pool, DaskPool) else None
            cfg.search.dask_scheduler_file = None
            cfg.search.dask_tls, cfg.search.dask_insecure = self.settings.dask_tls, self.settings.dask_insecure
        result = run_face_search(cfg)
        self.search_result = result
        answer = result.final.front if result.final is not None else result.pareto_front
        space = load_space(resolve_space_path(settings["space"]))
        constants = {name for name, hp in space.configspace.items() if hasattr(hp, "value")}
        answer_names = []
        for row in answer.to_dict("records"):
            config = json.loads(row["config"])
            label = " ".join(f"{key}={value}" for key, value in config.items() if key not in constants)
            answer_names.append(f"searched {label}")
            self.models.setdefault(answer_names[-1], ("searched", tuple(space.overrides(config))))
        if answer_names:  # the candidate is chosen here, by the search's own seeds, never by the comparison's
            self.searched = [answer_names[_lowest_error(answer)]]
        final_stage = [] if result.final is None else list(result.final.trials["seed"])
        used = {*result.trials["seed"], *final_stage, *self.reserved}
        self.final_seeds = fresh_seeds(used, self.settings.final.seeds)
        shutil.copyfile(result.output_dir / "pareto_front.png", self.output_dir / "search_front.png")
        tables = {"search_answer": self._files.table("search_answer", answer)}
        trials = result.trials
        self._scatters.append(
            (
                "search_trials",
                trials[trials["status"] == "success"],
                "error",
                "rank_disparity",
                "search trials: validation error vs rank disparity",
            )
        )
        epochs = float(trials["budget"].sum())
        final_epochs = 0.0 if result.final is None else result.final.epochs
        findings = [
            f"{settings['strategy']} search of {settings['space']}: {len(trials)} trials, {epochs:g} epochs, then "
            f"{final_epochs:g} epochs of its final stage; its answer: {len(answer_names)} configuration(s): "
            + "; ".join(answer_names)
            + (
                f". The compared candidate, chosen by the search's own seeds (lowest error): {self.searched[0]}."
                if self.searched
                else "."
            )
        ]
        return StageReport(
            "search",
            "Search (Sec. 4.4) with its final stage (Sec. 4.5.1)",
            "The search's answer is the front of its best configurations re-trained with fresh seeds; its "
            "configuration of lowest error is the candidate the later stages compare.",
            findings,
            tables,
            {"search_front": self.output_dir / "search_front.png"},
            math.nan,
        )

    def _final(self) -> StageReport:
        compared = [self.default, *self.searched, *self._best_hand_designed(self.settings.final.hand_designed)]
        runs = self.train(self.specs(compared, self.final_seeds), "final")
        table, figure = self._models_table(runs, "final", "main", "val", "re-trained models")
        self._dominance(runs, "final", data="main")
        return StageReport(
            "final",
            "The search's answer against the default and the best hand-designed models",
            f"Every model re-trained with seeds {self.final_seeds}; differences paired by seed.",
            self._crashes(runs),
            {"final": table},
            {"final": figure},
            math.nan,
        )

    def _mitigations(self) -> StageReport:
        kinds = set(self.settings.mitigations.models)
        models = [model for model in self._chosen() if self.models[model][0] in kinds]
        seeds = self.final_seeds[: self.settings.mitigations.seeds]
        specs, skipped, titles = [], [], {"none": "Baseline"}
        for name in self.settings.mitigations.names:
            titles[name], inputs = self._mitigation(name)
            for model in models:
                untreated = self.specs([model], seeds)
                treated = []
                for spec in untreated:
                    baseline = self.output_dir / spec.folder
                    extra = (
                        f"mitigation={name}",
                        *(self.settings.mitigations.overrides or {}).get(name, []),
                        *(f"mitigation.{key}='{baseline / BASELINE_INPUTS[key]}'" for key in inputs),
                    )
                    treated.append(dataclasses.replace(spec, mitigation=name, extra=extra))
                if changes_training(self._overrides(untreated[0]), self._overrides(treated[0])):
                    specs += treated
                else:
                    reason = f"{titles[name]} changes nothing in the training of {model}, whose own overrides set it"
                    skipped.append(not_applicable(treated, "mitigations", reason))
        mitigated = pd.concat([self.train(specs, "mitigations"), *skipped], ignore_index=True)
        self.runs = pd.concat([self.runs, *skipped], ignore_index=True)
        runs = pd.concat([self._rows("final", models, seeds), mitigated])
        cells = runs.rename(columns={"test/error": "error", "test/rank_disparity": "rank_disparity"})
        summary = summarize(verdicts.successful(cells), ["rank_disparity"])
        table = self._files.table("mitigations", summary)
        claims = [
            verdicts.lowers(
                runs,
                model,
                name,
                "test/rank_disparity",
                claim_id=f"mitigations/{name}/{self.models[model][0]}/test",
                label=titles[name],
            )
            for model in models
            for name in self.settings.mitigations.names
        ]
        self.claims.extend(claims)
        return StageReport(
            "mitigations",
            "Bias mitigations (Sec. 4.5.3, Table 4.6)",
            f"Each mitigation on the compared models, seeds {seeds}, against the same model's baseline run "
            "(paired by seed; test split).",
            self._crashes(mitigated),
            {"mitigations": table},
            {},
            math.nan,
            notes=[markdown_tables(summary, ["rank_disparity"], titles, split="test", error_scale=100.0)],
        )

    def _robustness(self) -> StageReport:
        seeds = list(range(self.settings.robustness.seeds))
        specs = [
            RunSpec(
                self.default,
                "default",
                self.models[self.default][1],
                seed,
                mitigation=arm,
                extra=(*overrides, *self.settings.robustness.overrides),
            )
            for arm, overrides in ROBUSTNESS_ARMS.items()
            for seed in seeds
        ]
        runs = self.train(specs, "robustness")
        claims = [
            verdicts.lowers(
                runs,
                self.default,
                "AdvERM",
                f"{split}/robustness_bias",
                claim_id=f"robustness/adverm/default/{split}",
                label="AdvERM",
                baseline="plain",
            )
            for split in ("val", "test")
        ]
        self.claims.extend(claims)
        table = self._files.table("robustness", runs)
        return StageReport(
            "robustness",
            "AdvERM against plain training (Sec. 2.9)",
            "Robustness bias (the largest group gap of the distance to the decision boundary, DeepFool) of the "
            f"default model with and without the AdvERM regulariser, seeds {seeds}, paired.",
            self._crashes(runs),
            {"robustness": table},
            {},
            math.nan,
        )

    def _transfer(self) -> StageReport:
        models, seeds = self._chosen(), self.final_seeds[: self.settings.transfer.seeds]
        runs = self.train(self.specs(models, seeds, data="transfer"), "transfer")
        table, figure = self._models_table(runs, "transfer", "transfer", "test", "transfer data set")
        self._dominance(runs, "transfer", data="transfer")
        return StageReport(
            "transfer",
            "Transfer to a second data set (Tables 4.5 / 4.8)",
            f"The compared models trained and evaluated with {list(self.settings.transfer.overrides)}, seeds {seeds}.",
            self._crashes(runs),
            {"transfer": table},
            {"transfer": figure},
            math.nan,
        )

    def _models_table(self, runs: pd.DataFrame, name: str, data: str, split: str, title: str) -> tuple[Path, Path]:
        """The models' means ± s.e. over seeds as a table, a figure and (for W&B) a native scatter plot of ``split``."""
        summary = verdicts.model_summary(runs, data=data)
        self._scatters.append(
            (
                f"{name}_front",
                summary,
                f"{split}/error_mean",
                f"{split}/rank_disparity_mean",
                f"{title}: {split} error vs rank disparity (means over seeds)",
            )
        )
        return self._files.table(name, summary), self._files.figure(name, scatter_figure(summary, title))

    # ---- choices and claims ---------------------------------------------------------------------------------------

    def _best_hand_designed(self, count: int) -> list[str]:
        """The ``count`` hand-designed models of lowest mean validation error in the sweep."""
        sweep = self._rows("sweep", [name for name, (kind, _) in self.models.items() if kind == "hand-designed"])
        if sweep.empty or not count:
            return []
        means = verdicts.successful(sweep).groupby("model")["val/error"].mean().sort_values()
        return list(means.index[:count])

    def _chosen(self) -> list[str]:
        """The models mitigations and transfer compare: the default, the searched model of lowest mean validation
        error in the final comparison and the best hand-designed one."""
        final = verdicts.successful(self._rows("final", list(self.models)))
        means = final.groupby(["model", "kind"])["val/error"].mean().reset_index().sort_values("val/error")
        chosen = [self.default]
        for kind in ("searched", "hand-designed"):
            rows = means[means["kind"] == kind]
            chosen += list(rows["model"][:1])
        return chosen

    def _rows(self, stage: str, models: Sequence[str], seeds: Sequence[int] | None = None) -> pd.DataFrame:
        if self.runs.empty:
            return self.runs
        rows = self.runs[(self.runs["stage"] == stage) & self.runs["model"].isin(list(models))]
        return rows if seeds is None else rows[rows["seed"].isin(list(seeds))]

    def _dominance(self, runs: pd.DataFrame, stage: str, data: str) -> list[verdicts.Claim]:
        """Does the searched candidate dominate the default model and each compared hand-designed model, on the
        validation and the test split? Claim ids name the baseline by kind (``hand-designed-2``: the second best)."""
        hand_designed = [model for model in self._chosen()[1:] if self.models[model][0] == "hand-designed"]
        if stage == "final":
            hand_designed = self._best_hand_designed(self.settings.final.hand_designed)
        baselines = {self.default: "default"} | {
            model: "hand-designed" + ("" if rank == 1 else f"-{rank}") for rank, model in enumerate(hand_designed, 1)
        }
        present = set(runs["model"])
        claims = [
            verdicts.dominance(
                runs, candidate, baseline, claim_id=f"{stage}/dominates/{kind}/{split}", split=split, data=data
            )
            for candidate in self.searched
            if candidate in present
            for baseline, kind in baselines.items()
            if baseline in present
            for split in ("val", "test")
        ]
        self.claims.extend(claims)
        return claims

    def _mitigation(self, name: str) -> tuple[str, list[str]]:
        """A mitigation's column title and the keys of :data:`BASELINE_INPUTS` it declares (read from its baseline
        run)."""
        declared = compose_config("train", [*self.base, f"mitigation={name}"], output_dir=".").mitigation
        return declared.get("title", name), [key for key in BASELINE_INPUTS if key in declared]

    def _crashes(self, runs: pd.DataFrame) -> list[str]:
        failed = verdicts.failed(runs)
        return (
            [
                f"{len(failed)} of {len(runs)} runs crashed and are left out of this stage's numbers: "
                + "; ".join(f"{row.model} seed {row.seed}: {row.error_message}" for row in failed.itertuples())
            ]
            if len(failed)
            else []
        )

    # ---- report ---------------------------------------------------------------------------------------------------

    def _report_config(self) -> DictConfig:
        """The study's own report logger: the ``logger`` group with the command line's overrides, as ``train.py``
        and ``search.py`` take it (``logger=none``, ``logger.wandb.offline=false``), writing into the study's folder."""
        logger = self.cfg.get("logger")
        node = OmegaConf.to_container(logger, resolve=True) if logger else {}
        return OmegaConf.create({"logger": node, "output_dir": str(self.output_dir)})

    def write_report(self) -> None:
        """claims.csv (every claim decided together: Holm's correction spans the primary ones), runs.csv, the forest
        plot, report.md and report.html; then the W&B run with the tables, figures, scatter plots and the page."""
        claims = verdicts.decide(self.claims, self.claim_settings)
        self._files.table("runs", self.runs)
        self._files.table("claims", claims)
        for stage in self.reports:  # each stage's claims lead its findings, with their verdicts
            stage.findings[:0] = [
                verdicts.finding(row, self.claim_settings.power)
                for row in claims[claims["stage"] == stage.name].to_dict("records")
            ]
        times = {stage.name: stage.seconds for stage in self.reports}
        holding = int((claims["verdict"] == verdicts.HOLDS).sum())
        primary = claims[claims["family"] == verdicts.PRIMARY]
        alpha = self.claim_settings.alpha
        rule = (
            f"one-sided paired t-tests; the primary claims' family-wise error rate held at {alpha:g} by Holm's "
            f"method, exploratory claims unadjusted; no claim holds on fewer than {min_seeds(alpha)} seeds"
        )
        counts = claims.groupby(["family", "verdict"]).size()
        tally = "; ".join(
            f"{family}: " + ", ".join(f"{count} {verdict}" for verdict, count in counts[family].items())
            for family in (verdicts.PRIMARY, verdicts.EXPLORATORY)
            if family in counts.index.get_level_values(0)
        )
        header = {
            "training overrides": " ".join(self.base),
            "stages (minutes)": ", ".join(f"{name} {seconds / 60:.1f}" for name, seconds in times.items()),
            "primary claims holding": f"{(primary['verdict'] == verdicts.HOLDS).sum()} of {len(primary)} ({rule}); "
            f"all claims: {holding} of {len(claims)}",
        }
        unmatched = self.claim_settings.unmatched(list(claims["id"]))
        if unmatched:  # a typo would leave the paper's claims exploratory and unadjusted: say so where it is read
            header["study.claims.primary"] = f"patterns that name no claim of this study: {unmatched}"
            log.warning("study.claims.primary: %s name no claim of this study", unmatched)
        forest = self._files.figure("claims_forest", forest_figure(claims))
        overview = StageReport(
            "claims",
            "Claims",
            "The forest plot shows every claim's effect in the claimed direction with its 95 % interval, in units of "
            "its paired s.d. (right of 0: the claimed way), coloured by verdict; the table has the numbers, each "
            "stage below its claims in words.",
            [f"Verdicts ({rule}): {tally}."],
            {"claims": self.output_dir / "claims.csv", "runs": self.output_dir / "runs.csv"},
            {"claims_forest": forest},
            sum(times.values()),
        )
        stages = [overview, *self.reports]
        _, page = write_pages(
            self.output_dir,
            title=f"fairnas study: {self.cfg.name}",
            header=header,
            stages=stages,
            config_yaml=OmegaConf.to_yaml(self.cfg.study, resolve=True),
        )
        with Report(
            self._report_config(), output_dir=self.output_dir, name=f"study-{self.cfg.name}", job_type="study"
        ) as report:
            for stage in stages:
                for name, path in stage.tables.items():
                    report.log_table(name, pd.read_csv(path))
                for name, path in stage.figures.items():
                    report.log_image(name, path)
            for scatter in self._scatters:
                report.scatter(*scatter)
            report.log_html("report", page)
            report.metrics({f"minutes/{name}": seconds / 60 for name, seconds in times.items()})
            report.metrics({"claims": len(claims), "claims_holding": holding})
        log.info(
            "study report: %s (%d of %d claims hold, %.1f min)", page, holding, len(claims), sum(times.values()) / 60
        )


def _lowest_error(answer: pd.DataFrame) -> int:
    """The position in a search's answer (final front: ``error_mean``; observed front: ``error``) of its
    configuration of lowest error, the first objective of every claim."""
    column = "error_mean" if "error_mean" in answer else "error"
    return int(answer[column].reset_index(drop=True).idxmin())


main = hydra_command(run_study, "study")
