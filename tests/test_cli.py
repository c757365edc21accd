"""Every command's entry point: bad input ends in exit status 2 and one ``error:`` line naming the key or file,
before any training, search or audit starts. One table for all six commands, run through the same ``main`` the
top-level scripts and console scripts call; one real subprocess shows a script is wired to it."""

from __future__ import annotations

import hashlib
import importlib
import logging
import os
import re
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pandas as pd
import pytest
import torch
from hydra.errors import ConfigCompositionException
from omegaconf import OmegaConf

from fairnas import reporting
from fairnas.search.trial import TrialsCrashAlike
from fairnas.tasks.cli import FULL_ERROR, run_cli
from tests.layouts import write_celeba, write_generic

REPO = Path(__file__).resolve().parents[1]

# (command, overrides, the error line); each command's other settings are its defaults.
CASES = [
    ("train", ["backbone.ops=[3,0,9]"], r"error: backbone.ops\[2\]=9 is not an operation index; allowed 0-8"),
    (
        "train",
        ["backbone=timm", "backbone.name=resnet_does_not_exist"],
        r"error: backbone.name='resnet_does_not_exist' is not a timm model",
    ),
    ("train", ["data=generic", "data.root=/no/such/dir"], r"error: data.root: dataset directory '/no/such/dir'"),
    ("train", ["data=celeba"], r"error: data.root is not set: the folder of the data set"),
    ("train", ["data=celeba", "data.root=/no/such/dir"], r"error: data.root: directory '/no/such/dir' does not exist$"),
    ("train", ["data.table.n_groups=1"], r"error: SyntheticFaceSpec.n_groups"),
    ("train", ["+data.table.colour=red"], r"error: data.table: .*unexpected keyword argument 'colour'"),
    ("train", ["+head.m=0.5"], r"error: head: CosFaceHead got an unexpected keyword argument 'm'"),
    ("train", ["loss=focal", "+loss.alpha=1"], r"error: loss: .*unexpected keyword argument 'alpha'"),
    ("train", ["+scheduler.warmup=3"], r"error: scheduler: warmup_cosine got an unexpected keyword argument 'warmup'"),
    ("train", ["loss=focal", "loss.gamma=-1"], r"error: loss.gamma=-1 must be non-negative"),
    ("train", ["eval.robustness_bias=true", "eval.robustness.estimator.steps=0"], r"error: .*deepfool.steps=0"),
    ("search", ["search.eta=1"], r"error: search.eta=1 must be an integer >= 2"),
    ("search", ["search.space=searchspaces/nope.yaml"], r"error: search.space: space file 'searchspaces/nope.yaml'"),
    ("evaluate", ["ckpt=/no/such.ckpt", "benchmarks=[lfw,megaface]"], r"error: benchmarks: \['megaface'\] not in"),
    (
        "audit",
        ["ckpt=/no/such.ckpt", "audits=[robustness_bias]", "robustness_bias.methods=[pgd]"],
        r"error: robustness_bias.methods=\['pgd'\] must name entries of robustness_bias.estimators",
    ),
    ("audit", ["ckpt=/no/such.ckpt", "audits=[shap]"], r"error: audits: unknown audit 'shap'; allowed: "),
    ("audit", ["ckpt=/no/such.ckpt", "corruptions.corruptions=[blur]"], r"error: corruptions.corruptions="),
    ("audit", ["ckpt=/no/such.ckpt", "ood.mutations=[flip]"], r"error: ood.mutations"),
    ("compare", ["split=train"], r"error: split='train'; allowed: \['val', 'test'\]$"),
    ("compare", ["seeds=0"], r"error: seeds=0 must be a positive number of seeds"),
    ("compare", ["metrics=[unfairness]"], r"error: metrics: \['unfairness'\]; allowed"),
    # Settings that are only wrong in combination with the run, or wrong files: {files} is a folder of bad inputs
    # (see bad_files), {trained_run} a finished run of another architecture.
    ("train", ["trainer.max_epochs=0"], r"error: trainer.max_epochs=0 must be a positive integer$"),
    ("train", ["trainer.max_epochs=-1"], r"error: trainer.max_epochs=-1 must be a positive integer$"),
    ("train", ["data.batch_size=0"], r"error: data.batch_size=0 must be a positive integer$"),
    ("train", ["optimizer.lr=0"], r"error: optimizer.lr=0 must be a positive number$"),
    ("train", ["optimizer.lr=-0.1"], r"error: optimizer.lr=-0.1 must be a positive number$"),
    (
        "train",
        ["backbone=timm", "backbone.name=vit_tiny_patch16_224"],
        r"error: data.transforms.image_size=64: the backbone cannot take 64x64 images",
    ),
    ("train", ["data.group_order=[g0,zz]"], r"error: data.group_order: groups \['zz'\] not in column 'group'"),
    ("train", ["resume=always"], r"error: resume='always'; allowed: null, auto$"),
    ("train", ["data.in_memory=maybe"], r"error: data.in_memory='maybe'; allowed: auto, true, false$"),
    ("train", ["data.in_memory_limit_gb=-1"], r"error: data.in_memory_limit_gb=-1 must be a positive number"),
    (
        "train",
        ["mitigation=flipped", "trainer.check_val_every_n_epoch=2"],
        r"error: trainer.check_val_every_n_epoch=2: the mitigation measures its group from the validation after",
    ),
    (
        "train",
        ["backbone.ops=[8,8,8]", "init_from={trained_run}"],
        r"error: init_from: '.*last.ckpt' does not match the model of this config",
    ),
    (
        "train",
        ["data=generic", "data.root={files}/duplicate_paths"],
        r"error: .*metadata.csv: column 'path' lists 1 image\(s\) more than once",
    ),
    (
        "train",
        ["data=generic", "data.root={files}/identity_in_two_splits"],
        r"error: .*metadata.csv: splits must be identity-disjoint",
    ),
    (
        "train",
        [
            "data=celeba",
            "data.root={files}/celeba_unreadable",
            "data.table.verify_images=false",
            "data.transforms.image_size=32",
            "data.transforms.resize=36",
            "trainer.max_epochs=1",
            "logger=none",
        ],
        r"error: data: cannot read image '.*000001.jpg'",
    ),
    ("search", ["search.objectives=[error,unfairness]"], r"error: unknown search.objectives \['unfairness'\]"),
    ("search", ["search.final.seeds=-1"], r"error: search.final.seeds=-1 must be an integer >= 0$"),
    ("search", ["search.benchmark=nope"], r"error: search.benchmark: unknown problem 'nope'; allowed: \[.*\] or null$"),
    (
        "search",
        ["search.benchmark=surrogate_table", "search.max_budget=8"],
        r"error: search.benchmark=surrogate_table has budgets 1 to 4 epochs; search.min_budget=1 and search.max_b",
    ),
    ("search", ["search.final.top_k=0"], r"error: search.final.top_k=0 must be a positive integer$"),
    ("search", ["search.final.answer=best"], r"error: search.final.answer='best' must be one of \['means', 'obs"),
    ("search", ["+search.final.repeats=2"], r"error: unknown search.final settings \['repeats'\]; allowed"),
    ("search", ["search.n_seeds=2"], r"error: search.n_seeds is now search.smac.n_seeds$"),
    ("search", ["search.split=nosuch"], r"error: search.split='nosuch' must be one of \['val', 'test'\]$"),
    (
        "search",
        ["search.reference_point=[1.0,nan]"],
        r"error: search.reference_point=\[1.0, nan\] must be finite numbers, one per objective$",
    ),
    (
        "search",
        ["search.dask_address=tls://127.0.0.1:1"],
        r"error: dask_address=tls://127.0.0.1:1: a tls:// scheduler needs TLS credentials and dask_tls is not set; ",
    ),
    (
        "search",
        ["search.space={files}/syntax_error.yaml"],
        r"error: space file '.*syntax_error.yaml' is not valid YAML \(line 3, column 1\)",
    ),
    (
        "search",
        ["search.space={files}/unknown_type.yaml"],
        r"error: hyperparameter 'op0' has type 'gaussian'; allowed: \['categorical'",
    ),
    ("compare", ["+models.empty=[]"], r"error: models: \['empty'\] have no overrides"),
    # A disparity over one group is undefined, not 0: refused by every command before it trains or audits.
    (
        "train",
        ["data=generic", "data.root={files}/generic", "data.group_order=[g0]"],
        r"error: data.group_order=\['g0'\] names fewer than two of the groups \['g0', 'g1'\] in column 'group'; a "
        r"disparity needs two groups or more$",
    ),
    (
        "train",
        ["data=generic", "data.root={files}/one_group"],
        r"error: data: column 'group' holds only \['g0'\]; a disparity needs two groups or more$",
    ),
    (
        "compare",
        ["train_overrides=['data=generic','data.root={files}/generic','data.group_order=[g0]']"],
        r"error: data.group_order=\['g0'\] names fewer than two of the groups",
    ),
    (
        "study",
        ["data=generic", "data.root={files}/generic", "data.group_order=[g0]"],
        r"error: data.group_order=\['g0'\] names fewer than two of the groups",
    ),
    (
        "audit",
        ["ckpt={trained_run}", "data=generic", "data.root={files}/generic", "data.group_order=[g0]"],
        r"error: data.group_order=\['g0'\] names fewer than two of the groups",
    ),
    # The precision the accelerator runs, checked before anything is written (Lightning would train 16-mixed in bf16
    # on the CPU while config.yaml said 16-mixed).
    (
        "train",
        ["trainer.precision=banana"],
        r"error: trainer.precision='banana' must be one of \['32-true', 'bf16-mixed', '16-mixed', .*\] \(or an alias: "
        r"32, 16, 64, bf16\)$",
    ),
    (
        "train",
        ["trainer.accelerator=cpu", "trainer.precision=16-mixed"],
        r"error: trainer.precision='16-mixed' must be one of \['32-true', 'bf16-mixed', 'bf16-true', '16-true', "
        r"'64-true'\] on the CPU \(trainer.accelerator=cpu\): Lightning would train 16-mixed in bf16-mixed there$",
    ),
    (
        "train",
        ["trainer.accelerator=cpu", "trainer.devices=banana"],
        r"error: trainer: `devices` selected with `CPUAccelerator` should be an int > 0\.$",
    ),
    # A command line Hydra cannot compose: one line, the key meant named where there is one.
    ("study", ["study.alpha=0"], r"error: study.alpha is not a setting; did you mean study.claims.alpha\?$"),
    (
        "train",
        ["trainer.max_epoch=1"],
        r"error: trainer.max_epoch is not a setting; did you mean trainer.max_epochs\?$",
    ),
    ("train", ["trainer.nosuch=1"], r"error: trainer.nosuch is not a setting; to add it, prefix the override with \+"),
    ("train", ["backbone=nosuch"], r"error: In 'train': Could not find 'backbone/nosuch' Available options in 'backbo"),
    (
        "study",
        ["study.default_model.overrides=['trainer.max_epoch=1']"],
        r"error: study.default_model.overrides: trainer.max_epoch is not a setting; did you mean trainer.max_epochs\?$",
    ),
    (
        "compare",
        ["train_overrides=['trainer.max_epoch=1']"],
        r"error: compare: trainer.max_epoch is not a setting; did you mean trainer.max_epochs\? \(in the overrides",
    ),
    # Checkpoint settings beyond one bad file each (BAD_CHECKPOINTS): a run's own last.ckpt with resume=auto, a
    # SensitiveNets run resuming from a missing file (read before its baseline would train), lists.
    (
        "train",
        ["resume=auto", "output_dir={files}/truncated_run"],
        r"error: resume=auto: '.*truncated_run/checkpoints/last.ckpt' is not a readable PyTorch checkpoint \(truncated",
    ),
    (
        "train",
        ["resume=auto", "output_dir={files}/pickled_run"],
        r"error: resume=auto: '.*pickled_run/checkpoints/last.ckpt' holds pickled code \(print\)",
    ),
    (
        "train",
        ["mitigation=sensitivenets", "resume_from={files}/missing.ckpt"],
        r"error: resume_from: checkpoint '.*missing.ckpt' does not exist$",
    ),
    ("train", ["init_from=[/runs/a,/runs/b]"], r"error: init_from=\['/runs/a', '/runs/b'\]: name one checkpoint"),
    ("evaluate", ["ckpt=[]", "benchmarks=[]", "linear_probe.enabled=true"], r"error: ckpt=\[\]: name at least one run"),
    (
        "audit",
        ["ckpt=[{files}/pickled.ckpt,{files}/truncated.ckpt]"],
        r"error: ckpt=\['.*pickled.ckpt', '.*truncated.ckpt'\]: name one checkpoint or run folder$",
    ),
    ("study", ["study.stages=[noise,bogus]"], r"error: study.stages=\['noise', 'bogus'\]: each once, from \['noise'"),
    ("study", ["study.stages=[final]"], r"error: study.stages: final needs search \(it uses its results\)"),
    ("study", ["study.noise.seeds=1"], r"error: study.noise.seeds=1 must be an integer >= 2"),
    (
        "study",
        ["study.final.hand_designed_seeds=9"],
        r"error: study.final.hand_designed_seeds=9 must be at most study.final.seeds=8",
    ),
    (
        "study",
        ["study.transfer.models=[default]"],
        r"error: study.transfer.models=\['default'\]: the searched model and at least one baseline kind",
    ),
    (
        "study",
        ["study.mitigations.names=[nosuch]"],
        r"error: study.mitigations.names \(nosuch\): .*'mitigation/nosuch'",
    ),
    ("study", ["study.search.total_budget=2"], r"error: study.search.total_budget=2 is below one full trial"),
    ("study", ["study.n_workers=0"], r"error: study.n_workers=0 must be a positive integer$"),
    ("study", ["study.dask_timeout=0"], r"error: study.dask_timeout=0 must be a positive number \(seconds\)$"),
    ("study", ["study.sweep.seeds=0"], r"error: study.sweep.seeds=0 must be a positive integer$"),
    ("study", ["study.final.hand_designed=-1"], r"error: study.final.hand_designed=-1 must be an integer >= 0$"),
    ("study", ["+study.search.benchmark=analytic"], r"error: study.search.benchmark='analytic' must be null"),
    (
        "study",
        ["data=celeba", "data.root=/data/celeba", "+data.table.n_identities=24"],
        r"error: the study's training overrides: data.table: read_celeba got an unexpected keyword .*'n_identities'",
    ),
]

