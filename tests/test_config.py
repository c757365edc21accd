"""Every config group option composes, and bad input stops the CLI with one line before training."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest
from omegaconf import OmegaConf

from fairnas.cli import run_cli
from fairnas.config import CONFIG_DIR, compose_config
from fairnas.training import train

REPO = Path(__file__).resolve().parents[1]
GROUP_OPTIONS = [
    (group.name, option.stem)
    for group in sorted(CONFIG_DIR.iterdir()) if group.is_dir()
    for option in sorted(group.glob("*.yaml"))
]


def test_all_groups_have_options():
    groups = {group for group, _ in GROUP_OPTIONS}
    assert {"data", "backbone", "head", "optimizer", "scheduler", "trainer", "logger", "experiment", "search"} <= groups


@pytest.mark.parametrize(("group", "option"), GROUP_OPTIONS, ids=[f"{g}={o}" for g, o in GROUP_OPTIONS])
def test_every_option_composes_and_resolves(group, option, tmp_path):
    required = {"sensitivenets": ["mitigation.checkpoint=/runs/baseline/checkpoints/last.ckpt"]}.get(option, [])
    cfg = compose_config("search" if group == "search" else "train", [f"{group}={option}", *required],
                         output_dir=tmp_path)
    resolved = OmegaConf.to_container(cfg, resolve=True, throw_on_missing=False)
    assert resolved["output_dir"] == str(tmp_path)
    if group == "experiment" and option.endswith("_paper"):
        assert resolved["trainer"]["max_epochs"] == 100 and resolved["data"]["batch_size"] == 64


def test_issue_examples_compose(tmp_path):
    cfg = compose_config("train", ["head=arcface", "optimizer=adamw", "optimizer.lr=1e-3"], output_dir=tmp_path)
    assert cfg.head.name == "arcface" and cfg.optimizer._target_ == "torch.optim.AdamW" and cfg.optimizer.lr == 1e-3
    assert compose_config("train", ["backbone=timm", "backbone.name=resnet18"]).backbone.name == "resnet18"
    assert list(compose_config("train", ["backbone.ops=[3,0,1]"]).backbone.ops) == [3, 0, 1]


def run_train(tmp_path, *overrides):
    return subprocess.run(
        [sys.executable, str(REPO / "train.py"), f"hydra.run.dir={tmp_path}/run", f"paths.cache_dir={tmp_path}/c",
         "logger=none", *overrides],
        capture_output=True, text=True, timeout=300, cwd=tmp_path,
    )


BAD_INPUTS = [
    (("backbone.ops=[3,0,9]",), r"error: backbone.ops\[2\]=9 is not an operation index; allowed 0-8"),
    (("backbone=timm", "backbone.name=resnet_does_not_exist"), "error: backbone.name='resnet_does_not_exist'"),
    (("data=generic", "data.table.root=/no/such/dir"), "error: data.root: dataset directory '/no/such/dir'"),
    (("loss.name=hinge",), "error: .*hinge.*"),
    (("data.table.n_groups=1",), "error: SyntheticFaceSpec.n_groups"),
]


@pytest.mark.parametrize(("overrides", "message"), BAD_INPUTS, ids=[o[0] for o, _ in BAD_INPUTS])
def test_bad_input_exits_with_one_line_before_training(tmp_path, capsys, overrides, message):
    cfg = compose_config("train", [*overrides, f"paths.cache_dir={tmp_path}/c", "logger=none"], output_dir=tmp_path)
    with pytest.raises(SystemExit) as exit_info:
        run_cli(train, cfg)
    assert exit_info.value.code == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1 and re.match(message, lines[0]), lines
    assert not (tmp_path / "checkpoints").exists()


def test_csv_without_required_column_is_named(tmp_path, capsys):
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "metadata.csv").write_text("path,identity,group\na.png,1,m\n")
    cfg = compose_config("train", ["data=generic", f"data.table.root={tmp_path}/data"], output_dir=tmp_path)
    with pytest.raises(SystemExit):
        run_cli(train, cfg)
    assert "missing required column(s) ['split']" in capsys.readouterr().err


def test_cli_exit_code_and_message(tmp_path):
    """The real command line: a bad op index ends with status 2 and one ``error:`` line."""
    result = run_train(tmp_path, "backbone.ops=[3,0,9]")
    assert result.returncode == 2
    assert result.stderr.strip().splitlines()[-1].startswith("error: backbone.ops[2]=9")


def test_unknown_group_option_lists_the_allowed_ones(tmp_path):
    result = run_train(tmp_path, "head=sphereface")
    assert result.returncode != 0
    assert "Available options" in result.stderr and "arcface" in result.stderr
