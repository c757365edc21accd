"""bench/training_speed.py runs end to end and reports every row it promises (no timing is asserted)."""

from __future__ import annotations

import pytest

from bench import training_speed


@pytest.mark.filterwarnings("ignore")
def test_training_speed_reports_both_loops_and_every_model_variant(capsys):
    tables = training_speed.main(
        ["--steps", "1", "--warmup", "1", "--batch-size", "2", "--loop-image-size", "32", "--channels-last"]
    )
    loop, models = tables["loop"], tables["models"]
    assert list(loop["loop"]) == ["bare PyTorch", "Lightning"] and (loop["images/s"] > 0).all()
    assert loop["ratio to bare"].iloc[0] == 1.0
    assert set(models["variant"]) == {"fp32", "bf16", "fp32 channels_last", "bf16 channels_last"}
    assert models.groupby("model").size().to_dict() == {"DPN paper (SMAC_301)": 4, "timm dpn68": 4}
    assert (models.loc[models["variant"] == "fp32", "ratio to fp32"] == 1.0).all() and (models["images/s"] > 0).all()
    assert "Lightning vs a bare loop" in capsys.readouterr().out


@pytest.mark.filterwarnings("ignore")
def test_training_speed_showcase_part_times_every_showcase_model_in_both_memory_formats(monkeypatch):
    module = training_speed
    models = {name: module.SHOWCASE_MODELS[name] for name in ("default DPN (3-0-1)", "resnet18")}
    monkeypatch.setattr(module, "SHOWCASE_MODELS", models)
    table = module.main(["--parts", "showcase", "--steps", "1", "--warmup", "1", "--batch-size", "2"])["showcase"]
    assert table.groupby("model")["variant"].apply(list).to_dict() == {
        name: ["NCHW", "channels_last", "channels_last, fused AdamW"] for name in models
    }
    assert (table.loc[table["variant"] == "NCHW", "ratio to NCHW"] == 1.0).all() and (table["images/s"] > 0).all()
