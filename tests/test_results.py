"""Results as data: the docs' result tables are rendered from the committed CSVs under results/, and a page that
drifts from its data fails here; a finished study's tables are collected into a results folder with a manifest that
says how they were made; a file a table cannot be read from is refused in one line naming it."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path

import pandas as pd
import pytest

from bench.evidence import results
from fairnas.study import claims

REPO = Path(__file__).resolve().parents[1]
STRATEGY_BLOCK = {"strategies": ("results/search_efficiency", results.strategy_table)}
COMPARISON_BLOCK = {"comparison": ("results/search_comparison", results.comparison_table)}
CLAIMS_BLOCK = {"claims": ("results/showcase", results.claims_table)}
EMPTY = "<!-- results:{0} -->\n<!-- /results:{0} -->\n"


def test_every_results_folder_says_how_its_files_were_made():
    folders = {path.parent for path in (REPO / "results").rglob("*.csv")}
    for folder in folders:
        manifest = results.read_manifest(folder)
        assert manifest["files"] and all((folder / name).is_file() for name in manifest["files"])


def test_the_docs_blocks_are_rendered_from_the_committed_data():
    for page, tables in results.PAGES.items():
        assert results.drifted((REPO / page).read_text(), tables) == [], (
            f"{page}: run python -m bench.evidence.results render"
        )
        assert all((REPO / folder / results.MANIFEST).is_file() for folder, _ in tables.values())
    assert "<!-- results:" not in (REPO / "README.md").read_text()  # the README links to the pages


def test_the_gpu_table_judges_each_goal_and_says_what_was_not_measured(tmp_path):
    from bench.evidence.gpu_check_report import GOALS, gpu_check_table

    facts = {"device": "NVIDIA H200", "date": "2026-11-28", "torch": "2.11", "cuda": "13.0", "lightning": "2.6"}
    (tmp_path / "gpu_check.json").write_text(json.dumps({"facts": {**facts, "python": "3.12"}}))
    (tmp_path / "manifest.json").write_text(json.dumps({"commit": "abc1234"}))
    pd.DataFrame({"loop": ["bare PyTorch", "Lightning"], "images/s": [1000.0, 960.0]}).to_csv(
        tmp_path / "loop.csv", index=False
    )
    models = [("DPN paper (SMAC_301)", "fp32", 5000.0), ("DPN paper (SMAC_301)", "bf16", 15000.0)]
    models += [("timm dpn68", "fp32", 1000.0), ("timm dpn68", "bf16", 1200.0)]
    pd.DataFrame(models, columns=["model", "variant", "images/s"]).to_csv(tmp_path / "models.csv", index=False)
    engines = {
        precision: {"seconds": seconds, "metrics": {"rank": 3.5}}
        for precision, seconds in [("float32", 9.0), ("bfloat16", 7.5)]
    }
    (tmp_path / "metrics_speed_separable.json").write_text(json.dumps([{"n": 1_000_000, **engines}]))
    pd.DataFrame({"trials": ["default"] * 2, "k": [1, 2], "trials_per_hour": [800.0, 900.0]}).to_csv(
        tmp_path / "trials_per_gpu.csv", index=False
    )
    table = gpu_check_table(tmp_path)
    assert "one NVIDIA H200 (2026-11-28, commit abc1234;" in table
    assert "| 960 / 1,000 img/s = 0.960 | >= 0.95 | yes |" in table
    assert "| fp32 5,000 / bf16 15,000 img/s | >= 14,000 img/s | yes |" in table
    assert f"| 1.20x | >= {GOALS['dpn68_bf16_speedup']}x | no |" in table
    assert "| exact metrics, hard set, N = 1M, D = 512 | not measured |" in table
    assert "| 9.00 s / 7.50 s; ranks identical | <= 8 s at 1M, exact | yes |" in table
    assert (
        "| 800 / 900 / not measured |" in table
        and "paper_112px trials, k = 1 / 2 / 4 per GPU | not measured /" in table
    )


@pytest.mark.parametrize(("lightning", "verdict"), [(0.55, "**met** (0.250)"), (0.65, "**not met** (0.350)")])
def test_the_overhead_table_judges_lightnings_excess_over_the_bare_loop(tmp_path, lightning, verdict):
    from bench.evidence.overhead_report import training_overhead_table

    manifest = {"commands": ["python bench/training_speed.py --parts overhead"], "commit": "abc1234"}
    (tmp_path / "manifest.json").write_text(json.dumps({**manifest, "finished": "today", "machine": "2 cores"}))
    summary = {"way": ["bare PyTorch", "Lightning"], "ms/step": [0.3, lightning], "min": [0.29, 0.5]}
    summary |= {"max": [0.31, 0.7], "over bare": [0.0, lightning - 0.3]}
    pd.DataFrame(summary).to_csv(tmp_path / "overhead.csv", index=False)
    breakdown = {"group": ["logging", "other"], "Lightning: share": [1.0, 0.0], "Lightning: ms/step": [0.5, 0.0]}
    pd.DataFrame(breakdown).to_csv(tmp_path / "overhead_breakdown.csv", index=False)
    table = training_overhead_table(tmp_path)
    assert "at commit abc1234 (today; 2 cores)" in table
    assert f"| Lightning | {lightning:.3f} | 0.500–0.700 | {lightning - 0.3:.3f} |" in table
    assert f"Goal: Lightning at most 0.3 ms/step over the bare loop: {verdict}." in table
    assert "| group | Lightning |" in table and "| logging | 0.500 |" in table and "| other |" not in table


def test_the_strategy_table_is_the_mean_and_standard_error_of_the_runs(tmp_path):
    folder = tmp_path / "results" / "search_efficiency"
    folder.mkdir(parents=True)
    pd.DataFrame(
        {"method": ["random", "random", "smac", "smac"], "seed": [0, 1, 0, 1], "share": [0.8, 0.9, 0.95, 0.97]}
    ).to_csv(folder / "analytic_runs.csv", index=False)
    pd.DataFrame(
        {
            "method": ["random", "random", "random+final", "random+final"],
            "seed": [0, 1, 0, 1],
            "true_share": [0.9, 1.0, 0.7, 0.8],
            "heldout_true_share": [0.8, 0.9, float("nan"), float("nan")],  # the final stage read every seed
        }
    ).to_csv(folder / "table_quality.csv", index=False)
    manifest = results.write_manifest(
        folder, commands=["python bench/search_efficiency.py --problem analytic"], commit="abc1234"
    )
    assert manifest["files"] == ["analytic_runs.csv", "table_quality.csv"]
    page = "intro\n<!-- results:strategies -->\nstale numbers\n<!-- /results:strategies -->\nafter\n"
    assert results.drifted(page, STRATEGY_BLOCK, root=tmp_path) == ["strategies"]
    rendered = results.render(page, STRATEGY_BLOCK, root=tmp_path)
    assert results.drifted(rendered, STRATEGY_BLOCK, root=tmp_path) == [] and rendered.endswith("-->\nafter\n")
    # a real table: the held-out share decides, the all-seed one beside it
    assert (
        "| random search | 0.850 ± 0.050 | 0.850 ± 0.050 (on all seeds 0.950 ± 0.050) | no seed left unread "
        "(0.750 ± 0.050 on all seeds) |"
    ) in rendered
    assert ": held-out true share of the answer (2 seeds) |" in rendered
    assert "| SMAC, every Hyperband bracket | 0.960 ± 0.010 |  |  |" in rendered  # no table runs: empty cells
    assert "commit abc1234" in rendered and "stale" not in rendered


def test_a_surrogate_quality_file_adds_its_columns_with_the_gap_closed_against_random(tmp_path, monkeypatch):
    folder = tmp_path / "results" / "search_efficiency"
    folder.mkdir(parents=True)
    pd.DataFrame({"method": ["random", "smac"], "seed": [0, 0], "share": [0.8, 0.9]}).to_csv(
        folder / "analytic_runs.csv", index=False
    )
    methods = ["random", "random", "smac", "smac", "smac+final", "smac+final"]
    quality = {"method": methods, "seed": [0, 1] * 3, "true_share": [0.90, 0.92, 0.94, 0.96, 0.93, 0.95]}
    pd.DataFrame(quality).to_csv(folder / "table_quality.csv", index=False)
    (folder / "surrogate").mkdir()
    pd.DataFrame({**quality, "gap_closed": [0.0, 0.0, 0.4, 0.6, 0.2, 0.4]}).to_csv(
        folder / "surrogate" / "surrogate_quality.csv", index=False
    )
    results.write_manifest(folder, commands=["python bench/search_efficiency.py"], commit="abc1234")
    results.write_manifest(folder / "surrogate", commands=["python bench/search_efficiency.py --problem surrogate"])
    surrogate = "embedded faces, paper space (surrogate)"
    monkeypatch.setitem(results.QUALITY_FILES, "surrogate/surrogate_quality.csv", surrogate)
    rendered = results.render(EMPTY.format("strategies"), STRATEGY_BLOCK, root=tmp_path)
    assert "| embedded faces, paper space (surrogate): true share of the answer (2 seeds) | with the final" in rendered
    smac = (
        "| SMAC, every Hyperband bracket | 0.900 ± nan | 0.950 ± 0.010 | 0.940 ± 0.010 | 0.950 ± 0.010 "
        "(gap closed 0.500 ± 0.100) |"
    )
    assert smac + " 0.940 ± 0.010 (gap closed 0.300 ± 0.100) |" in rendered
    assert "| random search | 0.800 ± nan | 0.910 ± 0.010 |  | 0.910 ± 0.010 |  |" in rendered  # random is the zero
    # measured apart, at another commit: each folder's own manifest says how
    assert "search_efficiency/` (analytic_runs.csv, table_quality.csv), from `python" in rendered
    assert "search_efficiency/surrogate/` (surrogate_quality.csv), from `python" in rendered


def test_the_planned_comparison_renders_each_budgets_leads_and_verdicts_with_the_plan(tmp_path):
    folder = tmp_path / "results" / "search_comparison"
    folder.mkdir(parents=True)
    plan = {
        "problem": "surrogate:dpn_paper_sampled",
        "score": "true_share",
        "baseline": "random",
        "methods": ["smac", "botorch"],
        "reference_point": [0.5657, 8.3295],
        "alpha": 0.05,
        "power": 0.8,
        "min_lead": 0.02,
        "core_hours": 4,
        "pilot_seeds": list(range(20)),
    }
    (folder / "plan.json").write_text(json.dumps(plan))
    verdicts = {
        "budget": [30, 30],
        "method": ["smac", "botorch"],
        "label": ["SMAC", "BoTorch GP"],
        "seeds": [200, 0],
        "lead": [0.031, float("nan")],
        "lead_se": [0.008, float("nan")],
        "p_holm": [0.0004, float("nan")],
        "verdict": ["leads by 0.031 ± 0.008", "not run: the plan's compute could not afford it"],
    }
    pd.DataFrame(verdicts).to_csv(folder / "verdicts.csv", index=False)
    results.write_manifest(folder, commands=["python bench/search_plan.py verdicts"], commit="abc1234")
    rendered = results.render(EMPTY.format("comparison"), COMPARISON_BLOCK, root=tmp_path)
    assert "| strategy | 30 full trials |" in rendered
    assert "| SMAC | **+0.031 ± 0.008** (Holm p 0.0004, 200 seeds) |" in rendered
    assert "| BoTorch GP | not run: the plan's compute could not afford it |" in rendered
    assert "Reference point (0.566, 8.33); Holm over the 2 comparisons of each budget at alpha 0.05" in rendered
    assert "power 0.8 to detect a lead of 0.02 within 4 core-hours" in rendered and "commit abc1234" in rendered
    assert "Lead: the strategy's true share minus random search's, paired by seed" in rendered
    pd.DataFrame(verdicts | {"share": [0.512, float("nan")], "baseline_share": [0.481, float("nan")]}).to_csv(
        folder / "verdicts.csv", index=False
    )
    with_shares = results.render(EMPTY.format("comparison"), COMPARISON_BLOCK, root=tmp_path)
    assert "| SMAC | **+0.031 ± 0.008** (0.512 against 0.481; Holm p 0.0004, 200 seeds) |" in with_shares
    assert "paired by seed (mean ± s.e.; then the two mean true shares on those seeds)" in with_shares
    (folder / "plan.json").write_text(json.dumps(plan | {"baseline": "smac", "methods": ["botorch"]}))
    against_smac = results.render(EMPTY.format("comparison"), COMPARISON_BLOCK, root=tmp_path)
    assert "Lead: the strategy's true share minus SMAC's" in against_smac
    assert "one comparison per budget" in against_smac
    held_out = verdicts | {"score": ["heldout_true_share"] * 2, "all_seeds_lead": [0.05, float("nan")]}
    pd.DataFrame(held_out).to_csv(folder / "verdicts.csv", index=False)
    (folder / "plan.json").write_text(json.dumps(plan))
    on_a_table = results.render(EMPTY.format("comparison"), COMPARISON_BLOCK, root=tmp_path)
    assert "| SMAC | **+0.031 ± 0.008** (Holm p 0.0004, 200 seeds; on all seeds +0.050) |" in on_a_table
    assert "Lead: the strategy's held-out true share minus random search's" in on_a_table
    assert "at the mean of the table seeds the search never read" in on_a_table


def real_table_plans() -> list[Path]:
    """Every committed results folder whose plan compares strategies on a real table (``table:<name>``)."""
    plans = sorted((results.REPOSITORY / "results").glob("*/plan.json"))
    return [path.parent for path in plans if json.loads(path.read_text())["problem"].startswith("table:")]


@pytest.mark.parametrize("folder", real_table_plans(), ids=lambda folder: folder.name)
def test_every_committed_verdict_on_a_real_table_is_decided_on_the_seeds_its_searches_never_read(folder):
    """A search's answer judged at the mean of the seeds it read flatters it by what it selected on: a verdict on a
    real table is the held-out true share's, recomputed here from the committed runs (the plan as its re-decision
    re-sized it from its pilot), never the all-seed share's."""
    from bench.comparison.plan import HELD_OUT_SCORE, held_out_plan, verdicts

    plan = json.loads((folder / "plan.json").read_text())
    committed = pd.read_csv(folder / "verdicts.csv")
    assert set(committed["score"]) == {HELD_OUT_SCORE}
    if plan["score"] != HELD_OUT_SCORE:  # a plan committed on the flattering score, decided again on held-out seeds
        record = results.read_manifest(folder)["redecided"][-1]
        plan = held_out_plan(plan, pd.read_csv(results.REPOSITORY / record["pilot"]))
        sources = record["from"]
    else:
        sources = [folder / "quality.csv"]
    quality = pd.concat([pd.read_csv(results.REPOSITORY / path) for path in sources], ignore_index=True)
    expected = verdicts(plan, quality)
    for column in ("lead", "lead_se", "p_holm", "planned_detectable_lead"):
        assert committed[column].to_numpy() == pytest.approx(expected[column].to_numpy(), nan_ok=True), column
    assert list(committed["verdict"]) == list(expected["verdict"])
    rendered = results.comparison_table(folder)
    assert "held-out true share minus" in rendered and "on all seeds" in rendered


