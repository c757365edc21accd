"""Thesis Chapter 4 at small scale on the embedded faces (``experiment=showcase``): one command, one report.

Stages (each trains ordinary ``train`` runs under ``<out>/runs``; a finished run is read back, so an interrupted
pipeline resumes where it stopped):

1. ``noise``: the default configuration (searchable DPN, ops [3, 0, 1], CosFace, the preset's AdamW recipe) with
   ``--noise-seeds`` seeds: the seed standard error every later comparison is read against.
2. ``sweep`` (Sec. 4.3): hand-designed models, ``searchspaces/timm_zoo_small.yaml``'s architectures with the
   preset's head (``Scale.heads``), the preset's recipe, one seed; error vs rank disparity.
3. ``search`` (Sec. 4.4): search efficiency on the tabular benchmark of the preset (``bench/tabular.py``: every
   configuration of ``searchspaces/dpn_table.yaml`` trained once with per-epoch metrics; the committed table
   ``bench/tables/dpn_showcase`` when its settings match, else built under ``<out>/table``): SMAC (multi-fidelity
   Hyperband, ParEGO, promoted configurations continue) vs random search at equal consumed epochs with
   ``--table-seeds`` seeds (``bench/search_efficiency.py``'s protocol; hypervolume also as a share of the table's
   own front). Then a live SMAC search on the same space and preset with training seed 1 (the table used seed 0;
   ``--live-seeds 1 2`` runs more), read against the table: does the table's verdict hold live?
4. ``final``: the first live search's Pareto front and the best hand-designed model (lowest validation error) re-trained
   with ``--final-seeds`` fresh seeds, and the default configuration's stage-1 seeds: mean +- standard error on
   validation and test.
5. ``mitigations`` (Sec. 4.5.3, Table 4.6): the default DPN, the best searched and the best hand-designed model x
   {baseline, Flipped, Angular, SensitiveNets} (``compare.py``'s runs) with the first ``--compare-seeds`` of the
   final stage's seeds, whose baselines are the noise and final stages' runs (``reuse_runs``); and AdvERM (thesis
   Sec. 2.9) vs plain training of the default DPN, robustness bias from DeepFool.
6. ``transfer`` (Tables 4.5 / 4.8): the same models trained on a second synthetic set rendered from another seed
   with the bias reversed (g0 is the harder minority group).

Writes ``<out>/report.md`` (tables, PNG figures, and for each claim whether it holds and by what margin),
``<out>/*.csv`` and, unless ``--logger none``, one offline W&B run with the same tables and figures.

    PYTHONHASHSEED=0 python bench/showcase.py --out outputs/showcase            # the full pipeline
    PYTHONHASHSEED=0 python bench/showcase.py --quick --out /tmp/showcase       # smoke test, about a minute
    PYTHONHASHSEED=0 python bench/showcase.py --trainer gpu --out outputs/showcase_gpu   # the same on a GPU
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
import time
from collections.abc import Sequence
from pathlib import Path

import pandas as pd
import search_efficiency
import tabular
import torch
from _showcase_report import Candidate, write_report
from hydra.errors import HydraException
from omegaconf import OmegaConf

from fairnas.config import compose_config
from fairnas.search import SearchResult, load_space
from fairnas.search.final import fresh_seeds
from fairnas.tasks.checks import check_training_settings
from fairnas.tasks.cli import USER_ERRORS
from fairnas.tasks.compare import run_comparison, train_once
from fairnas.tasks.reporting import Report

REPOSITORY = Path(__file__).resolve().parents[1]
OBJECTIVES = ("error", "rank_disparity")
SPLITS = ("val", "test")
DEFAULT_MODEL = Candidate("default DPN", "default", ())
TRANSFER_OVERRIDES = (  # another seed, the bias reversed: g0 is the 30% training minority and the harder group
    "data.table.seed=1",
    "data.table.train_group_share=[0.3,0.7]",
    "data.table.hard_group=0",
)
ROBUSTNESS_PROBES = ("eval.robustness.max_probes=128", "eval.robustness.estimator.steps=20")  # DeepFool's budget
ADVERM_ARMS = (  # (candidate, overrides before the candidate's): plain training is only evaluated for robustness bias
    (Candidate("plain", "default", ("eval.robustness_bias=true",)), ROBUSTNESS_PROBES),
    (Candidate("AdvERM", "default", ("regularizer=robustness_bias", *ROBUSTNESS_PROBES)), ()),
)


@dataclasses.dataclass(frozen=True)
class Scale:
    """How much of everything the pipeline runs; fixed per variant, the same for every method."""

    noise_seeds: int = 5
    table_seeds: int = 20
    total_budget: float = 96  # consumed epochs per search (24 full trials)
    max_budget: int = 4  # epochs of a full trial (= the preset's trainer.max_epochs)
    final_seeds: int = 3
    compare_seeds: int = 2
    adverm_seeds: int = 3
    architectures: tuple[str, ...] | None = None  # None: every architecture of timm_zoo_small.yaml
    heads: tuple[str, ...] = ("cosface",)
    mitigations: tuple[str, ...] = ("flipped", "angular", "sensitivenets")
    table_space: str | None = "searchspaces/dpn_table.yaml"  # None: QUICK_TABLE_SPACE
    live_seeds: tuple[int, ...] = (1,)  # live SMAC searches: search and training seed (the table's runs used 0)
    overrides: tuple[str, ...] = ()  # on top of experiment=showcase


QUICK = Scale(
    noise_seeds=2,
    table_seeds=3,
    total_budget=4,
    max_budget=2,
    final_seeds=2,
    compare_seeds=1,
    adverm_seeds=1,
    architectures=("lcnet_050",),
    table_space=None,
    live_seeds=(1,),
    overrides=(
        "data.table.n_identities=40",
        "data.table.images_per_identity=3",
        "data.table.image_size=32",
        "data.table.split_fractions=[0.5,0.25,0.25]",
        "data.batch_size=16",
        "embedding_dim=16",
        "eval.robustness.max_probes=8",
        "eval.robustness.estimator.steps=2",
    ),
)
QUICK_TABLE_SPACE = """
hyperparameters:
  op0: {type: categorical, choices: [0, 3], key: backbone.ops.0}
  op1: {type: constant, value: 0, key: backbone.ops.1}
  op2: {type: categorical, choices: [1, 6], key: backbone.ops.2}
  head: {type: constant, value: cosface, key: head}
  lr: {type: ordinal, sequence: [0.001, 0.003], key: optimizer.lr}