# Every setting that names a checkpoint or run folder: (command, overrides with {ckpt} for the path, key in the error).
CHECKPOINT_SETTINGS = [
    ("train", ["resume_from={ckpt}"], "resume_from"),
    ("train", ["init_from={ckpt}"], "init_from"),
    ("train", ["mitigation=sensitivenets", "mitigation.checkpoint={ckpt}"], "mitigation.checkpoint"),
    ("evaluate", ["ckpt={ckpt}", "benchmarks=[]", "linear_probe.enabled=true"], "ckpt"),
    ("evaluate", ["ckpt=[{trained_run},{ckpt}]", "benchmarks=[]", "linear_probe.enabled=true"], r"ckpt\[1\]"),
    ("audit", ["ckpt={ckpt}"], "ckpt"),
    # Training settings of every run of a comparison or search, read as it composes them (before any run).
    ("compare", ["train_overrides=['init_from={ckpt}']"], "init_from"),
    (
        "search",
        ["search.train_overrides=['mitigation=sensitivenets','mitigation.checkpoint={ckpt}']"],
        "mitigation.checkpoint",
    ),
]
# Every way a checkpoint setting can be wrong (see bad_files): (the path, the error after the key).
BAD_CHECKPOINTS = [
    ("{files}/missing.ckpt", r"checkpoint '.*missing.ckpt' does not exist$"),
    ("{files}/not_a_run", r"folder '.*not_a_run' is not a run: it has no checkpoints/last.ckpt$"),
    (
        "{files}/truncated.ckpt",
        r"'.*truncated.ckpt' is not a readable PyTorch checkpoint \(truncated, damaged or another format: \w+",
    ),
    (
        "{files}/damaged_pickle.ckpt",
        r"'.*damaged_pickle.ckpt' is not a readable PyTorch checkpoint \(.*UnpicklingError: Unsupported operand",
    ),
    ("{files}/pickled.ckpt", r"'.*pickled.ckpt' holds pickled code \(print\); checkpoints are loaded as data only"),
]
CASES += [
    (command, [override.replace("{ckpt}", path) for override in overrides], f"error: {key}: {message}")
    for command, overrides, key in CHECKPOINT_SETTINGS
    for path, message in BAD_CHECKPOINTS
]
# conf/logger/'s CSV and W&B loggers: their option names are also the folders they write in a command's output_dir.
LOGGER_FOLDERS = ("csv", "wandb")


