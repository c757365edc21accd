"""The audit command's shell: chosen audits, one folder and summary each, the report, and another data set."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch

from fairnas.audits import AUDITS
from fairnas.audits.base import AuditData
from fairnas.audits.gallery import PixelPipeline, cap_per_group, enrol_gallery
from fairnas.config import compose_config
from fairnas.tasks.audit import audit
from fairnas.training.build import load_run
from tests.conftest import TINY_DATA


class PixelModel:
    """A hand-made model: the embedding is the image's pixels."""

    device = torch.device("cpu")

    def embed(self, images: torch.Tensor) -> torch.Tensor:
        return torch.nn.functional.normalize(images.flatten(1), dim=1)


def test_data_option_audits_another_data_set_through_the_runs_transforms(trained_run, tmp_path, cache_dir):
    run = load_run(trained_run)
    cfg = compose_config(
        "audit",
        [
            f"ckpt={trained_run}",
            "logger=none",
            "audits=[linear_probe]",
            "data=synthetic",
            *[o for o in TINY_DATA if o.startswith("data.table")],
            "data.table.seed=7",
            f"paths.cache_dir={cache_dir}",
        ],
        output_dir=tmp_path,
    )
    summary = audit(cfg)
    assert Path(summary["data"]) != run.data().table.root
    assert json.loads((Path(summary["data"]) / "spec.json").read_text())["seed"] == 7
    assert summary["audits"]["linear_probe"]["n_test"] > 0


def test_gallery_identifies_clean_probes_against_clean_templates(trained_run):
    datamodule = load_run(trained_run).data()
    data = AuditData(datamodule, "test", seed=0, batch_size=16)
    pipeline = PixelPipeline(datamodule.transforms)
    gallery = enrol_gallery(PixelModel(), data, pipeline, gallery_images=1)
    predicted, rank = gallery.identify(gallery.clean_embeddings, gallery.probe_rows)
    truth = gallery.labels[gallery.probe_rows]
    assert gallery.clean[0].shape == (datamodule.transforms["image_size"],) * 2 + (3,)
    assert ((rank == 1) == (predicted == truth)).all() and rank.min() >= 1
    first_rows = data.frame.groupby("identity").head(1).index.to_numpy()
    assert not set(first_rows) & set(gallery.probe_rows)  # each identity's first image is its template
    capped = enrol_gallery(PixelModel(), data, pipeline, max_probes_per_group=2)
    assert np.bincount(datamodule.group_index(data.frame)[capped.probe_rows]).tolist() == [2, 2]


def test_cap_per_group_is_seeded_and_keeps_small_groups_whole():
    rows, groups = np.arange(10), np.array([0] * 7 + [1] * 3)
    kept = cap_per_group(rows, groups, 4, seed=1)
    assert len(kept) == 7 and set(rows[7:]) <= set(kept) and (kept == cap_per_group(rows, groups, 4, seed=1)).all()
    assert (cap_per_group(rows, groups, None, seed=1) == rows).all()


CHEAP = {
    "corruptions": ["corruptions=[contrast,gaussian_noise]", "severities=[0,3]"],
    "ood": ["mutations=[yaw,zoom]"],
    "icon2": ["n_bootstrap=20"],
    "fairness_indicators": ["ks=[5]", "n_bootstrap=20"],
    "attention_iou": ["n_bootstrap=20"],
    "robustness_bias": ["methods=[linear]", "max_probes=8"],
}
"""Smaller settings of the audits whose defaults are slow on a CPU (an audit not here runs with its defaults)."""


def test_the_cheap_settings_are_of_registered_audits():
    assert sorted(set(CHEAP) - set(AUDITS)) == []


def test_every_registered_audit_runs_through_the_command_into_one_report(trained_run, tmp_path):
    names = list(AUDITS)
    cheap = [f"{name}.{override}" for name in names for override in CHEAP.get(name, [])]
    cfg = compose_config(
        "audit", [f"ckpt={trained_run}", "logger=csv", f"audits=[{','.join(names)}]", *cheap], output_dir=tmp_path
    )
    summary = audit(cfg)
    assert list(summary["audits"]) == names
    page = (tmp_path / "report.html").read_text()
    for name in names:
        assert f"id='{name}'" in page and (tmp_path / name / "summary.json").is_file()
        assert summary["audits"][name]["finding"]
        assert AUDITS[name].question in page
    assert page.count("data:image/png;base64,") >= 8
    assert summary["split"] == "test" and all(record["seconds"] >= 0 for record in summary["audits"].values())
    saved = json.loads((tmp_path / "summary.json").read_text())["audits"]
    assert list(saved) == names and saved["linear_probe"]["chance"] == summary["audits"]["linear_probe"]["chance"]
    records = pd.read_csv(tmp_path / "corruptions" / "records.csv")
    assert (records[records["severity"] == 0]["consistent"] == 1).all()
    probe = summary["audits"]["linear_probe"]
    table = pd.read_csv(tmp_path / "linear_probe" / "accuracy.csv").set_index("layer")["accuracy"]
    assert list(table.index) == ["layer_N-1", "layer_N", "embedding", "chance"]
    assert table["embedding"] == pytest.approx(probe["embedding"]) and 0 <= table["embedding"] <= 1
    assert json.loads((tmp_path / "linear_probe" / "summary.json").read_text())["finding"] == probe["finding"]