def write_study(folder: Path) -> None:
    """A finished study's folder as study.py leaves it: claims.csv, a stage table, report.md, the search's tables."""
    (folder / "search").mkdir(parents=True)
    pd.DataFrame({"id": ["final/dominates/default/test"], "verdict": ["holds"]}).reindex(columns=claims.COLUMNS).to_csv(
        folder / "claims.csv", index=False
    )
    pd.DataFrame({"model": ["default DPN"], "val/error_mean": [0.5]}).to_csv(folder / "final.csv", index=False)
    pd.DataFrame({"seed": [0, 0], "wall_time_s": [50.0, 70.0]}).to_csv(folder / "search" / "trials.csv", index=False)
    (folder / "cli.log").write_text(  # two invocations: a run killed in the first is trained again in the second
        "[2026-11-26 10:00:00][fairnas.tasks.run_pool][INFO] - study noise: runs/main/default/seed0 done in 60 s\n"
        "[2026-11-26 10:01:00][fairnas.tasks.runs][INFO] - training runs/main/default/seed1\n"
        "[2026-11-26 11:00:00][fairnas.tasks.run_pool][INFO] - study noise: 1 runs to train (1 read back)\n"
        "[2026-11-26 11:01:30][fairnas.tasks.run_pool][INFO] - study noise: runs/main/default/seed1 done in 90 s\n"
        "[2026-11-26 11:03:00][fairnas.tasks.run_pool][INFO] - study final: runs/main/resnet18/seed1 done in 240 s\n"
    )
    (folder / "report.md").write_text("# study\n\n- **stages (minutes)**: noise 5.2, final 20.5\n")
    (folder.parent / "study.log").write_text(
        "...\n\tElapsed (wall clock) time (h:mm:ss or m:ss): 1:52:30\n\tMaximum resident set size (kbytes): 4718592\n"
    )