@pytest.fixture(autouse=True)
def restore_logging():
    """Hydra's main configures the root logger with a handler on the stderr of its moment, here a capture stream
    that is closed after the test; later tests that log would print 'Logging error' tracebacks."""
    handlers, level = logging.root.handlers[:], logging.root.level
    yield
    logging.root.handlers[:], logging.root.level = handlers, level


@pytest.fixture(scope="module")
def bad_files(tmp_path_factory):
    """A folder of bad inputs: broken checkpoints (also as the last.ckpt of a run folder), a folder that is no run,
    data sets with broken tables or images in their real on-disk formats, and broken search-space files."""
    root = tmp_path_factory.mktemp("bad_inputs")
    write_truncated_checkpoint(root / "truncated.ckpt")
    write_truncated_checkpoint(root / "truncated_run" / "checkpoints" / "last.ckpt")
    write_checkpoint_with_damaged_pickle(root / "damaged_pickle.ckpt")
    write_checkpoint(root / "pickled.ckpt", hook=print)
    write_checkpoint(root / "pickled_run" / "checkpoints" / "last.ckpt", hook=print)
    (root / "not_a_run").mkdir()
    for name, rows in {
        "duplicate_paths": ["a.png,x,train,g0", "a.png,y,train,g1"],
        "identity_in_two_splits": ["a.png,x,train,g0", "b.png,x,val,g0"],
    }.items():
        (root / name).mkdir()
        (root / name / "metadata.csv").write_text("\n".join(["path,identity,split,group", *rows]) + "\n")
    write_celeba(root / "celeba_unreadable")
    (root / "celeba_unreadable" / "img_align_celeba" / "000001.jpg").write_bytes(b"not a jpeg")
    write_generic(root / "generic")  # groups g0 and g1
    write_generic(root / "one_group")
    metadata = root / "one_group" / "metadata.csv"
    metadata.write_text(metadata.read_text().replace(",g1\n", ",g0\n"))
    (root / "syntax_error.yaml").write_text("hyperparameters:\n  op0: {type: categorical, choices: [0, 1\n")
    (root / "unknown_type.yaml").write_text("hyperparameters:\n  op0: {type: gaussian, key: backbone.ops.0}\n")
    return root