"""
TABLE_NAME = "dpn_showcase"


# The Scale fields a flag may change: type and help.
SCALE_FLAGS = {
    **{f"{stage}_seeds": (int, None) for stage in ("noise", "table", "final", "compare", "adverm")},
    "total_budget": (float, "consumed epochs per search"),
    "max_budget": (int, "epochs of every full training run and search trial"),
}


def base_overrides(scale: Scale, trainer: str) -> list[str]:
    return [
        "experiment=showcase",
        f"trainer={trainer}",
        "trainer.enable_progress_bar=false",
        "trainer.enable_model_summary=false",
        "logger=none",
        f"trainer.max_epochs={scale.max_budget}",
        *scale.overrides,
    ]


def train_seeds(candidate: Candidate, seeds: Sequence[int], overrides: Sequence[str], runs: Path) -> pd.DataFrame:
    """One row per seed with the candidate's val/test metrics (runs cached under ``runs/<candidate>/seed<s>``)."""
    rows = []
    for seed in seeds:
        metrics = train_once(
            runs / candidate.folder / f"seed{seed}", [*overrides, *candidate.overrides, f"seed={seed}"]
        )
        rows.append(
            {
                "model": candidate.name,
                "kind": candidate.kind,
                "seed": seed,
                **{
                    f"{split}/{key}": float(value)
                    for split in SPLITS
                    for key, value in metrics[split].items()
                    if isinstance(value, (int, float))
                },
            }
        )
    return pd.DataFrame(rows)


def hand_designed(scale: Scale) -> list[Candidate]:
    """timm_zoo_small.yaml's architectures x the heads, with the preset's optimizer and learning rate."""
    space = load_space(REPOSITORY / "searchspaces" / "timm_zoo_small.yaml")
    architectures = scale.architectures or tuple(space.configspace["architecture"].choices)
    return [
        Candidate(
            f"{architecture} {head}",
            "hand-designed",
            ("backbone=timm", f"backbone.name={architecture}", f"head={head}"),
        )
        for architecture in architectures
        for head in scale.heads
    ]


def table_space(scale: Scale, out: Path) -> Path:
    """The space file the table and the live search use (QUICK's written under ``<out>/table``)."""
    if scale.table_space is not None:
        return REPOSITORY / scale.table_space
    path = out / "table" / "space.yaml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(QUICK_TABLE_SPACE)
    return path


def table_problem(scale: Scale, out: Path) -> search_efficiency.Problem:
    """The tabular benchmark of the preset: the committed one when it was built from the same space, data and
    budget (``scale.overrides`` on the preset), else one built (once; finished runs are read back) under
    ``<out>/table``."""
    space = table_space(scale, out)
    committed = tabular.TABLES / f"{TABLE_NAME}.json"
    if committed.is_file():
        spec = json.loads(committed.read_text())
        if (
            spec["train_overrides"] == tabular.table_overrides(scale.overrides, scale.max_budget)
            and REPOSITORY / spec["space"] == space
        ):
            return search_efficiency.table_problem(TABLE_NAME)
    tabular.build(
        TABLE_NAME,
        scale.overrides,
        out / "table" / "runs",
        tables=out / "table",
        space_file=space,
        max_budget=scale.max_budget,
    )
    return search_efficiency.table_problem(TABLE_NAME, tables=out / "table")