def test_a_finished_study_is_collected_with_its_manifest(tmp_path):
    write_study(tmp_path / "study")
    written = datetime(2026, 11, 20, 12, 0, tzinfo=UTC).timestamp()
    for table in (tmp_path / "study").rglob("*.csv"):
        os.utime(table, (written, written))
    target = tmp_path / "results" / "showcase"
    manifest = results.collect_study(
        tmp_path / "study",
        target,
        command="python study.py experiment=showcase",
        commit="abc1234",
        time_logs=[tmp_path / "study.log"],
    )
    assert json.loads((target / "manifest.json").read_text()) == manifest == results.read_manifest(target)
    assert manifest["commands"] == ["python study.py experiment=showcase"] and manifest["commit"] == "abc1234"
    assert manifest["finished"] == "2026-11-20 12:00 UTC"  # when the study wrote its tables, not when they were copied
    assert re.fullmatch(r"\d+ CPU cores \(\w+(, AVX-512|, AVX2)?\), Python 3\.\d+\.\d+", manifest["machine"])
    assert manifest["training_minutes"] == {"noise": 2.5, "final": 4.0, "search": 2.0}
    assert manifest["wall_minutes"] == 112.5 and manifest["peak_memory_gb"] == 4.5
    assert manifest["files"] == ["claims.csv", "final.csv", "search_trials.csv"]
    assert all((target / name).is_file() for name in manifest["files"])
    # a study resumed once: its two invocations' wall times summed, the larger peak
    (tmp_path / "resumed.log").write_text("\tElapsed (wall clock) time (h:mm:ss or m:ss): 7:30\n")
    resumed = results.collect_study(
        tmp_path / "study", target, command="c", time_logs=[tmp_path / "study.log", tmp_path / "resumed.log"]
    )
    assert resumed["wall_minutes"] == 120.0 and resumed["peak_memory_gb"] == 4.5 and resumed["invocations"] == 2