def write_checkpoint(path: Path, **entries) -> None:
    """A small real checkpoint as train writes one: weights and the run's config (plus ``entries``)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    torch.save(
        {"state_dict": {"embedder.weight": torch.zeros(64, 64)}, "hyper_parameters": {"config": {}}, **entries}, path
    )


def write_truncated_checkpoint(path: Path) -> None:
    """A checkpoint cut off halfway, as a copy or a save that was interrupted leaves it."""
    write_checkpoint(path)
    path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])


def write_checkpoint_with_damaged_pickle(path: Path) -> None:
    """A checkpoint whose archive is whole but whose pickle is damaged (its first opcode overwritten): torch reports
    it with an ``UnpicklingError``, as it does code, yet the file holds none."""
    whole = path.with_suffix(".whole")
    write_checkpoint(whole)
    with zipfile.ZipFile(whole) as source, zipfile.ZipFile(path, "w") as damaged:
        for entry in source.infolist():
            content = source.read(entry)
            damaged.writestr(entry, b"\xff" + content[1:] if entry.filename.endswith("data.pkl") else content)
    whole.unlink()


@pytest.mark.parametrize(
    ("command", "overrides", "message"),
    CASES,
    ids=[f"{command}:{' '.join(overrides)}" for command, overrides, _ in CASES],
)
def test_bad_input_exits_2_with_one_line(
    command, overrides, message, tmp_path, monkeypatch, capsys, request, cache_dir
):
    """Nothing is left behind either: no run folder (Hydra's is removed when it holds only Hydra's files), so no
    checkpoint, no partial table; except for an unreadable image, found only when it is loaded. Both loggers are on
    (that row aside) and neither wrote anything: no CSV log, no W&B run, anywhere in the working folder."""
    files = {
        name: request.getfixturevalue(fixture)
        for name, fixture in (("files", "bad_files"), ("trained_run", "trained_run"))
        if f"{{{name}}}" in " ".join(overrides)
    }
    capsys.readouterr()  # what making the fixtures printed is not the command's output
    monkeypatch.chdir(tmp_path)  # a path relative to the working folder lands here
    monkeypatch.delenv(FULL_ERROR, raising=False)
    main = importlib.import_module(f"fairnas.tasks.{command}").main
    loggers = [] if any(o.startswith("logger=") for o in overrides) else [f"logger=[{','.join(LOGGER_FOLDERS)}]"]
    monkeypatch.setattr(
        sys,
        "argv",
        [
            command,
            *(o.format(**files) for o in overrides),
            f"hydra.run.dir={tmp_path / 'run'}",
            f"paths.cache_dir={cache_dir}",  # the synthetic faces a case reads, rendered once for the whole run
            *loggers,
        ],
    )
    with pytest.raises(SystemExit) as exit_info:
        main()
    assert exit_info.value.code == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1 and re.match(message, lines[0]), lines
    assert FULL_ERROR not in os.environ  # set only while Hydra composes the command line
    if "cannot read image" in message:
        assert not list((tmp_path / "run").glob("**/*.ckpt")) and not (tmp_path / "run" / "metrics.json").exists()
    else:
        assert not (tmp_path / "run").exists(), sorted(p.name for p in (tmp_path / "run").iterdir())
    logs = [path for root in (tmp_path, *files.values()) for name in LOGGER_FOLDERS for path in root.rglob(name)]
    assert not logs, logs


def test_hydra_full_error_set_by_the_user_gets_hydras_own_error(tmp_path, monkeypatch):
    monkeypatch.setenv(FULL_ERROR, "1")
    monkeypatch.setattr(sys, "argv", ["study", "study.alpha=0", f"hydra.run.dir={tmp_path / 'run'}"])
    with pytest.raises(ConfigCompositionException, match="Could not override 'study.alpha'"):
        importlib.import_module("fairnas.tasks.study").main()


def test_top_level_script_runs_the_command(tmp_path):
    """The real command line: ``python train.py`` with a bad value exits 2 with one ``error:`` line."""
    bad = subprocess.run(
        [sys.executable, str(REPO / "train.py"), "backbone.ops=[3,0,9]", "logger=none", f"hydra.run.dir={tmp_path}"],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=tmp_path,
    )
    assert bad.returncode == 2 and bad.stderr.strip().splitlines()[-1].startswith("error: backbone.ops[2]=9")


def error_lines(command: str, overrides: list[str], tmp_path: Path, monkeypatch, capsys) -> tuple[int, list[str]]:
    """Run ``command``'s entry point with ``overrides`` (a run folder and a cache under ``tmp_path``); its exit
    status and what it printed to stderr."""
    main = importlib.import_module(f"fairnas.tasks.{command}").main
    argv = [command, *overrides, f"hydra.run.dir={tmp_path / 'run'}", f"paths.cache_dir={tmp_path / 'cache'}"]
    monkeypatch.setattr(sys, "argv", argv)
    with pytest.raises(SystemExit) as exit_info:
        main()
    return exit_info.value.code, capsys.readouterr().err.strip().splitlines()


def folder_state(folder: Path) -> dict[str, str | None]:
    """Every file and folder under ``folder`` by its relative path: a file's SHA-256, None for a folder."""
    return {
        str(path.relative_to(folder)): hashlib.sha256(path.read_bytes()).hexdigest() if path.is_file() else None
        for path in sorted(folder.rglob("*"))
    }


