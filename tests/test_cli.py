"""Every command's entry point: bad input ends in exit status 2 and one ``error:`` line naming the key or file,
before any training, search or audit starts. One table for all five commands, run through the same ``main`` the
top-level scripts and console scripts call; one real subprocess shows a script is wired to it."""

from __future__ import annotations

import importlib
import re
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]

# (command, overrides, the error line); each command's other settings are its defaults.
CASES = [
    ("train", ["backbone.ops=[3,0,9]"], r"error: backbone.ops\[2\]=9 is not an operation index; allowed 0-8"),
    ("train", ["backbone=timm", "backbone.name=resnet_does_not_exist"],
     r"error: backbone.name='resnet_does_not_exist' is not a timm model"),
    ("train", ["data=generic", "data.table.root=/no/such/dir"], r"error: data.root: dataset directory '/no/such/dir'"),
    ("train", ["data.table.n_groups=1"], r"error: SyntheticFaceSpec.n_groups"),
    ("train", ["+data.table.colour=red"], r"error: data.table: .*unexpected keyword argument 'colour'"),
    ("train", ["+head.m=0.5"], r"error: head: CosFaceHead got an unexpected keyword argument 'm'"),
    ("train", ["loss=focal", "+loss.alpha=1"], r"error: loss: .*unexpected keyword argument 'alpha'"),
    ("train", ["+scheduler.warmup=3"], r"error: scheduler: warmup_cosine got an unexpected keyword argument 'warmup'"),
    ("train", ["loss=focal", "loss.gamma=-1"], r"error: loss.gamma=-1 must be non-negative"),
    ("train", ["eval.robustness_bias=true", "eval.robustness.estimator.steps=0"], r"error: .*deepfool.steps=0"),
    ("train", ["init_from=/no/run"], r"error: init_from: checkpoint '/no/run' does not exist"),
    ("search", ["search.eta=1"], r"error: search.eta must be an integer >= 2"),
    ("search", ["search.space=searchspaces/nope.yaml"], r"error: search.space: space file 'searchspaces/nope.yaml'"),
    ("evaluate", ["ckpt=/no/such.ckpt", "benchmarks=[]", "linear_probe.enabled=true"],
     r"error: ckpt: checkpoint '/no/such.ckpt' does not exist"),
    ("evaluate", ["ckpt=/no/such.ckpt", "benchmarks=[lfw,megaface]"], r"error: benchmarks: \['megaface'\] not in"),
    ("audit", ["ckpt=/no/such.ckpt"], r"error: ckpt: checkpoint '/no/such.ckpt' does not exist"),
    ("audit", ["ckpt=/no/such.ckpt", "methods=[pgd]"], r"error: methods=\['pgd'\] must name entries of estimators"),
    ("compare", ["split=train"], r"error: split='train'; allowed: \['val', 'test'\]$"),
    ("compare", ["seeds=0"], r"error: seeds=0 must be a positive number of seeds"),
    ("compare", ["metrics=[unfairness]"], r"error: metrics: \['unfairness'\]; allowed"),
]


@pytest.mark.parametrize(("command", "overrides", "message"), CASES,
                         ids=[f"{command}:{' '.join(overrides)}" for command, overrides, _ in CASES])
def test_bad_input_exits_2_with_one_line(command, overrides, message, tmp_path, monkeypatch, capsys):
    main = importlib.import_module(f"fairnas.tasks.{command}").main
    monkeypatch.setattr(sys, "argv", [command, *overrides, f"hydra.run.dir={tmp_path / 'run'}",
                                      f"paths.cache_dir={tmp_path / 'cache'}", "logger=none"])
    with pytest.raises(SystemExit) as exit_info:
        main()
    assert exit_info.value.code == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1 and re.match(message, lines[0]), lines
    assert not list((tmp_path / "run").glob("**/*.ckpt")) and not (tmp_path / "run" / "trials").exists()


def test_top_level_script_runs_the_command(tmp_path):
    """The real command line: ``python train.py`` with a bad value exits 2 with one ``error:`` line."""
    bad = subprocess.run([sys.executable, str(REPO / "train.py"), "backbone.ops=[3,0,9]", "logger=none",
                          f"hydra.run.dir={tmp_path}"], capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert bad.returncode == 2 and bad.stderr.strip().splitlines()[-1].startswith("error: backbone.ops[2]=9")