def live_problem(
    scale: Scale, overrides: Sequence[str], table: search_efficiency.Problem, out: Path
) -> search_efficiency.Problem:
    """The table's space trained live on the preset, with the table's reference point and front for scale."""
    return search_efficiency.face_problem(
        "live",
        tuple(overrides),
        table.reference_point,
        scale.total_budget,
        scale.max_budget,
        space_file=table_space(scale, out),
        max_hypervolume=table.max_hypervolume,
    )


def searched_front(
    problem: search_efficiency.Problem, search_dir: Path, seed: int
) -> tuple[pd.DataFrame, list[Candidate]]:
    """Live SMAC search ``seed``'s Pareto front (its trials' validation objectives) and a candidate per
    configuration."""
    result = SearchResult.load(search_dir / problem.name / "smac" / f"seed{seed}" / "search")
    candidates = []
    for config in map(json.loads, result.pareto_front["config"]):
        name = f"SMAC {config['op0']}{config['op1']}{config['op2']} {config['head']} lr {config['lr']:.2g}"
        candidates.append(Candidate(name, "searched", tuple(problem.space.overrides(config))))
    return result.pareto_front.assign(model=[c.name for c in candidates]), candidates


def summarize_seeds(runs: pd.DataFrame) -> pd.DataFrame:
    """Mean and standard error over seeds of every val/test objective, per model."""
    columns = [f"{split}/{name}" for split in SPLITS for name in OBJECTIVES]
    grouped = runs.groupby(["model", "kind"], sort=False)[columns]
    summary = grouped.mean().add_suffix("_mean").join(grouped.sem().add_suffix("_sem"))
    return summary.join(grouped.size().rename("n_seeds")).reset_index()


