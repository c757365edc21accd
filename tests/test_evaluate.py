"""The transfer evaluation command on fixture benchmarks: tables, DET plots, W&B, and its checks of bad input."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch

from fairnas.cli import run_cli
from fairnas.config import compose_config
from fairnas.data.formats import read_bin
from fairnas.evaluation import embed_images, evaluate, load_trained_model
from fairnas.metrics import kfold_accuracy, pair_scores
from fairnas.training import train
from tests.conftest import TINY_DATA
from tests.layouts import RACES, write_bin, write_rfw

LABEL = "SMAC_301_cosface"
REPO = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def trained_run(tmp_path_factory):
    """A tiny DPN trained for one epoch on synthetic faces: its run folder."""
    root = tmp_path_factory.mktemp("trained")
    train(compose_config("train", [*TINY_DATA, f"paths.cache_dir={root / 'cache'}", "logger=none"],
                         output_dir=root / "run"))
    return root / "run"


@pytest.fixture(scope="module")
def benchmarks(tmp_path_factory):
    """Packed lfw.bin and cfp_fp.bin, and an RFW folder."""
    root = tmp_path_factory.mktemp("benchmarks")
    write_bin(root / "bins" / "lfw.bin", n_pairs=40, seed=1)
    write_bin(root / "bins" / "cfp_fp.bin", n_pairs=40, seed=2)
    write_rfw(root / "rfw")
    return root


def evaluate_config(trained_run, benchmarks, tmp_path, *overrides):
    return compose_config("evaluate", [
        f"ckpt={trained_run / 'checkpoints' / 'last.ckpt'}", f"bin_dir={benchmarks / 'bins'}",
        f"rfw_root={benchmarks / 'rfw'}", f"paths.cache_dir={tmp_path / 'cache'}", "benchmarks=[lfw,cfp_fp,rfw]",
        "num_workers=0", "device=cpu", "logger=csv", *overrides,
    ], output_dir=tmp_path / "eval")


def test_evaluate_writes_the_transfer_tables(trained_run, benchmarks, tmp_path):
    tables = evaluate(evaluate_config(trained_run, benchmarks, tmp_path))
    out = tmp_path / "eval"

    accuracy = pd.read_csv(out / "accuracy.csv", index_col="model")
    assert list(accuracy.index) == [LABEL] and list(accuracy.columns) == ["lfw", "cfp_fp", "rfw"]
    assert ((accuracy >= 0) & (accuracy <= 100)).all().all()

    # The table's value is the 10-fold accuracy of the model's own embeddings of the benchmark.
    model = load_trained_model(trained_run / "checkpoints" / "last.ckpt")
    lfw = read_bin(benchmarks / "bins", "lfw.bin", cache_dir=tmp_path / "cache")
    embeddings = embed_images(model.embedder, lfw.root, lfw.images["path"].tolist(), model.config.data.transforms)
    scores = pair_scores(embeddings, lfw.pairs["left"], lfw.pairs["right"])
    expected, _ = kfold_accuracy(scores, lfw.pairs["same"].to_numpy(), lfw.pairs["fold"].to_numpy())
    assert accuracy.loc[LABEL, "lfw"] == pytest.approx(100 * expected, abs=1e-4)

    fairness = pd.read_csv(out / "fairness.csv")
    assert fairness[["model", "benchmark"]].values.tolist() == [[LABEL, "rfw"]]
    assert {"error", "rank_disparity", "disparity", "ratio", "rank_ratio", "error_ratio"} <= set(fairness.columns)
    for race in RACES:
        assert {f"error/{race}", f"rank/{race}", f"verification_accuracy/{race}", f"fmr/{race}",
                f"fnmr/{race}"} <= set(fairness.columns)
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
    tables = evaluate(evaluate_config(
        trained_run, benchmarks, tmp_path, f"ckpt=[{checkpoints[0]},{checkpoints[1]}]", "names=[last,best]",
        "benchmarks=[lfw]", "logger=wandb",
    ))
    assert list(tables["accuracy"].index) == ["last", "best"]
    # Both checkpoints hold the same (only) epoch: identical rows.
    assert tables["accuracy"].loc["last", "lfw"] == tables["accuracy"].loc["best", "lfw"]
    assert tables["fairness"].empty
    runs = list((tmp_path / "eval" / "wandb").glob("offline-run-*"))
    assert len(runs) == 1 and any(runs[0].glob("*.wandb"))


BAD_INPUTS = [
    (("benchmarks=[lfw,megaface]",), r"error: benchmarks: \['megaface'\] not in the catalog; allowed: \['lfw'"),
    (("bin_dir=null",), r"error: benchmarks: 'lfw' needs its folder, catalog.lfw.root = \$\{bin_dir\}"),
    (("ckpt=/no/such.ckpt",), r"error: ckpt: checkpoint '/no/such.ckpt' does not exist"),
    (("names=[a,b]",), r"error: names: 2 labels for 1 checkpoints"),
    (("benchmarks=[]",), r"error: evaluate: nothing to do"),
    (("linear_probe.enabled=true", "benchmarks=[]", "linear_probe.split=train2"),
     r"error: linear_probe.split='train2' is not a split"),
]


@pytest.mark.parametrize(("overrides", "message"), BAD_INPUTS, ids=[o[0] for o, _ in BAD_INPUTS])
def test_bad_input_is_one_line(trained_run, benchmarks, tmp_path, capsys, overrides, message):
    with pytest.raises(SystemExit) as exit_info:
        run_cli(evaluate, evaluate_config(trained_run, benchmarks, tmp_path, *overrides))
    assert exit_info.value.code == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1 and re.match(message, lines[0]), lines


def test_checkpoint_without_run_config_or_of_another_model(trained_run, tmp_path):
    (tmp_path / "checkpoints").mkdir()
    lone = tmp_path / "checkpoints" / "last.ckpt"
    lone.write_bytes((trained_run / "checkpoints" / "last.ckpt").read_bytes())
    with pytest.raises(FileNotFoundError, match=r"config\.yaml"):
        load_trained_model(lone)
    (tmp_path / "config.yaml").write_text(
        (trained_run / "config.yaml").read_text().replace("embedding_dim: 64", "embedding_dim: 32"))
    with pytest.raises(ValueError, match="does not match the model"):
        load_trained_model(lone)


def test_loaded_model_embeds_like_the_trained_module(trained_run):
    model = load_trained_model(trained_run / "checkpoints" / "last.ckpt")
    state = torch.load(trained_run / "checkpoints" / "last.ckpt", weights_only=True)["state_dict"]
    weight = state["embedder.neck.layers.2.weight"]
    assert torch.equal(model.embedder.neck.layers[2].weight, weight)
    assert not model.embedder.training and model.label == LABEL
    assert np.isclose(model.config.data.transforms.image_size, 32)


@pytest.mark.slow
def test_the_evaluate_command(trained_run, benchmarks, tmp_path):
    """``python evaluate.py ...`` end to end: exit 0, the accuracy table on the console and on disk."""
    result = subprocess.run(
        [sys.executable, str(REPO / "evaluate.py"), f"ckpt={trained_run / 'checkpoints' / 'last.ckpt'}",
         f"bin_dir={benchmarks / 'bins'}", "benchmarks=[lfw,cfp_fp]", f"paths.cache_dir={tmp_path / 'cache'}",
         f"hydra.run.dir={tmp_path / 'eval'}", "num_workers=0", "logger=none"],
        capture_output=True, text=True, timeout=300, cwd=tmp_path, check=False,
    )
    assert result.returncode == 0, result.stderr[-2000:]
    assert re.search(rf"{LABEL}\s+\d+\.?\d*\s+\d+\.?\d*", result.stdout + result.stderr)
    assert list(pd.read_csv(tmp_path / "eval" / "accuracy.csv").columns) == ["model", "lfw", "cfp_fp"]