def test_a_collected_studys_claims_are_decided_again_from_its_runs_without_training(tmp_path, capsys):
    """The showcase's claims under the current rule (both tests, the floor of 8 seeds at 0.05 / 7) from its
    committed runs.csv: every claim first reproduces its recorded t-test, and the run's own manifest fields stay."""
    folder = tmp_path / "showcase"
    shutil.copytree(REPO / "results" / "showcase", folder)
    before = results.read_manifest(folder)
    results.main(["redecide-study", str(folder)])
    manifest = json.loads(capsys.readouterr().out)
    assert manifest == results.read_manifest(folder)
    assert {key: manifest[key] for key in before if key != "redecided"} == {
        key: value for key, value in before.items() if key != "redecided"
    }
    record = manifest["redecided"][-1]
    assert record["command"] == f"python -m bench.evidence.results redecide-study {folder}" and record["commit"]
    table = pd.read_csv(folder / "claims.csv").set_index("id")
    assert list(table.reset_index().columns) == list(claims.COLUMNS)
    balanced = table.loc["mitigations/balanced/default/test"]
    assert balanced["n"] == 7 and balanced["p_holm"] == pytest.approx(0.00864728879621452)  # the t-test alone: holds
    assert balanced["p_exact"] == 1 / 128 and balanced["p_exact_holm"] == pytest.approx(7 / 128)
    assert balanced["level"] == pytest.approx(0.05 / 7) and balanced["verdict"] == claims.TOO_FEW_SEEDS
    primary = table[table["family"] == claims.PRIMARY]
    assert (primary["verdict"] == claims.TOO_FEW_SEEDS).all()  # 7 or 5 seeds, below the floor of 8
    assert table.loc["mitigations/angular/default/test", "status"] == "degenerate: zero variance"
    held = table[table["verdict"] == claims.HOLDS].index
    assert list(held) == [
        "final/dominates/default/val",
        "robustness/adverm/default/val",
        "robustness/adverm/default/test",
    ]
    # a claim that does not reproduce its recorded statistics stops it, naming the claim; nothing is written
    runs = pd.read_csv(folder / "runs.csv")
    runs.loc[(runs["mitigation"] == "balanced") & (runs["seed"] == 14), "test/rank_disparity"] += 1.0
    runs.to_csv(folder / "runs.csv", index=False)
    written = (folder / "claims.csv").read_text()
    with pytest.raises(ValueError, match=r"mitigations/balanced/default/test: effect .*, recorded "):
        results.redecide_study(folder, command="c")
    assert (folder / "claims.csv").read_text() == written and results.read_manifest(folder) == manifest


