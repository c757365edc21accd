"""Linear probes: per-layer features of timm and DPN backbones, identity-disjoint held-out accuracy."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import torch

from fairnas.audits.linear_probe import LAYERS, linear_probe, stage_features
from fairnas.config import compose_config
from fairnas.models import build_dpn
from fairnas.models.timm_backbone import TimmBackbone
from fairnas.tasks.evaluate import evaluate


def test_stage_features_of_timm_and_dpn_backbones():
    images = torch.randn(2, 3, 64, 64)
    resnet = TimmBackbone("resnet18").eval()
    penultimate, last = stage_features(resnet, images)
    assert penultimate.shape == (2, 256) and last.shape == (2, 512)
    torch.testing.assert_close(last, resnet(images))  # stage N pooled is the backbone's pooled output

    dpn = build_dpn("tiny").eval()
    penultimate, last = stage_features(dpn, images)
    assert penultimate.shape == (2, 176) and last.shape == (2, dpn.num_features)
    torch.testing.assert_close(last, dpn(images))
    with pytest.raises(ValueError, match="TimmBackbone and SearchableDPN"):
        stage_features(torch.nn.Identity(), images)


def test_probe_separates_an_encoded_attribute_and_not_identity_memory():
    rng = np.random.default_rng(0)
    identities = np.repeat(np.arange(60), 5)
    groups = identities % 2
    encoded = rng.normal(size=(300, 8)) + 3.0 * groups[:, None]  # the group is linearly readable
    identity_codes = np.eye(60)[identities]  # one-hot identity: only useful if test identities were seen
    result = linear_probe({"encoded": encoded, "identity": identity_codes}, groups, identities, seed=0)
    assert result["encoded"] == 1.0
    assert result["identity"] == pytest.approx(0.5, abs=0.1)  # chance: test identities never seen in training
    assert result["chance"] == pytest.approx(0.5, abs=0.1) and result["n_train"] + result["n_test"] == 300


def test_probe_needs_two_groups():
    with pytest.raises(ValueError, match="at least two protected groups"):
        linear_probe({"x": np.zeros((10, 2))}, np.zeros(10, dtype=int), np.arange(10))


def test_evaluate_writes_the_probe_table(trained_run, tmp_path):
    cfg = compose_config(
        "evaluate",
        [
            f"ckpt={trained_run / 'checkpoints' / 'last.ckpt'}",
            "benchmarks=[]",
            "linear_probe.enabled=true",
            "num_workers=0",
            "device=cpu",
            "logger=none",
        ],
        output_dir=tmp_path,
    )
    tables = evaluate(cfg)
    saved = pd.read_csv(tmp_path / "linear_probe.csv", index_col="model")
    assert list(saved.columns) == [*LAYERS, "chance", "n_train", "n_test"]
    assert ((saved[list(LAYERS)] >= 0) & (saved[list(LAYERS)] <= 100)).all().all()
    assert saved.loc["SMAC_301_cosface", "layer_N"] == pytest.approx(tables["linear_probe"].iloc[0]["layer_N"])
    # 2 test identities per group x 6 images (the tiny synthetic set), split in identity-disjoint halves
    assert saved.loc["SMAC_301_cosface", "n_train"] + saved.loc["SMAC_301_cosface", "n_test"] == 24
