"""``python study.py``: every stage of thesis Chapter 4 on the smallest scale, its report (claims, tables, figures, a
page a browser renders, a W&B run with native scatter plots), resuming without training again, two Dask workers,
a real data set's on-disk format, and the claims' arithmetic."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from fairnas.study import claims
from fairnas.tasks import study_runs
from tests.helpers import chromium, needs_chromium
from tests.layouts import write_celeba

REPO = Path(__file__).resolve().parents[1]
SMALL = ["study=smoke", "trainer.max_epochs=1", "data.batch_size=16", "data.eval_batch_size=64", "embedding_dim=32"]
SMOKE = ["experiment=smoke", *SMALL]  # experiment=smoke sizes the synthetic set, so other data sets take SMALL only
STAGES = ("noise", "sweep", "search", "final", "mitigations", "robustness", "transfer")


def study(out: Path, cache_dir: Path, *overrides: str, base: list[str] = SMOKE) -> subprocess.CompletedProcess:
    # One thread per run, as Dask's workers train (its nanny sets OMP_NUM_THREADS=1): float reductions split over
    # other thread counts round differently, which moves a near-chance smoke model by a probe or more.
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
    """One smoke study (every stage) and its second invocation, shared by the tests that read them."""
    root = tmp_path_factory.mktemp("study")
    cache = tmp_path_factory.mktemp("study_cache")
    first = study(root / "smoke", cache)
    assert first.returncode == 0, first.stderr[-4000:]
    stamps = {path: path.stat().st_mtime_ns for path in (root / "smoke" / "runs").rglob("metrics.json")}
    second = study(root / "smoke", cache)
    assert second.returncode == 0, second.stderr[-4000:]
    return root / "smoke", stamps, second, cache


def test_every_stage_runs_and_every_claim_is_decided_from_the_runs(smoke_study):
    out, *_ = smoke_study
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
    verdict = r"^(holds|does not hold) \(([+-]\d|the same difference in every seed)|undecided|not applicable|no effect"
    assert len(table) >= 6 and table["verdict"].str.match(verdict).all()
    assert set(table["stage"]) == {"final", "mitigations", "robustness", "transfer"}
    # one claim recomputed from runs.csv: a mitigation's effect, paired by seed with its baseline
    balanced = table[table["claim"].str.startswith("Balanced lowers the test rank disparity of")]
    row = balanced[balanced["verdict"] != claims.NOT_APPLICABLE].iloc[0]
    model = row["claim"].split(" of ", 1)[1]
    mean, se, _ = claims.paired(runs, model, model, "test/rank_disparity", mitigation="balanced")
    assert row["margin_se"] == pytest.approx(claims.margin(mean, se, -1), nan_ok=True)

    report = (out / "report.md").read_text()
    for title in (
        "## Claims",
        "## Seed noise",
        "## Hand-designed",
        "## Search",
        "## The search's answer",
        "## Bias mitigations",
        "## AdvERM",
        "## Transfer",
    ):
        assert title in report, title
    for figure in re.findall(r"!\[[^]]*\]\(([^)]+)\)", report):
        assert (out / figure).is_file()


def test_a_second_invocation_trains_nothing(smoke_study):
    out, stamps, second, _ = smoke_study
    after = {path: path.stat().st_mtime_ns for path in (out / "runs").rglob("metrics.json")}
    assert after == stamps and len(after) > 10
    assert "runs to train" not in second.stderr and "re-training runs to go" not in second.stderr


def test_the_wandb_run_has_the_tables_the_page_and_native_scatter_plots(smoke_study):
    out, *_ = smoke_study
    runs = sorted((out / "wandb").glob("offline-run-*"))
    study_run = next(
        run for run in runs if list(run.glob("files/media/html/report_*.html"))
    )  # (the search has its own)
    tables = {path.name.rsplit("_", 2)[0] for path in study_run.glob("files/media/table/*.table.json")}
    assert {"runs", "claims", "final", "mitigations", "transfer"} <= tables, tables
    # wandb.plot.scatter logs a table "<name>_table" and a chart drawn with W&B's scatter preset
    assert {"final_front_table", "transfer_front_table", "search_trials_table"} <= tables
    assert b"wandb/scatter/v0" in next(study_run.glob("run-*.wandb")).read_bytes()


@needs_chromium
def test_the_report_page_renders_every_figure_and_every_claim_with_a_verdict(smoke_study, tmp_path):
    out, *_ = smoke_study
    dom = chromium(tmp_path, "--dump-dom", (out / "report.html").as_uri()).stdout.decode()
    images = re.findall(r"<img alt='[^']*' src='data:image/png;base64,", dom.replace('"', "'"))
    assert len(images) == len(re.findall(r"!\[", (out / "report.md").read_text())) > 3
    findings = re.findall(r"<p class=\"finding\">(.*?)</p>", dom, flags=re.S)
    claim_lines = [f for f in findings if " lowers " in f or " dominates " in f]
    assert claim_lines and all(
        re.search(r"(holds|does not hold|undecided|not applicable|no effect)", f) for f in claim_lines
    )
    shot = tmp_path / "shot.png"
    chromium(tmp_path, f"--screenshot={shot}", (out / "report.html").as_uri())
    from PIL import Image

    pixels = np.asarray(Image.open(shot).convert("L"))
    assert pixels.std() > 10  # drawn, not blank


def test_two_dask_workers_train_the_same_runs_with_the_same_results(smoke_study, tmp_path):
    out, _, _, cache = smoke_study
    parallel = study(
        tmp_path / "parallel", cache, "study.stages=[noise,sweep]", "study.n_workers=2", "study.logger=none"
    )
    assert parallel.returncode == 0, parallel.stderr[-4000:]
    ours = pd.read_csv(tmp_path / "parallel" / "runs.csv").set_index(["model", "seed"])
    theirs = pd.read_csv(out / "runs.csv")
    theirs = theirs[theirs["stage"].isin(["noise", "sweep"])].drop_duplicates(["model", "seed"])
    theirs = theirs.set_index(["model", "seed"]).loc[ours.index]
    for column in ("val/error", "val/rank_disparity", "test/error"):
        assert np.allclose(ours[column], theirs[column], rtol=1e-5), column


def test_a_study_runs_on_the_celeba_format(tmp_path, cache_dir):
    write_celeba(tmp_path / "celeba", n_identities=16, images_per_identity=4)
    done = study(
        tmp_path / "celeba_study",
        cache_dir,
        "data=celeba",
        f"data.root={tmp_path / 'celeba'}",
        "data.transforms.image_size=32",
        "data.transforms.resize=36",
        "data.min_images=2",
        "study.stages=[noise,search,final]",
        "study.logger=none",
        base=SMALL,
    )
    assert done.returncode == 0, done.stderr[-4000:]
    runs = pd.read_csv(tmp_path / "celeba_study" / "runs.csv")
    assert set(runs["stage"]) == {"noise", "final"} and (runs["status"] == "success").all()
    config = (tmp_path / "celeba_study" / runs["run_dir"].iloc[0] / "config.yaml").read_text()
    assert "CelebA" in config or "celeba" in config


def test_paired_differences_and_dominance_follow_the_definitions():
    rows = []
    for seed, (a_error, b_error) in enumerate([(0.40, 0.50), (0.42, 0.53), (0.41, 0.50)]):
        rows.append({"model": "A", "kind": "searched", "seed": seed, "val/error": a_error, "val/rank_disparity": 1.0})
        rows.append(
            {"model": "B", "kind": "default", "seed": seed, "val/error": b_error, "val/rank_disparity": 2.0 + seed}
        )
    runs = pd.DataFrame(rows).assign(stage="final", mitigation="none", data="main", status="success")
    mean, se, n = claims.paired(runs, "A", "B", "val/error")
    differences = np.array([-0.10, -0.11, -0.09])
    assert (
        n == 3 and mean == pytest.approx(differences.mean()) and se == pytest.approx(differences.std(ddof=1) / 3**0.5)
    )
    decided = claims.dominance(runs, ["A"], "B", split="val", stage="final")
    assert decided.holds and decided.margin == pytest.approx(min(0.1 / se, claims.margin(-2.0, 1 / 3**0.5, -1)))
    crashed = runs.copy()
    crashed.loc[0, "status"] = "crashed"
    assert claims.paired(crashed, "A", "B", "val/error")[2] == 2  # the crashed seed is left out of the pair
    assert "1 runs crashed" in claims.dominance(crashed, ["A"], "B", split="val", stage="final").evidence


def test_a_mitigation_that_changes_nothing_is_not_applicable_and_one_without_effect_says_so():
    base = ["experiment=smoke", "seed=3"]
    grouped = [*base, "data.group_sampling.alpha=1.5"]  # a searched model that re-samples its groups itself
    assert not study_runs.changes_training(grouped, [*grouped, "mitigation=balanced"])  # its own alpha wins
    assert study_runs.changes_training(base, [*base, "mitigation=balanced"])
    assert study_runs.changes_training(base, [*base, "mitigation=angular"])  # a margin policy: trained, then judged

    spec = study_runs.RunSpec("searched", "searched", (), 3, mitigation="balanced")
    skipped = study_runs.not_applicable([spec], "mitigations", "Balanced changes nothing")
    rows = [{"seed": seed, "test/rank_disparity": 2.0 + seed, "test/error": 0.4} for seed in (3, 4)]
    baseline = pd.DataFrame(rows).assign(model="searched", kind="searched", mitigation="none", data="main")
    runs = pd.concat([baseline.assign(status="success"), skipped], ignore_index=True)
    claim = claims.lowers(runs, "searched", "balanced", "test/rank_disparity", stage="mitigations")
    assert claim.verdict == claims.NOT_APPLICABLE and "Balanced changes nothing" in claim.evidence
    assert claims.crashed(runs, ["searched"]) == 0

    same = pd.concat([baseline, baseline.assign(mitigation="angular")], ignore_index=True).assign(status="success")
    claim = claims.lowers(same, "searched", "angular", "test/rank_disparity", stage="mitigations")
    assert claim.verdict.startswith("no effect") and not claim.holds
