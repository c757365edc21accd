"""SensitiveNets from one command: without ``mitigation.checkpoint``, ``train`` first trains (or reuses) the
baseline it starts from in ``<output_dir>/baseline`` (thesis Sec. 4.5.3)."""

from __future__ import annotations

import json

import pytest
import torch
from hydra.errors import InstantiationException
from omegaconf import OmegaConf

from fairnas.training.run import train


def test_sensitivenets_without_checkpoint_trains_its_baseline_first_and_reuses_it(tiny_config, tmp_path):
    run = tmp_path / "run"
    baseline, checkpoint = run / "baseline", run / "baseline" / "checkpoints" / "last.ckpt"
    train(tiny_config("mitigation=sensitivenets", "logger=none", output_dir=run))

    assert (baseline / "metrics.json").is_file() and checkpoint.is_file()
    assert json.loads((run / "metrics.json").read_text())["init_from"] == str(checkpoint)
    assert json.loads((baseline / "metrics.json").read_text())["init_from"] is None
    baseline_config = OmegaConf.load(baseline / "config.yaml")
    assert baseline_config.mitigation.name == "none" and not baseline_config.regularizer
    assert baseline_config.output_dir == str(baseline)
    pretrained = torch.load(checkpoint, weights_only=True)["state_dict"]
    trained = torch.load(run / "checkpoints" / "last.ckpt", weights_only=True)["state_dict"]
    extractor = {
        name.replace("embedder.", "embedder.extractor.", 1): tensor
        for name, tensor in pretrained.items()
        if name.startswith("embedder.")
    }
    assert extractor and all(torch.equal(trained[name], tensor) for name, tensor in extractor.items())

    written = checkpoint.stat().st_mtime_ns
    train(tiny_config("mitigation=sensitivenets", "logger=none", output_dir=run))
    assert checkpoint.stat().st_mtime_ns == written  # reused, not retrained


def test_sensitivenets_settings_are_checked_before_the_baseline_trains(tiny_config, tmp_path):
    with pytest.raises(InstantiationException, match="mitigation hidden_layers=-1"):
        train(
            tiny_config(
                "mitigation=sensitivenets", "mitigation.hidden_layers=-1", "logger=none", output_dir=tmp_path / "run"
            )
        )
    assert not (tmp_path / "run" / "baseline").exists()