@pytest.mark.parametrize(
    "overrides",
    [
        ["trainer.precision=banana"],
        ["trainer.accelerator=cpu", "trainer.precision=16-mixed"],
        ["trainer.accelerator=cpu", "trainer.devices=banana"],
        ["data=generic", "data.root={files}/generic", "data.group_order=[g0]"],
    ],
    ids=lambda overrides: " ".join(overrides),
)
def test_a_refused_run_leaves_the_run_folder_as_it_was(
    overrides, trained_run, bad_files, tmp_path, monkeypatch, capsys
):
    """Nothing is written into a run folder before the run's settings are accepted: a finished run's folder (a copy
    of one) given to a refused run is byte-identical afterwards, and Hydra's own folder is gone."""
    folder = tmp_path / "finished"
    shutil.copytree(trained_run, folder)
    before = folder_state(folder)
    given = [override.format(files=bad_files) for override in overrides]
    code, lines = error_lines("train", [*given, f"output_dir={folder}", "logger=none"], tmp_path, monkeypatch, capsys)
    assert code == 2 and len(lines) == 1 and lines[0].startswith("error: ") and "Traceback" not in lines[0], lines
    assert folder_state(folder) == before
    assert not (tmp_path / "run").exists()


@pytest.mark.skipif(torch.cuda.is_available(), reason="the error is for machines without a GPU")
@pytest.mark.parametrize("trainer", ["gpu", "ddp"])
def test_gpu_trainers_compose_and_stop_in_one_line_without_a_gpu(trainer, tmp_path, monkeypatch, capsys):
    code, lines = error_lines("train", [f"trainer={trainer}", "logger=none"], tmp_path, monkeypatch, capsys)
    assert code == 2 and lines == [
        "error: trainer.accelerator=gpu (trainer=gpu, trainer=ddp) needs a CUDA GPU and none is visible; use "
        "trainer=cpu, or trainer.accelerator=cpu to run DDP processes on the CPU"
    ]
    assert not (tmp_path / "run").exists()


