"""``python study.py``: every stage of thesis Chapter 4 on the smallest scale, its report (claims, tables, figures, a
page a browser renders, a W&B run with native scatter plots), resuming without training again, two Dask workers,
a real data set's on-disk format with every stage, and claims recomputed from the runs (the statistics themselves:
tests/test_study_inference.py); and a stage that is its module alone: registered, checked and run with the others."""

from __future__ import annotations

import importlib
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from omegaconf import OmegaConf
from scipy import stats

from bench.evidence.results import study_tables
from fairnas.config import compose_config
from fairnas.study import claims
from fairnas.study import runs as study_runs
from fairnas.study.checks import check_study
from fairnas.study.context import StudyContext
from fairnas.study.inference import ZERO_VARIANCE
from fairnas.study.stages import STAGES, Stage, check_stages, register, run_stage
from fairnas.validation import SettingError
from tests.helpers import assert_matches_golden, chromium, needs_chromium, page_overflows
from tests.layouts import write_celeba

REPO = Path(__file__).resolve().parents[1]
SMALL = ["study=smoke", "trainer.max_epochs=1", "data.batch_size=16", "data.eval_batch_size=64", "embedding_dim=32"]
SMOKE = ["experiment=smoke", *SMALL]  # experiment=smoke sizes the synthetic set, so other data sets take SMALL only


def study(out: Path, cache_dir: Path, *overrides: str, base: list[str] = SMOKE) -> subprocess.CompletedProcess:
    # One thread per run in every pool (a local pool's workers, and a run alone in its pool, take OMP_NUM_THREADS
    # from the environment): float reductions split over other thread counts round differently, which moves a
    # near-chance smoke model by a probe or more.
    env = {
        **os.environ,
        "FAIRNAS_CACHE_DIR": str(cache_dir),
        "PYTHONHASHSEED": "0",
        "WANDB_MODE": "offline",
        "OMP_NUM_THREADS": "1",
    }
    command = [sys.executable, str(REPO / "study.py"), *base, f"paths.cache_dir={cache_dir}", f"hydra.run.dir={out}"]
    return subprocess.run([*command, *overrides], env=env, capture_output=True, text=True, timeout=900, cwd=out.parent)


@pytest.fixture(scope="module")
def smoke_study(tmp_path_factory):
    """One smoke study (every stage): its folder and data cache, read-only for the tests that use them (a test that
    runs the study again copies the folder first)."""
    root = tmp_path_factory.mktemp("study")
    cache = tmp_path_factory.mktemp("study_cache")
    first = study(root / "smoke", cache)
    assert first.returncode == 0, first.stderr[-4000:]
    return root / "smoke", cache


