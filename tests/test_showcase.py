"""bench/showcase.py --quick: every stage of the Chapter 4 pipeline runs, writes its tables and figures, and the
report's claims agree with its own CSVs; a second invocation reads every run back instead of training it again."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
import torch
from PIL import Image

BENCH = Path(__file__).resolve().parents[1] / "bench"
SECTIONS = (
    "## Seed noise",
    "## (a) Hand-designed sweep",
    "## (b) Joint DPN",
    "## (c) Front and hand-designed",
    "## (d) Mitigations",
    "## (e) Transfer",
    "## Claims",
)


def showcase(*args: str, cache_dir: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "FAIRNAS_CACHE_DIR": str(cache_dir), "PYTHONHASHSEED": "0", "WANDB_MODE": "offline"}
    return subprocess.run(
        [sys.executable, str(BENCH / "showcase.py"), *args], env=env, capture_output=True, text=True, timeout=600
    )


def test_quick_pipeline_writes_every_stage_and_claims_that_match_its_tables(tmp_path, cache_dir):
    out = tmp_path / "showcase"
    result = showcase("--quick", "--out", str(out), "--logger", "none", cache_dir=cache_dir)
    assert result.returncode == 0, result.stderr[-3000:]
    report = (out / "report.md").read_text()
    assert [section for section in SECTIONS if section not in report] == []
    figures = re.findall(r"!\[[^]]*\]\(([^)]+)\)", report)
    assert len(figures) == 6
    for name in figures:
        with Image.open(out / name) as image:
            assert image.format == "PNG" and min(image.size) >= 300

    noise = pd.read_csv(out / "noise.csv")
    assert list(noise["seed"]) == [0, 1] and noise["val/error"].between(0, 1).all()
    search = pd.read_csv(out / "search_efficiency.csv")
    assert list(search["seed"]) == [0, 1, 2]  # the searches of the tabular benchmark (built under <out>/table)
    assert (search["difference"] == search["smac"] - search["random"]).all()
    trials = pd.read_csv(out / "search_trials.csv")
    assert set(trials["method"]) == {"smac", "random"}
    # every search stops starting trials once 4 epochs are consumed; a started one finishes (at most 2 epochs)
    assert trials.groupby(["method", "seed"])["consumed_budget"].max().le(4 + 2).all()
    wins = int((search["difference"] > 0).sum())
    assert f"beats random search's in {wins} of 3 seeds" in report
    table = pd.read_csv(out / "table" / "dpn_showcase.csv")
    assert table["config_id"].nunique() == 8 and sorted(table["epoch"].unique()) == [1, 2]
    live = pd.read_csv(out / "live_search.csv")
    assert list(live["live seed"]) == [1] and live["live SMAC share"].iloc[0] >= 0  # (above 1: live beat the table)

    final = pd.read_csv(out / "final.csv")
    assert set(final["kind"]) == {"default", "hand-designed", "searched"}
    assert (final["n_seeds"] == 2).all()
    mitigations = pd.read_csv(out / "mitigations" / "runs.csv")
    assert set(mitigations["mitigation"]) == {"none", "flipped", "angular", "sensitivenets"}
    assert mitigations["model"].nunique() == 3
    assert {f"seed{seed}" for seed in mitigations["seed"]} <= {p.name for p in (out / "runs/final").glob("*/seed*")}
    # the searched and hand-designed baselines are the final stage's runs, read back: at most the default's is trained
    # (here the search's front holds the default configuration, so the final stage trained that one too)
    assert {p.parent.name for p in (out / "mitigations/runs").glob("*/none")} <= {"default_DPN"}
    effects = pd.read_csv(out / "mitigation_effects.csv")
    assert len(effects) == 3 * 3
    adverm = pd.read_csv(out / "adverm.csv")
    assert list(adverm["model"]) == ["plain", "AdvERM"] and adverm["test/robustness_bias"].notna().all()
    transfer = pd.read_csv(out / "transfer.csv")
    assert sorted(transfer["model"]) == sorted(mitigations["model"].unique())

    def runs() -> dict[Path, int]:
        return {path: path.stat().st_mtime_ns for path in (out / "runs").rglob("metrics.json")}

    trained = runs()
    again = showcase("--quick", "--out", str(out), "--logger", "none", cache_dir=cache_dir)
    assert again.returncode == 0, again.stderr[-3000:]
    assert runs() == trained  # nothing trained again, nothing rewritten


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (("--total-budget", "1"), "--total-budget=1 is below one full trial (2 epochs)"),
        (("--max-budget", "6", "--total-budget", "4"), "--total-budget=4 is below one full trial (6 epochs)"),
        (("--max-budget", "0"), "--max-budget=0: must be >= 1"),
        (("--live-seeds", "1", "1"), "--live-seeds 1 1: must be distinct seeds >= 0"),
        (("--trainer", "tpu"), "Could not find 'trainer/tpu'"),
        pytest.param(
            ("--trainer", "gpu"),
            "trainer.accelerator=gpu (trainer=gpu, trainer=ddp) needs a CUDA GPU",
            marks=pytest.mark.skipif(torch.cuda.is_available(), reason="the error is for machines without a GPU"),
        ),
    ],
)
def test_bad_flags_stop_with_one_line_before_anything_is_written(flags, message, tmp_path, cache_dir):
    out = tmp_path / "showcase"
    result = showcase("--quick", *flags, "--out", str(out), cache_dir=cache_dir)
    assert result.returncode == 2
    assert message in result.stderr.splitlines()[-1]
    assert not out.exists()


def test_a_search_without_a_full_budget_trial_stops_with_one_line_and_keeps_its_runs(tmp_path, cache_dir):
    # 3 epochs = one full trial: SMAC spends them on lower fidelities first and finishes none at 3 epochs
    out = tmp_path / "showcase"
    result = showcase(
        "--quick",
        "--max-budget",
        "3",
        "--total-budget",
        "3",
        "--out",
        str(out),
        "--logger",
        "none",
        cache_dir=cache_dir,
    )
    assert result.returncode == 2
    assert (
        "--total-budget=3: the live SMAC search finished no trial at the full budget (3 epochs)"
        in result.stderr.splitlines()[-1]
    )
    assert not (out / "report.md").exists()
    assert (out / "runs" / "noise").is_dir()