@pytest.mark.parametrize("command", ["train", "search", "study"])
def test_a_logger_without_its_package_stops_the_command_in_one_line(command, tmp_path, monkeypatch, capsys):
    """Lightning builds its loggers without complaint until one is used: without the package every run (every
    trial of a search) would crash alike. Here the CSV logger is made to need a package that is not installed."""
    monkeypatch.setitem(reporting.LOGGER_PACKAGES, "CSVLogger", ("no_such_logger_package",))
    code, lines = error_lines(command, ["logger=csv"], tmp_path, monkeypatch, capsys)
    assert code == 2 and lines == [
        "error: logger.csv (pytorch_lightning.loggers.CSVLogger) needs the no_such_logger_package package, which is "
        "not installed: pip install no_such_logger_package, or logger=csv or logger=none"
    ]
    assert not (tmp_path / "run").exists()


@pytest.mark.parametrize("command", ["train", "search"])
def test_a_logger_whose_package_fails_to_import_stops_the_command_in_one_line(command, tmp_path, monkeypatch, capsys):
    """A package that is there but breaks on import (a broken install, a GPU image without a library of its): found
    is not enough, it is imported. Before, a search trained its first trial, then its summary run raised."""
    (tmp_path / "shadow" / "broken_logger_package").mkdir(parents=True)
    (tmp_path / "shadow" / "broken_logger_package" / "__init__.py").write_text(
        'raise ImportError("libbroken.so: cannot open shared object file")\n'
    )
    monkeypatch.syspath_prepend(tmp_path / "shadow")
    monkeypatch.setitem(reporting.LOGGER_PACKAGES, "CSVLogger", ("broken_logger_package",))
    code, lines = error_lines(command, ["logger=csv"], tmp_path, monkeypatch, capsys)
    assert code == 2 and lines == [
        "error: logger.csv (pytorch_lightning.loggers.CSVLogger) needs the broken_logger_package package, which fails "
        "to import (ImportError: libbroken.so: cannot open shared object file): reinstall broken_logger_package, or "
        "logger=csv or logger=none"
    ]
    assert not (tmp_path / "run").exists()