def test_every_stage_runs_and_every_claim_is_decided_from_the_runs(smoke_study):
    out, _ = smoke_study
    runs = pd.read_csv(out / "runs.csv")
    trained = set(STAGES) - {"search"}  # the search's trials are its own records: search/trials.csv
    assert set(runs["stage"]) == trained and runs["status"].isin(["success", claims.NOT_APPLICABLE]).all()
    assert set(runs["data"]) == {"main", "transfer"}
    assert {"balanced", "flipped", "plain", "AdvERM"} <= set(runs["mitigation"])
    final = runs[runs["stage"] == "final"]
    assert final.groupby("model")["seed"].apply(sorted).map(tuple).nunique() == 1  # every model, the same seeds
    search = pd.read_csv(out / "search" / "trials.csv")
    chose_the_answer = pd.read_csv(out / "search" / "final_trials.csv")
    # fresh seeds: neither the search's trials' nor those of the final stage that chose the answer
    assert not set(final["seed"]) & (set(search["seed"]) | set(chose_the_answer["seed"]))
    noise = runs[runs["stage"] == "noise"]
    default_final = final[final["kind"] == "default"]
    assert set(default_final["run_dir"]) <= set(noise["run_dir"])  # the noise runs, read back

    table = pd.read_csv(out / "claims.csv")
    assert list(table.columns) == list(claims.COLUMNS) and table["id"].is_unique
    assert table["verdict"].isin(claims.VERDICTS).all() and set(table["family"]) == {"primary", "exploratory"}
    assert set(table["stage"]) == {name for name, stage in STAGES.items() if stage.claims}
    assert all(row["id"].startswith(STAGES[row["stage"]].claims) for row in table.to_dict("records"))
    # two seeds are below every claim's floor (8 for the primary family, 5 for an exploratory claim), and the report
    # says so plainly, in its header and above the claims
    assert set(table["verdict"]) <= {claims.TOO_FEW_SEEDS, claims.NOT_APPLICABLE}
    assert (out / "report.md").read_text().count(
        "No claim of this study can hold: every tested claim rests on 2 seeds"
    ) == 2
    # one claim recomputed from runs.csv: a mitigation's effect, paired by seed with its baseline
    row = table[table["id"] == "mitigations/balanced/default/test"].iloc[0]
    model = row["claim"].split(" of ", 1)[1]
    treated = runs[(runs["model"] == model) & (runs["mitigation"] == "balanced")].set_index("seed")
    baseline = runs[(runs["model"] == model) & (runs["mitigation"] == "none") & (runs["stage"] == "final")]
    baseline = baseline.set_index("seed").loc[treated.index]
    difference = treated["test/rank_disparity"] - baseline["test/rank_disparity"]
    assert row["n"] == 2 and row["effect"] == pytest.approx(difference.mean())
    if difference.std() > 0:
        expected = stats.ttest_rel(treated["test/rank_disparity"], baseline["test/rank_disparity"], alternative="less")
        assert row["p"] == pytest.approx(expected.pvalue)
        flips = stats.permutation_test(
            (difference.to_numpy(),), np.mean, permutation_type="samples", n_resamples=np.inf, alternative="less"
        )
        assert row["p_exact"] == pytest.approx(flips.pvalue)
    primary = table[table["family"] == "primary"]
    assert set(primary["id"]) >= {"final/dominates/default/test", "mitigations/sensitivenets/default/test"}
    assert primary["p_holm"].notna().all() and table.loc[table["family"] == "exploratory", "p_holm"].isna().all()
    assert primary["p_exact_holm"].notna().all()
    tested = primary[primary["verdict"] != claims.NOT_APPLICABLE]
    assert (tested["level"] == 0.05 / len(tested)).all()  # the plan level alpha / m, whatever the p-values
    degenerate = table[table["status"] == ZERO_VARIANCE]  # no spread: no interval, no detectable effect
    assert degenerate[["ci_low", "ci_high", "mde"]].isna().all().all()
    # the compared candidate was chosen by the search's own final stage: its configuration of lowest error
    answer = pd.read_csv(out / "search" / "final_front.csv")
    searched = final[final["kind"] == "searched"]["model"].unique()
    assert len(searched) == 1 and len(answer) >= 1

    report = (out / "report.md").read_text()
    assert report.index("![claims_forest]") < report.index("## Seed noise")  # the forest plot leads
    ran = re.search(r"^- \*\*stages \(minutes\)\*\*: (.*)$", report, re.MULTILINE).group(1)
    assert [each.split()[0] for each in ran.split(", ")] == list(STAGES)  # every registered stage, in its order
    assert report.count("\n## ") == 1 + len(STAGES)  # the claims, then one section per stage
    for figure in re.findall(r"!\[[^]]*\]\(([^)]+)\)", report):
        assert (out / figure).is_file()
    assert_matches_golden(table, "smoke_study_claims.csv")  # last: it skips on a CPU vendor the set was not recorded on


@pytest.mark.integration
def test_a_second_invocation_trains_nothing(smoke_study, tmp_path):
    first, cache = smoke_study
    out = tmp_path / "smoke"
    shutil.copytree(first, out)
    stamps = {path: path.stat().st_mtime_ns for path in (out / "runs").rglob("metrics.json")}
    second = study(out, cache)
    assert second.returncode == 0, second.stderr[-4000:]
    after = {path: path.stat().st_mtime_ns for path in (out / "runs").rglob("metrics.json")}
    assert after == stamps and len(after) > 10
    assert "runs to train" not in second.stderr and "re-training runs to go" not in second.stderr