def test_a_readme_without_the_block_or_a_folder_without_a_study_is_named(tmp_path):
    with pytest.raises(ValueError, match=r"no block <!-- results:\w+ -->"):
        results.render("no markers here\n", STRATEGY_BLOCK)
    with pytest.raises(FileNotFoundError, match="holds no finished study"):
        results.collect_study(tmp_path, tmp_path / "out", command="python study.py")
    with pytest.raises(FileNotFoundError, match="has no manifest.json"):
        results.read_manifest(tmp_path)


def test_the_claims_table_shows_every_primary_claim_and_counts_the_exploratory_ones(tmp_path):
    folder = tmp_path / "results" / "showcase"
    folder.mkdir(parents=True)
    claims = pd.read_csv(REPO / "tests" / "golden" / "smoke_study_claims.AuthenticAMD.csv")  # a real study's claims
    claims.loc[claims["id"] == "mitigations/flipped/default/test", ["verdict", "p_holm"]] = ["holds", 0.012]
    claims.to_csv(folder / "claims.csv", index=False)
    results.write_manifest(
        folder,
        commands=["python study.py experiment=smoke"],
        commit="abc1234",
        wall_minutes=2.0,
        training_minutes={"noise": 0.5, "final": 1.0},
    )
    rendered = results.render(EMPTY.format("claims"), CLAIMS_BLOCK, root=tmp_path)
    rows = [line for line in rendered.splitlines() if line.startswith("| ") and "---" not in line][1:]
    assert len(rows) == (claims["family"] == "primary").sum() == 8
    flipped = "Flipped lowers the test rank disparity of default DPN | 2 | test rank disparity | -0.250 [-2.368, +1.868"
    assert flipped in rendered
    # both Holm p-values (t-test, sign-flip); below the floor of 0.05 / 8 (8 seeds) no effect is detectable
    assert rows[[row.startswith("| Flipped") for row in rows].index(True)].endswith(
        "| 0.012, 1 | none below 8 seeds | **holds** |"
    )
    lcnet = "| the searched model dominates LCNet (test) | 2 | test rank disparity | +0.125 [-2.522, +2.772] | 1, 1 |"
    assert lcnet in rendered
    angular = "Angular lowers the test rank disparity of default DPN | 2 | test rank disparity | +0.000 in every seed |"
    assert f"{angular} 1, 1 | none: zero variance | too few seeds |" in rendered  # degenerate: no interval
    assert "at the claim's plan level (0.0063: alpha / m for the m primary claims)" in rendered
    # 14 exploratory claims, one not applicable (no p); of the 13 tested none holds (two seeds: below the floor of 5)
    counts = "1 of 8 primary claims hold. There are also 14 exploratory claims, unadjusted: 0 of the 13 tested ones "
    assert counts in rendered and "re-decided" not in rendered
    assert (
        "from `python study.py experiment=smoke` at commit abc1234" in rendered
        and "2.0 min wall; 2 min of training, summed over its runs" in rendered
    )