def test_trials_that_all_crash_alike_end_the_command_in_one_line(capsys):
    def search(cfg):
        raise TrialsCrashAlike("the search's first 3 trials all crashed with the same error, so it stopped")

    with pytest.raises(SystemExit) as exit_info:
        run_cli(search, OmegaConf.create({}))
    assert exit_info.value.code == 2
    assert capsys.readouterr().err.splitlines() == [
        "error: the search's first 3 trials all crashed with the same error, so it stopped"
    ]


SEARCH = ["search.benchmark=table", "search.strategy=random", "search.total_budget=null", "logger=none"]
SEARCH += ["search.final.top_k=1", "search.final.seeds=1"]  # a search of seconds, with a final stage


def run_search_command(folder: Path, overrides: list[str]) -> None:
    """``search.py`` on the tabular benchmark in ``folder``, in this process."""
    argv = ["search", *SEARCH, *overrides, f"hydra.run.dir={folder}"]
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(sys, "argv", argv)
        importlib.import_module("fairnas.tasks.search").main()


@pytest.fixture(scope="module")
def finished_search(tmp_path_factory):
    """A finished search of 4 trials and its final stage, in a folder as ``search.py`` leaves it."""
    folder = tmp_path_factory.mktemp("finished") / "search"
    handlers, level = logging.root.handlers[:], logging.root.level
    run_search_command(folder, ["search.n_trials=4"])
    logging.root.handlers[:], logging.root.level = handlers, level
    return folder


def _set_in_trials(folder: Path, column: str, value: str, config_id: str | None = None) -> None:
    """trials.csv with ``column`` set to ``value`` on its first line (of ``config_id``), the rest as written."""
    path = folder / "trials.csv"
    rows = pd.read_csv(path, dtype=str, keep_default_na=False)
    line = rows.index[0] if config_id is None else rows.index[rows["config_id"] == config_id][0]
    rows.loc[line, column] = value
    path.write_text(rows.to_csv(index=False))


