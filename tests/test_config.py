"""Every config group option composes, and bad input stops the CLI with one line before training."""

from __future__ import annotations

import pytest
from omegaconf import OmegaConf

from fairnas.config import CONFIG_DIR, compose_config
from fairnas.tasks.cli import run_cli
from fairnas.training.run import train

PLACED_GROUPS = {"estimator": "estimator@eval.robustness.estimator", "pool": "pool@_global_"}  # groups in a package
ROOT_CONFIGS = {"search": "search", "study": "study", "pool": "compare"}  # groups train.yaml does not list
GROUP_OPTIONS = [
    (group.name, option.stem)
    for group in sorted(CONFIG_DIR.iterdir())
    if group.is_dir() and group.name != "hydra"
    for option in sorted(group.glob("*.yaml"))
    if not option.stem.startswith("_")  # _base etc.: shared parts
]


def test_all_groups_have_options():
    groups = {group for group, _ in GROUP_OPTIONS}
    assert {"data", "backbone", "head", "optimizer", "scheduler", "trainer", "logger", "experiment", "search"} <= groups


@pytest.mark.parametrize(("group", "option"), GROUP_OPTIONS, ids=[f"{g}={o}" for g, o in GROUP_OPTIONS])
def test_every_option_composes_and_resolves(group, option, tmp_path):
    required = {
        "sensitivenets": ["mitigation.checkpoint=/runs/baseline/checkpoints/last.ckpt", "data_info={n_groups: 2}"]
    }.get(option, [])
    choice = f"{PLACED_GROUPS.get(group, group)}={option}"
    cfg = compose_config(ROOT_CONFIGS.get(group, "train"), [choice, *required], output_dir=tmp_path)
    resolved = OmegaConf.to_container(cfg, resolve=True, throw_on_missing=False)
    assert resolved["output_dir"] == str(tmp_path)
    if "data" in resolved:  # data.root is the one key for where a data set lives: its table reads it
        assert resolved["data"]["table"]["root"] == resolved["data"]["root"]
    if group == "experiment" and option.endswith("_paper"):
        assert resolved["trainer"]["max_epochs"] == 100 and resolved["data"]["batch_size"] == 64


def test_issue_examples_compose(tmp_path):
    cfg = compose_config("train", ["head=arcface", "optimizer=adamw", "optimizer.lr=1e-3"], output_dir=tmp_path)
    assert (
        cfg.head._target_.endswith("ArcFaceHead")
        and cfg.optimizer._target_ == "torch.optim.AdamW"
        and cfg.optimizer.lr == 1e-3
    )
    assert compose_config("train", ["backbone=timm", "backbone.name=resnet18"]).backbone.name == "resnet18"
    assert list(compose_config("train", ["backbone.ops=[3,0,1]"]).backbone.ops) == [3, 0, 1]


def test_csv_without_required_column_is_named(tmp_path, capsys):
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "metadata.csv").write_text("path,identity,group\na.png,1,m\n")
    cfg = compose_config("train", ["data=generic", f"data.root={tmp_path}/data"], output_dir=tmp_path)
    with pytest.raises(SystemExit):
        run_cli(train, cfg)
    assert "missing required column(s) ['split']" in capsys.readouterr().err


DATA_OPTIONS = [option for group, option in GROUP_OPTIONS if group == "data"]


@pytest.mark.parametrize("option", DATA_OPTIONS)
def test_data_root_is_where_every_data_set_is_read(option, tmp_path):
    """``data.root`` is the one key for a data set's folder: the table of every ``data=`` option reads it."""
    cfg = compose_config("train", [f"data={option}", f"data.root={tmp_path}"], output_dir=tmp_path)
    assert cfg.data.table.root == str(tmp_path)


def test_synthetic_faces_are_cached_under_data_root_by_default(tmp_path):
    cfg = compose_config("train", [f"paths.cache_dir={tmp_path}"], output_dir=tmp_path)
    assert cfg.data.root == cfg.data.table.root == f"{tmp_path}/synthetic_faces"