@pytest.mark.integration
def test_the_slowest_models_cost_levers_train_fewer_runs_and_drop_only_their_claims(smoke_study, tmp_path):
    """``study.final.hand_designed_seeds`` trains the hand-designed model on the first of the final seeds and
    ``study.transfer.models`` leaves a kind out of the transfer stage (the showcase's levers for ResNet-18): a
    re-invocation of the smoke study with a third final seed trains it for the default and the searched model only,
    and claims no transfer against the hand-designed one."""
    out, cache = smoke_study
    again = tmp_path / "smoke"
    shutil.copytree(out, again)
    levers = ["study.final.seeds=3", "study.noise.seeds=3", "study.final.hand_designed_seeds=2"]
    done = study(again, cache, *levers, "study.transfer.models=[default,searched]", "logger=none")
    assert done.returncode == 0, done.stderr[-4000:]
    runs = pd.read_csv(again / "runs.csv")
    final = runs[runs["stage"] == "final"].groupby("kind")["seed"].nunique().to_dict()
    assert final == {"default": 3, "searched": 3, "hand-designed": 2}, final
    claims = pd.read_csv(again / "claims.csv").set_index("id")
    assert claims.loc["final/dominates/hand-designed/test", "n"] == 2
    assert claims.loc["final/dominates/default/test", "n"] == 3
    transfer = {id_ for id_ in claims.index if id_.startswith("transfer/")}
    assert transfer == {f"transfer/dominates/default/{split}" for split in ("val", "test")}, transfer


@needs_chromium
def test_the_report_page_renders_every_figure_and_every_claim_with_a_verdict(smoke_study, tmp_path):
    out, _ = smoke_study
    dom = chromium(tmp_path, "--dump-dom", (out / "report.html").as_uri()).stdout.decode()
    images = re.findall(r"<img alt='[^']*' src='data:image/png;base64,", dom.replace('"', "'"))
    assert len(images) == len(re.findall(r"!\[", (out / "report.md").read_text())) > 3
    findings = re.findall(r"<p class=\"finding\">(.*?)</p>", dom, flags=re.S)
    claim_lines = [f for f in findings if " lowers " in f or " dominates " in f]
    assert claim_lines and all(re.search(r"<strong>(too few seeds|not applicable)</strong>", f) for f in claim_lines)
    assert "**" not in dom  # Markdown rendered, not shown
    assert not page_overflows(out / "report.html", tmp_path)[0]  # every table fits the page (or scrolls inside)
    assert re.search(r"<img alt=.claims_forest.", dom).start() == dom.index("<img")  # the forest plot comes first
    shot = tmp_path / "shot.png"
    chromium(tmp_path, f"--screenshot={shot}", (out / "report.html").as_uri())
    from PIL import Image

    pixels = np.asarray(Image.open(shot).convert("L"))
    assert pixels.std() > 10  # drawn, not blank


@pytest.mark.integration
def test_two_dask_workers_train_the_same_runs_with_the_same_results(smoke_study, tmp_path):
    out, cache = smoke_study
    parallel = study(tmp_path / "parallel", cache, "study.stages=[noise,sweep]", "study.n_workers=2", "logger=none")
    assert parallel.returncode == 0, parallel.stderr[-4000:]
    ours = pd.read_csv(tmp_path / "parallel" / "runs.csv").set_index(["model", "seed"])
    theirs = pd.read_csv(out / "runs.csv")
    theirs = theirs[theirs["stage"].isin(["noise", "sweep"])].drop_duplicates(["model", "seed"])
    theirs = theirs.set_index(["model", "seed"]).loc[ours.index]
    for column in ("val/error", "val/rank_disparity", "test/error"):
        assert np.allclose(ours[column], theirs[column], rtol=1e-5), column


@pytest.mark.integration
def test_a_study_runs_every_stage_on_the_celeba_format_and_logs_to_wandb(tmp_path, cache_dir):
    """The default study's stages (``study=smoke`` only sizes them) on a real on-disk format: its transfer stage's
    default overrides apply to any format; the W&B run (the ``logger`` group, wandb by default) gets the tables, the
    page, the forest plot and native scatter plots. ``study.reserved_seeds`` (those whose effects planned the study's
    seeds) stay out of every comparison, robustness's AdvERM and plain runs included."""
    write_celeba(tmp_path / "celeba", n_identities=24, images_per_identity=4)
    out = tmp_path / "celeba_study"
    done = study(
        out,
        cache_dir,
        "data=celeba",
        f"data.root={tmp_path / 'celeba'}",
        "data.transforms.image_size=32",
        "data.transforms.resize=36",
        "data.min_images=2",
        "study.reserved_seeds=[0,1]",
        base=SMALL,
    )
    assert done.returncode == 0, done.stderr[-4000:]
    runs = pd.read_csv(out / "runs.csv")
    assert set(runs["stage"]) == set(STAGES) - {"search"}
    trained = runs[runs["stage"] != "sweep"]  # the sweep explores with the search's seeds, as the search does
    assert not set(trained["seed"]) & {0, 1}, trained[["stage", "seed"]]
    assert sorted(runs.loc[runs["stage"] == "robustness", "seed"].unique()) == [2, 3]
    assert runs["status"].isin(["success", claims.NOT_APPLICABLE]).all() and set(runs["data"]) == {"main", "transfer"}
    transfer = runs[runs["data"] == "transfer"].iloc[0]
    config = (out / transfer["run_dir"] / "config.yaml").read_text()
    assert "read_celeba" in config and "balance_identities: true" in config

    wandb_runs = sorted((out / "wandb").glob("offline-run-*"))
    study_run = next(
        run for run in wandb_runs if list(run.glob("files/media/html/report_*.html"))
    )  # (the search has its own)
    tables = {path.name.rsplit("_", 2)[0] for path in study_run.glob("files/media/table/*.table.json")}
    assert {"runs", "claims", "final", "mitigations", "transfer"} <= tables, tables
    # wandb.plot.scatter logs a table "<name>_table" and a chart drawn with W&B's scatter preset
    assert {"final_front_table", "transfer_front_table", "search_trials_table"} <= tables
    assert b"wandb/scatter/v0" in next(study_run.glob("run-*.wandb")).read_bytes()
    assert list(study_run.glob("files/media/images/claims_forest_*.png"))