def _nan_in_the_front(folder: Path) -> None:
    _set_in_trials(folder, "error", "nan", pd.read_csv(folder / "pareto_front.csv")["config_id"][0])


def _repeated_line(folder: Path, trial_id: str | None) -> None:
    lines = (folder / "trials.csv").read_text().splitlines(keepends=True)
    repeated = lines[1] if trial_id is None else trial_id + lines[1][lines[1].index(",") :]
    (folder / "trials.csv").write_text("".join([*lines, repeated]))


def _final_runs_of_another_search(folder: Path) -> None:
    """trials.csv without the trials of the configuration the final stage re-trained."""
    final = set(pd.read_csv(folder / "final_trials.csv")["config_id"])
    trials = pd.read_csv(folder / "trials.csv", dtype=str, keep_default_na=False)
    (folder / "trials.csv").write_text(trials[~trials["config_id"].isin(final)].to_csv(index=False))


DAMAGES = {
    "nan_objective": _nan_in_the_front,
    "repeated_line": lambda folder: _repeated_line(folder, None),
    "repeated_trial": lambda folder: _repeated_line(folder, "4"),
    "budget_above_max": lambda folder: _set_in_trials(folder, "budget", "8.0"),
    "search_json_cut": lambda folder: (folder / "search.json").write_text((folder / "search.json").read_text()[:200]),
    "trials_csv_deleted": lambda folder: (folder / "trials.csv").unlink(),
    "final_runs_of_another_search": _final_runs_of_another_search,
    "none": lambda folder: None,
}
# A finished search resumed with a damaged record, or with settings it cannot take: (DAMAGES entry, overrides, the
# error line). Each is refused before any trial, and the folder stays as it was.
RESUME_CASES = [
    ("nan_objective", [], r"error: .*/trials.csv line \d: error=nan is not a finite number, which no search records "),
    ("repeated_line", [], r"error: .*/trials.csv line 6: trial_id 0 is recorded on line 2 too; a search records each"),
    (
        "repeated_trial",
        [],
        r"error: .*/trials.csv line 6: the trial \(config \w{12}, budget 4, seed 0\) is recorded on line 2 too; ",
    ),
    ("budget_above_max", [], r"error: .*/trials.csv line 2: budget=8 lies outside the search's budgets, 1 to 4$"),
    (
        "search_json_cut",
        [],
        r"error: .*/search.json is not whole JSON \(.*: line \d+ column \d+ \(char \d+\)\): restore the search's",
    ),
    (
        "trials_csv_deleted",
        [],
        r"error: .*/trials.csv is missing, yet final_trials.csv, final_candidates.csv, final_front.csv, "
        r"pareto_front.png, pareto_front.csv are there: the search's trials are lost",
    ),
    (
        "final_runs_of_another_search",
        [],
        r"error: .*/final_trials.csv line 2: config \w{12} is no successful full-budget trial of trials.csv, so the",
    ),
    ("none", ["search.max_budget=3"], r"error: .* holds a search with different \['max_budget'\] \(it ran with max"),
    ("none", ["search.split=nosuch"], r"error: search.split='nosuch' must be one of \['val', 'test'\]$"),
]


def _file_hashes(folder: Path) -> dict[str, str]:
    return {
        str(path.relative_to(folder)): hashlib.sha1(path.read_bytes()).hexdigest()
        for path in sorted(folder.rglob("*"))
        if path.is_file()
    }


@pytest.mark.parametrize(
    ("damage", "overrides", "message"), RESUME_CASES, ids=[f"{d}:{' '.join(o)}" for d, o, _ in RESUME_CASES]
)
def test_a_refused_resume_exits_2_with_one_line_and_leaves_the_folder_byte_identical(
    damage, overrides, message, finished_search, tmp_path, capsys
):
    """Hydra's own files included (.hydra/config.yaml recorded the refused settings, and a lock record stayed)."""
    folder = tmp_path / "search"
    shutil.copytree(finished_search, folder)
    DAMAGES[damage](folder)
    before = _file_hashes(folder)
    capsys.readouterr()
    with pytest.raises(SystemExit) as exit_info:
        run_search_command(folder, ["search.n_trials=6", *overrides])
    err = capsys.readouterr().err
    lines = err.strip().splitlines()
    assert exit_info.value.code == 2 and "Traceback" not in err
    assert len(lines) == 1 and re.match(message, lines[0]), lines
    assert _file_hashes(folder) == before
