"""The transfer evaluation command on fixture benchmarks: tables, DET plots, W&B, and its checks of bad input."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch

from fairnas.config import compose_config
from fairnas.data.formats import read_bin
from fairnas.evaluation import embed_images
from fairnas.metrics import kfold_accuracy, pair_scores
from fairnas.tasks.evaluate import evaluate
from fairnas.training.build import load_run
from tests.layouts import RACES, write_bin, write_rfw

LABEL = "SMAC_301_cosface"
REPO = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def benchmarks(tmp_path_factory):
    """Packed lfw.bin and cfp_fp.bin, and an RFW folder."""
    root = tmp_path_factory.mktemp("benchmarks")
    write_bin(root / "bins" / "lfw.bin", n_pairs=40, seed=1)
    write_bin(root / "bins" / "cfp_fp.bin", n_pairs=40, seed=2)
    write_rfw(root / "rfw")
    return root


def evaluate_config(trained_run, benchmarks, tmp_path, *overrides):
    return compose_config(
        "evaluate",
        [
            f"ckpt={trained_run / 'checkpoints' / 'last.ckpt'}",
            f"bin_dir={benchmarks / 'bins'}",
            f"rfw_root={benchmarks / 'rfw'}",
            f"paths.cache_dir={tmp_path / 'cache'}",
            "benchmarks=[lfw,cfp_fp,rfw]",
            "num_workers=0",
            "device=cpu",
            "logger=csv",
            *overrides,
        ],
        output_dir=tmp_path / "eval",
    )


def test_evaluate_writes_the_transfer_tables(trained_run, benchmarks, tmp_path):
    tables = evaluate(evaluate_config(trained_run, benchmarks, tmp_path))
    out = tmp_path / "eval"

    accuracy = pd.read_csv(out / "accuracy.csv", index_col="model")
    assert list(accuracy.index) == [LABEL] and list(accuracy.columns) == ["lfw", "cfp_fp", "rfw"]
    assert ((accuracy >= 0) & (accuracy <= 100)).all().all()

    # The table's value is the 10-fold accuracy of the model's own embeddings of the benchmark.
    model = load_run(trained_run)
    lfw = read_bin(benchmarks / "bins", "lfw.bin", cache_dir=tmp_path / "cache")
    embeddings = embed_images(model.embedder, lfw.root, lfw.images["path"].tolist(), model.config.data.transforms)
    scores = pair_scores(embeddings, lfw.pairs["left"], lfw.pairs["right"])
    expected, _ = kfold_accuracy(scores, lfw.pairs["same"].to_numpy(), lfw.pairs["fold"].to_numpy())
    assert accuracy.loc[LABEL, "lfw"] == pytest.approx(100 * expected, abs=1e-4)

    fairness = pd.read_csv(out / "fairness.csv")
    assert fairness[["model", "benchmark"]].values.tolist() == [[LABEL, "rfw"]]
    assert {"error", "rank_disparity", "disparity", "ratio", "rank_ratio", "error_ratio"} <= set(fairness.columns)
    for race in RACES:
        assert {f"error/{race}", f"rank/{race}", f"verification_accuracy/{race}", f"fmr/{race}", f"fnmr/{race}"} <= set(
            fairness.columns
        )
    ranks = fairness[[f"rank/{race}" for race in RACES]].to_numpy()
    assert fairness["rank_disparity"].iloc[0] == pytest.approx(ranks.max() - ranks.min())

    metrics = pd.read_csv(out / "metrics.csv")
    assert list(metrics.columns) == ["model", "benchmark", "protocol", "group", "metric", "value"]
    rfw = metrics[(metrics["benchmark"] == "rfw") & (metrics["metric"] == "tar_at_far_1e-03")]
    assert set(rfw["group"]) == {"all", *RACES}
    assert tables["accuracy"].loc[LABEL, "rfw"] == pytest.approx(accuracy.loc[LABEL, "rfw"])
    for name in ("lfw", "cfp_fp", "rfw"):
        assert (out / "det" / LABEL / f"{name}.png").read_bytes()[:4] == b"\x89PNG"
    logged = (out / "csv" / "version_0" / "metrics.csv").read_text().splitlines()[0].split(",")
    assert f"{LABEL}/rfw/identification/rank_disparity/all" in logged


def test_several_checkpoints_and_wandb(trained_run, benchmarks, tmp_path):
    checkpoints = [trained_run / "checkpoints" / "last.ckpt", next((trained_run / "checkpoints").glob("best*"))]
    tables = evaluate(
        evaluate_config(
            trained_run,
            benchmarks,
            tmp_path,
            f"ckpt=[{checkpoints[0]},{checkpoints[1]}]",
            "names=[last,best]",
            "benchmarks=[lfw]",
            "logger=wandb",
        )
    )
    assert list(tables["accuracy"].index) == ["last", "best"]
    # Both checkpoints hold the same (only) epoch: identical rows.
    assert tables["accuracy"].loc["last", "lfw"] == tables["accuracy"].loc["best", "lfw"]
    assert tables["fairness"].empty
    runs = list((tmp_path / "eval" / "wandb").glob("offline-run-*"))
    assert len(runs) == 1 and any(runs[0].glob("*.wandb"))


def test_load_run_needs_a_checkpoint_with_its_config_and_matching_weights(trained_run, tmp_path):
    state = torch.load(trained_run / "checkpoints" / "last.ckpt", weights_only=True)
    without_config = tmp_path / "without_config.ckpt"
    torch.save({"state_dict": state["state_dict"]}, without_config)
    with pytest.raises(ValueError, match="carries no training config"):
        load_run(without_config)
    state["hyper_parameters"]["config"]["embedding_dim"] = 32
    other_model = tmp_path / "other_model.ckpt"
    torch.save(state, other_model)
    with pytest.raises(ValueError, match="does not match the model"):
        load_run(other_model)


def test_loaded_run_embeds_like_the_trained_module_even_when_moved(trained_run, tmp_path):
    moved = tmp_path / "moved"
    shutil.copytree(trained_run, moved)
    run = load_run(moved)
    state = torch.load(moved / "checkpoints" / "last.ckpt", weights_only=True)["state_dict"]
    assert torch.equal(run.embedder.neck.layers[2].weight, state["embedder.neck.layers.2.weight"])
    assert not run.embedder.training and run.label == LABEL and run.checkpoint == moved / "checkpoints" / "last.ckpt"
    assert np.isclose(run.config.data.transforms.image_size, 32) and run.config.output_dir == str(moved)
    assert len(run.data().splits["test"]) == 24


@pytest.mark.slow
def test_the_evaluate_command(trained_run, benchmarks, tmp_path):
    """``python evaluate.py ...`` end to end: exit 0, the accuracy table on the console and on disk."""
    result = subprocess.run(
        [
            sys.executable,
            str(REPO / "evaluate.py"),
            f"ckpt={trained_run / 'checkpoints' / 'last.ckpt'}",
            f"bin_dir={benchmarks / 'bins'}",
            "benchmarks=[lfw,cfp_fp]",
            f"paths.cache_dir={tmp_path / 'cache'}",
            f"hydra.run.dir={tmp_path / 'eval'}",
            "num_workers=0",
            "logger=none",
        ],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=tmp_path,
        check=False,
    )
    assert result.returncode == 0, result.stderr[-2000:]
    assert re.search(rf"{LABEL}\s+\d+\.?\d*\s+\d+\.?\d*", result.stdout + result.stderr)
    assert list(pd.read_csv(tmp_path / "eval" / "accuracy.csv").columns) == ["model", "lfw", "cfp_fp"]