def run_mitigations(
    models: Sequence[Candidate], seeds: Sequence[int], overrides: Sequence[str], out: Path, mitigations: Sequence[str]
) -> pd.DataFrame:
    """``compare.py``'s table over ``seeds``; its baselines are the noise and final stages' runs of those seeds."""
    cfg = compose_config("compare", ["logger=none", "name=showcase"], output_dir=out / "mitigations")
    cfg.models = {model.name: list(model.overrides) or ["seed=0"] for model in models}
    cfg.train_overrides = list(overrides)
    cfg.seeds = list(seeds)
    cfg.reuse_runs = [str(out / "runs" / stage) for stage in ("noise", "final")]
    cfg.mitigations = ["none", *mitigations]
    cfg.metrics = list(OBJECTIVES[1:])
    run_comparison(cfg)
    return pd.read_csv(out / "mitigations" / "runs.csv")


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, default=REPOSITORY / "outputs" / "showcase")
    parser.add_argument("--quick", action="store_true", help="tiny data and budgets: a smoke test of every stage")
    parser.add_argument("--trainer", default="cpu", help="conf/trainer/ group (cpu; gpu on a CUDA machine)")
    parser.add_argument("--logger", choices=["wandb", "none"], default="wandb", help="the report's own run")
    parser.add_argument("--threads", type=int, help="torch intra-op threads (default: torch's, one per core)")
    for field, (kind, description) in SCALE_FLAGS.items():
        parser.add_argument(f"--{field.replace('_', '-')}", type=kind, help=description)
    parser.add_argument(
        "--live-seeds",
        type=int,
        nargs="+",
        help="live SMAC searches, one per seed (default 1); the first one's front is re-trained",
    )
    args = parser.parse_args(argv)
    scale = QUICK if args.quick else Scale()
    changes = {field: getattr(args, field) for field in SCALE_FLAGS}
    bad = [
        f"--{name.replace('_', '-')}={value}: must be >= 1"
        for name, value in changes.items()
        if value is not None and value < 1
    ]
    if args.live_seeds is not None:
        changes["live_seeds"] = tuple(args.live_seeds)
        if min(args.live_seeds) < 0 or len(set(args.live_seeds)) < len(args.live_seeds):
            bad.append(f"--live-seeds {' '.join(map(str, args.live_seeds))}: must be distinct seeds >= 0")
    if bad:
        parser.error("; ".join(bad))
    scale = dataclasses.replace(scale, **{name: value for name, value in changes.items() if value is not None})
    if scale.total_budget < scale.max_budget:
        parser.error(f"--total-budget={scale.total_budget:g} is below one full trial ({scale.max_budget} epochs)")
    search_efficiency.quiet_training_logs()
    if args.threads:
        torch.set_num_threads(args.threads)

    out, runs = args.out, args.out / "runs"
    overrides = base_overrides(scale, args.trainer)
    try:  # every override and the device checked before anything trains or is written
        check_training_settings(compose_config("train", overrides, output_dir="."))
    except (*USER_ERRORS, HydraException) as error:
        parser.error(str(error).splitlines()[0])
    timings: dict[str, float] = {}

    def stage(name: str):
        print(f"[showcase] {name} ...", file=sys.stderr, flush=True)
        timings[name] = time.perf_counter()

    def done(name: str) -> None:
        timings[name] = time.perf_counter() - timings[name]

    stage("noise")
    noise = train_seeds(DEFAULT_MODEL, range(scale.noise_seeds), overrides, runs / "noise")
    done("noise")

    stage("sweep")
    sweep = pd.concat([train_seeds(c, [0], overrides, runs / "sweep") for c in hand_designed(scale)])
    done("sweep")

    stage("table")  # not counted in the pipeline's time when the committed table is used (it then takes seconds)
    table = table_problem(scale, out)
    done("table")

    stage("search")
    table_runs = search_efficiency.benchmark(
        table,
        methods=["smac", "random"],
        seeds=range(scale.table_seeds),
        total_budget=scale.total_budget,
        work_dir=runs / "table_search",
    )
    live = live_problem(scale, overrides, table, out)
    live_runs = search_efficiency.benchmark(
        live, methods=["smac"], seeds=scale.live_seeds, total_budget=scale.total_budget, work_dir=runs / "search"
    )
    done("search")

    stage("final")
    front, front_candidates = searched_front(live, runs / "search", scale.live_seeds[0])
    if not front_candidates:
        parser.error(
            f"--total-budget={scale.total_budget:g}: the live SMAC search finished no trial at the full "
            f"budget ({scale.max_budget} epochs), so there is no searched front; raise it (finished runs "
            "are reused)"
        )
    final_seeds = fresh_seeds([0, *scale.live_seeds], scale.final_seeds)
    best_hand = sweep.sort_values("val/error").iloc[0]["model"]
    hand_candidates = [c for c in hand_designed(scale) if c.name == best_hand]
    final_runs = pd.concat(
        [
            noise,
            *(train_seeds(c, final_seeds, overrides, runs / "final") for c in hand_candidates),
            *(train_seeds(c, final_seeds, overrides, runs / "final") for c in front_candidates),
        ]
    )
    final = summarize_seeds(final_runs)
    done("final")

    stage("mitigations")
    best = {
        kind: final[final["kind"] == kind].sort_values("val/error_mean").iloc[0]["model"]
        for kind in ("searched", "hand-designed")
    }
    by_name = {c.name: c for c in [DEFAULT_MODEL, *front_candidates, *hand_candidates]}
    compared = [DEFAULT_MODEL, by_name[best["searched"]], by_name[best["hand-designed"]]]
    mitigations = run_mitigations(compared, final_seeds[: scale.compare_seeds], overrides, out, scale.mitigations)
    adverm = pd.concat(
        train_seeds(arm, range(scale.adverm_seeds), [*overrides, *before], runs / "adverm")
        for arm, before in ADVERM_ARMS
    )
    done("mitigations")

    stage("transfer")
    transfer_overrides = [*overrides, *TRANSFER_OVERRIDES]
    transfer = summarize_seeds(
        pd.concat([train_seeds(c, final_seeds, transfer_overrides, runs / "transfer") for c in compared])
    )
    done("transfer")

    cfg = compose_config("train", [*overrides, f"logger={args.logger}"], output_dir=out)
    settings = {
        "scale": dataclasses.asdict(scale),
        "overrides": overrides,
        "transfer": list(TRANSFER_OVERRIDES),
        "reference_point": list(table.reference_point),
        "data": OmegaConf.to_container(cfg.data.table, resolve=True),
    }
    with Report(cfg, output_dir=out, config=settings, name="showcase", job_type="showcase") as report:
        write_report(
            report,
            settings=settings,
            timings=timings,
            noise=noise,
            sweep=sweep,
            table_runs=table_runs,
            table=table,
            live_runs=live_runs,
            live=live,
            front=front,
            final=final,
            mitigations=mitigations,
            adverm=adverm,
            transfer=transfer,
            search_dir=runs / "search",
        )
    pipeline = sum(seconds for name, seconds in timings.items() if name != "table")
    print(
        f"[showcase] report: {out / 'report.md'} ({pipeline / 60:.1f} min, the table {timings['table'] / 60:.1f} min)",
        file=sys.stderr,
    )


if __name__ == "__main__":
    main()
