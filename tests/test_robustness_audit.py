"""Robustness bias end to end: the training evaluation hook (a search objective) and the audit of a checkpoint."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest
from hydra.errors import InstantiationException

from fairnas.config import compose_config
from fairnas.tasks.audit import audit
from fairnas.training.run import train

FAST_HOOK = ("eval.robustness_bias=true", "eval.robustness.max_probes=12")


@pytest.fixture(scope="module")
def trained_run(tmp_path_factory, cache_dir):
    """One tiny run with the robustness-bias evaluation on; its output folder and returned metrics."""
    from tests.conftest import TINY_DATA

    run = tmp_path_factory.mktemp("robustness") / "run"
    cfg = compose_config(
        "train",
        [*TINY_DATA, f"paths.cache_dir={cache_dir}", "logger=csv", *FAST_HOOK, "eval.robustness.estimator.steps=5"],
        output_dir=run,
    )
    return run, train(cfg)


def test_training_reports_robustness_bias_per_stage_and_group(trained_run):
    run, metrics = trained_run
    for stage in ("val", "test"):
        values = metrics[stage]
        assert values["robustness_bias"] >= 0
        assert values["robustness_bias"] == pytest.approx(abs(values["robustness_sigma/g0"]))
        assert values["robustness_sigma/g0"] == pytest.approx(-values["robustness_sigma/g1"])
        assert values["robustness_sigma/g0"] == pytest.approx(values["robustness_auc/g0"] - values["robustness_auc/g1"])
    assert json.loads((run / "metrics.json").read_text())["val"]["robustness_bias"] == metrics["val"]["robustness_bias"]
    header = (run / "csv" / "version_0" / "metrics.csv").read_text().splitlines()[0].split(",")
    assert {"val/robustness_bias", "val/robustness_sigma/g1", "test/robustness_auc/g0"} <= set(header)


def test_robustness_evaluation_waits_for_the_last_epoch(tiny_config, tmp_path):
    metrics_file = tmp_path / "run" / "csv" / "version_0" / "metrics.csv"
    train(
        tiny_config(
            *FAST_HOOK,
            "estimator@eval.robustness.estimator=linear",
            "trainer.max_epochs=2",
            output_dir=tmp_path / "run",
        )
    )
    logged = pd.read_csv(metrics_file)
    per_epoch = logged.dropna(subset=["val/error"]).set_index("epoch")["val/robustness_bias"]
    assert per_epoch.index.tolist() == [0, 1]
    assert pd.isna(per_epoch[0]) and per_epoch[1] >= 0


def test_bad_robustness_settings_fail_before_training(tiny_config, tmp_path):
    with pytest.raises(InstantiationException, match="gallery_images=0"):
        train(tiny_config("eval.robustness_bias=true", "eval.robustness.gallery_images=0", output_dir=tmp_path / "run"))
    assert not (tmp_path / "run" / "checkpoints").exists()


def audit_config(run: Path, output_dir: Path, *overrides: str):
    return compose_config(
        "audit",
        [
            f"ckpt={run / 'checkpoints' / 'last.ckpt'}",
            "logger=csv",
            "audits=[robustness_bias]",
            "robustness_bias.max_probes=20",
            "robustness_bias.estimators.deepfool.steps=10",
            "robustness_bias.estimators.smoothing.n=200",
            "robustness_bias.estimators.smoothing.n0=20",
            *overrides,
        ],
        output_dir=output_dir,
    )


def test_audit_writes_distances_scores_curves_and_plots(trained_run, tmp_path):
    run, _ = trained_run
    summary = audit(
        audit_config(
            run,
            tmp_path,
            "robustness_bias.methods=[deepfool,smoothing,linear]",
            "robustness_bias.partitions=[group,identity]",
        )
    )["audits"]["robustness_bias"]
    folder = tmp_path / "robustness_bias"
    distances = pd.read_csv(folder / "distances.csv")
    assert len(distances) == summary["n_probes"] == 20
    assert {"path", "identity", "group", "label", "deepfool", "smoothing", "linear"} <= set(distances.columns)
    assert (distances[["deepfool", "smoothing", "linear"]] >= 0).all().all()
    first_images = {path for path in distances["path"] if path.endswith("/000.png")}
    assert not first_images  # each identity's first image is its template

    scores = pd.read_csv(folder / "scores.csv")
    group = scores[(scores["method"] == "deepfool") & (scores["partition"] == "group")].set_index("member")
    assert group.loc["g0", "sigma"] == pytest.approx(-group.loc["g1", "sigma"])
    assert summary["methods"]["deepfool"]["group"]["robustness_bias"] == pytest.approx(group["sigma"].abs().max())
    assert summary["methods"]["smoothing"]["bound"] == "lower"
    assert set(scores[scores["partition"] == "identity"]["member"]) == set(distances["identity"])

    curves = pd.read_csv(folder / "curves.csv")
    start = curves[(curves["method"] == "deepfool") & (curves["partition"] == "group") & (curves["tau"] == 0)]
    in_g0 = distances[distances["group"] == "g0"]["deepfool"]
    assert start.set_index("member").loc["g0", "share"] == pytest.approx((in_g0 > 0).mean())
    assert (folder / "curves_group.png").stat().st_size > 0 and (folder / "curves_identity.png").is_file()
    assert "least robust" in summary["finding"]
    page = (tmp_path / "report.html").read_text()
    assert "robustness_bias" in page and page.count("data:image/png;base64,") == 2


def test_audit_of_the_training_split_uses_the_trained_head(trained_run, tmp_path):
    run, _ = trained_run
    summary = audit(audit_config(run, tmp_path, "split=train", "robustness_bias.methods=[linear]"))
    distances = pd.read_csv(tmp_path / "robustness_bias" / "distances.csv")
    assert summary["split"] == "train" and len(distances) == 20
    assert distances["label"].max() < json.loads((run / "metrics.json").read_text())["num_classes"]


@pytest.mark.parametrize(
    "overrides, match",
    [
        (["robustness_bias.methods=[pgd]"], "methods=\\['pgd'\\] must name entries of robustness_bias.estimators"),
        (["split=holdout"], "split='holdout' is not a split"),
        (["robustness_bias.partitions=[race]"], "partitions=\\['race'\\]"),
        (["robustness_bias.estimators.deepfool.steps=0"], "deepfool.steps=0"),
        (["robustness_bias.max_probes=0"], "max_probes=0 must be a positive integer"),
        (["audits=[shap]"], "unknown audit 'shap'"),
        (["audits=[]"], "name at least one audit"),
        (
            ["audits=[corruptions]", "split=train"],
            "split=train: corruptions takes split=val or split=test; the audits that take split=train: linear_probe, "
            "robustness_bias$",
        ),
        (["audits=[ood]", "icon2.bins=1"], "icon2.bins=1"),  # checked though not chosen
    ],
)
def test_bad_audit_settings_fail_before_loading(tmp_path, overrides, match):
    with pytest.raises((ValueError, InstantiationException), match=match):
        audit(audit_config(tmp_path / "missing_run", tmp_path, *overrides))