def test_the_smoke_study_is_the_default_study_at_its_smallest_size():
    """``study=smoke`` changes only sizes (seeds, how many models and trials), so a passing smoke study runs every
    stage, mitigation and transfer setting of ``python study.py experiment=smoke``'s default study."""

    def settings(*overrides: str) -> dict:
        return OmegaConf.to_container(compose_config("study", ["experiment=smoke", *overrides], output_dir=".").study)

    default, smoke = settings(), settings("study=smoke")
    assert {key: default[key] for key in ("stages", "claims", "default_model")} == {
        key: smoke[key] for key in ("stages", "claims", "default_model")
    }
    for stage in ("mitigations", "transfer"):
        sizes = {"seeds"}
        assert {k: v for k, v in default[stage].items() if k not in sizes} == {
            k: v for k, v in smoke[stage].items() if k not in sizes
        }
    assert default["robustness"]["overrides"] != smoke["robustness"]["overrides"]  # fewer probes and steps only
    assert [item.split("=")[0] for item in default["robustness"]["overrides"]] == [
        item.split("=")[0] for item in smoke["robustness"]["overrides"]
    ]


def test_the_study_reports_with_the_logger_group_and_its_command_line_overrides():
    from fairnas.tasks.study import report_config

    cfg = compose_config("study", ["logger.wandb.offline=false", "logger.wandb.project=mine"], output_dir="/tmp/s")
    node = report_config(cfg).logger
    assert node.wandb.offline is False and node.wandb.project == "mine" and node.wandb.save_dir == "/tmp/s"
    cfg = compose_config("study", ["logger=none"], output_dir="/tmp/s")
    assert not report_config(cfg).logger


def test_a_mitigation_that_changes_nothing_is_not_applicable():
    base = ["experiment=smoke", "seed=3"]
    grouped = [*base, "data.group_sampling.alpha=1.5"]  # a searched model that re-samples its groups itself
    assert not study_runs.changes_training(grouped, [*grouped, "mitigation=balanced"])  # its own alpha wins
    assert study_runs.changes_training(base, [*base, "mitigation=balanced"])
    assert study_runs.changes_training(base, [*base, "mitigation=angular"])  # a margin policy: trained, then judged
    # SensitiveNets interpolates what the data decides (data_info.n_groups), unknown before a run starts
    assert study_runs.changes_training(base, [*base, "mitigation=sensitivenets", "optimizer=adamw"])

    spec = study_runs.RunSpec("searched", "searched", (), 3, mitigation="balanced")
    skipped = study_runs.not_applicable([spec], "mitigations", "Balanced changes nothing")
    rows = [{"seed": seed, "test/rank_disparity": 2.0 + seed, "test/error": 0.4} for seed in (3, 4)]
    baseline = pd.DataFrame(rows).assign(model="searched", kind="searched", mitigation="none", data="main")
    runs = pd.concat([baseline.assign(status="success"), skipped], ignore_index=True)
    claim = claims.lowers(
        runs, "searched", "balanced", "test/rank_disparity", claim_id="mitigations/balanced/searched/test"
    )
    assert not claim.applicable and "Balanced changes nothing" in claim.evidence
    assert claims.crashed(runs, ["searched"]) == 0