def test_a_folder_that_holds_no_collected_study_is_refused_in_one_line(tmp_path):
    run = tmp_path / "train_run"  # a training run's folder
    run.mkdir()
    (run / "metrics.json").write_text("{}")
    searched = tmp_path / "search_efficiency"  # a results folder of a benchmark, not of a study
    searched.mkdir()
    pd.DataFrame({"method": ["random"], "seed": [0], "share": [0.8]}).to_csv(searched / "runs.csv", index=False)
    results.write_manifest(searched, commands=["python bench/search_efficiency.py"], commit="abc1234")
    for folder, said in [
        (tmp_path / "nosuch", "is not a folder"),
        (run, "has no manifest.json or claims.csv or runs.csv"),
        (searched, "has no claims.csv"),
    ]:
        with pytest.raises(SystemExit) as stopped:
            results.main(["redecide-study", str(folder)])
        message = str(stopped.value.code)
        assert message.startswith(f"python -m bench.evidence.results redecide-study: '{folder}'"), message
        assert said in message and "\n" not in message


def test_a_results_file_missing_a_column_or_cut_short_is_named_in_one_line(tmp_path, monkeypatch):
    folder = tmp_path / "results" / "search_comparison"
    folder.mkdir(parents=True)
    plan = {"methods": ["smac"], "baseline": "random", "reference_point": [0.5, 8.0], "alpha": 0.05, "power": 0.8}
    (folder / "plan.json").write_text(json.dumps(plan | {"min_lead": 0.03, "core_hours": 1, "pilot_seeds": [0, 1]}))
    verdicts = {"budget": [30, 60], "method": ["smac"] * 2, "label": ["SMAC"] * 2, "seeds": [20, 20]}
    verdicts |= {
        "lead": [0.01, 0.02],
        "lead_se": [0.01] * 2,
        "p_holm": [0.3, 0.2],
        "planned_detectable_lead": [0.05] * 2,
    }
    verdicts |= {"score": ["true_share"] * 2, "verdict": ["no lead beyond the noise"] * 2}
    results.write_manifest(folder, commands=["python bench/search_plan.py verdicts"], commit="abc1234")
    monkeypatch.setattr(results, "REPOSITORY", tmp_path)
    monkeypatch.setattr(results, "PAGES", {"page.md": COMPARISON_BLOCK})
    (tmp_path / "page.md").write_text(EMPTY.format("comparison"))
    table = pd.DataFrame(verdicts)
    table.to_csv(folder / "verdicts.csv", index=False)
    results.main(["render"])  # readable: rendered
    assert "| SMAC | +0.010 ± 0.010" in (tmp_path / "page.md").read_text()
    text = table.to_csv(index=False)
    for written, said in [
        (table.drop(columns="verdict").to_csv(index=False), "verdicts.csv: no column 'verdict'"),
        (text[: text.rindex(",0.05,")], "verdicts.csv: row 3 has 7 fields, the header 10"),
    ]:
        (folder / "verdicts.csv").write_text(written)
        for action in ("render", "check"):
            with pytest.raises(SystemExit) as stopped:
                results.main([action])
            message = str(stopped.value.code)
            assert message.startswith(f"python -m bench.evidence.results {action}: block comparison: "), message
            assert message.endswith(said) and "\n" not in message
    (folder / "plan.json").write_text(json.dumps({"methods": ["smac"]}))
    (folder / "verdicts.csv").write_text(text)
    with pytest.raises(SystemExit, match=r"plan.json: no key 'baseline', 'reference_point', 'alpha'"):
        results.main(["check"])


def test_the_command_line_refuses_in_one_line_and_exits_non_zero(tmp_path):
    """``python -m bench.evidence.results`` from the repository's root, as the docs show it."""
    done = subprocess.run(
        [sys.executable, "-m", "bench.evidence.results", "redecide-study", str(tmp_path / "nosuch")],
        cwd=REPO,
        capture_output=True,
        text=True,
    )
    assert done.returncode == 1 and done.stdout == ""
    assert done.stderr.splitlines() == [
        f"python -m bench.evidence.results redecide-study: '{tmp_path / 'nosuch'}' is not a folder"
    ]