def test_the_registry_holds_the_stages_in_their_order_with_their_tables():
    assert list(STAGES) == ["noise", "sweep", "search", "final", "mitigations", "robustness", "transfer"]
    assert {name: stage.needs for name, stage in STAGES.items() if stage.needs} == {
        "final": "search",
        "mitigations": "final",
        "transfer": "final",
    }
    tables = ("noise", "sweep", "search_answer", "final", "mitigations", "robustness", "transfer")
    assert study_tables() == ("claims", "runs", *tables)  # what a results folder keeps, as before the registry


PROBE_STAGE = """
import dataclasses
import math

from fairnas.study import claims
from fairnas.study.report import StageReport
from fairnas.study.settings import seed_count
from fairnas.study.stages import Stage, register


def run(context):
    seeds = range(context.settings.probe.seeds)
    plain = context.specs([context.default], seeds)
    runs = context.train([*plain, *(dataclasses.replace(spec, mitigation="probe") for spec in plain)], "probe")
    claim_id = "probe/lowers/default/test"
    context.claims.append(claims.lowers(runs, context.default, "probe", "test/rank_disparity", claim_id=claim_id))
    table = context.files.table("probe", runs)
    return StageReport("probe", "Probe", "A test-only stage.", [], {"probe": table}, {}, math.nan)


def check(study, base):
    seed_count(study.probe.seeds, "probe.seeds", 2)


register(Stage("probe", 65, run, needs="noise", check=check, tables=("probe",), claims=("probe/",)))
"""


@pytest.fixture
def probe_stage(tmp_path, monkeypatch):
    """A test-only stage ``probe``, registered by importing its module, which nothing else names; unregistered after."""
    (tmp_path / "probe_stage.py").write_text(PROBE_STAGE)
    monkeypatch.syspath_prepend(str(tmp_path))
    try:
        yield importlib.import_module("probe_stage")
    finally:
        STAGES.pop("probe", None)
        STAGES.pop("stray", None)
        sys.modules.pop("probe_stage", None)


class Files:
    def __init__(self, folder: Path) -> None:
        self.folder = folder

    def table(self, name: str, frame: pd.DataFrame) -> Path:
        frame.to_csv(self.folder / f"{name}.csv", index=False)
        return self.folder / f"{name}.csv"


def fake_training(specs, overrides, stage):
    """Every run finishes at once; a treated run (``mitigation`` set) has a rank disparity lower by 1."""

    def metrics(spec):
        values = {"error": 0.5, "rank_disparity": 2.0 - (spec.mitigation != "none") + spec.seed / 10}
        return {"val": values, "test": values}

    return pd.DataFrame([study_runs.run_row(spec, metrics(spec), stage) for spec in specs])


def test_a_stage_is_its_module_registered_checked_and_run_by_the_study(probe_stage, tmp_path):
    """A new stage needs its module only: the registry orders it, ``study.stages`` takes it (with the stage it
    needs), the study checks its settings through the stage, the runner runs it on the study's context and its
    claims and tables are its declared ones."""
    assert list(STAGES)[-2:] == ["probe", "transfer"]  # its order: 65, between robustness and transfer
    assert "probe" in study_tables()
    with pytest.raises(ValueError, match="study.stages: probe needs noise"):
        check_stages(["probe"])

    def config(seeds: int):
        overrides = ["experiment=smoke", "study=smoke", "study.stages=[noise,probe]", f"+study.probe.seeds={seeds}"]
        return compose_config("study", overrides, output_dir=str(tmp_path))

    base = ["experiment=smoke"]
    with pytest.raises(SettingError, match=r"^study.probe.seeds=1 must be an integer >= 2 \(a standard error"):
        check_study(config(1), base)
    cfg = config(2)
    check_study(cfg, base)
    context = StudyContext(cfg, base, Files(tmp_path), fake_training, search=None)
    for name in cfg.study.stages:
        run_stage(name, context)
    assert [report.name for report in context.reports] == ["noise", "probe"]
    assert [claim.id for claim in context.claims] == ["probe/lowers/default/test"]
    assert context.claims[0].test.n == 2 and context.claims[0].test.effect == pytest.approx(-1.0)
    assert set(pd.read_csv(tmp_path / "probe.csv")["mitigation"]) == {"none", "probe"}

    stray = Stage("stray", 99, probe_stage.run, claims=("elsewhere/",))
    register(stray)
    with pytest.raises(ValueError, match=r"stray added claims \['probe/lowers/default/test'\] outside"):
        run_stage("stray", context)
