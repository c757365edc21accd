"""End-to-end training through the real config: outputs, loggers, continuation and the bias knobs."""

from __future__ import annotations

import json

import pandas as pd
import pytest
import pytorch_lightning as pl
import torch

from fairnas.search.parallel import with_threads
from fairnas.training.module import FINITE_CHECK_EVERY
from fairnas.training.run import train

METRIC_KEYS = {
    "error",
    "accuracy",
    "rank",
    "rank_disparity",
    "disparity",
    "ratio",
    "rank_ratio",
    "error_ratio",
    "n_probes",
}


def test_train_writes_config_checkpoint_and_all_metrics(tiny_config, tmp_path):
    cfg = tiny_config("head=arcface", "optimizer=adamw", "optimizer.lr=1e-3", output_dir=tmp_path / "run")
    metrics = with_threads(1, train, cfg)  # as a pool's worker sets it

    run = tmp_path / "run"
    saved = json.loads((run / "metrics.json").read_text())
    assert saved["epochs_trained"] == saved["val"]["epoch"] == saved["test"]["epoch"] == 1
    assert saved["torch_threads"] == 1
    for stage in ("val", "test"):
        assert set(saved[stage]) >= METRIC_KEYS
        assert {"error/g0", "error/g1", "rank/g0", "rank/g1", "accuracy/g0", "n_probes/g1"} <= set(saved[stage])
        assert 0.0 <= saved[stage]["error"] <= 1.0
        assert saved[stage]["accuracy"] == pytest.approx(1 - saved[stage]["error"])
    assert metrics["val"]["error"] == pytest.approx(saved["val"]["error"])
    assert (run / "checkpoints" / "last.ckpt").is_file()
    assert "head:" in (run / "config.yaml").read_text() and "ArcFaceHead" in (run / "config.yaml").read_text()
    stored = torch.load(run / "checkpoints" / "last.ckpt", weights_only=True)["hyper_parameters"]["config"]
    assert stored["head"]["_target_"].endswith("ArcFaceHead") and stored["data_info"]["n_groups"] == 2
    logged = (run / "csv" / "version_0" / "metrics.csv").read_text().splitlines()[0]
    assert {"train/loss", "train/classification", "val/error", "val/rank_disparity", "test/error"} <= set(
        logged.split(",")
    )


def test_magface_aux_loss_is_logged(tiny_config, tmp_path):
    train(tiny_config("head=magface", output_dir=tmp_path / "run"))
    header = (tmp_path / "run" / "csv" / "version_0" / "metrics.csv").read_text().splitlines()[0]
    assert "train/magface_g" in header.split(",")


def test_wandb_logger_writes_an_offline_run(tiny_config, tmp_path):
    train(tiny_config("logger=wandb", output_dir=tmp_path / "run"))
    runs = list((tmp_path / "run" / "wandb").glob("offline-run-*"))
    assert len(runs) == 1 and any(runs[0].glob("*.wandb"))


def test_no_logger_still_writes_metrics(tiny_config, tmp_path):
    train(tiny_config("logger=none", "backbone=timm", "backbone.name=resnet10t", output_dir=tmp_path / "run"))
    assert (tmp_path / "run" / "metrics.json").is_file()


def test_regularizers_enter_the_loss_with_their_weight(tiny_config, tmp_path):
    cfg = tiny_config(
        "+regularizer.norm._target_=tests.helpers.EmbeddingNormPenalty",
        "+regularizer.norm.weight=0.5",
        output_dir=tmp_path / "run",
    )
    train(cfg)
    header = (tmp_path / "run" / "csv" / "version_0" / "metrics.csv").read_text().splitlines()[0]
    assert "train/norm" in header.split(",")


@pytest.mark.parametrize(
    "randomness",
    [
        pytest.param((), id="deterministic"),
        pytest.param(("dropout=0.3",), id="dropout"),
        pytest.param(("backbone=timm", "backbone.name=resnet10t", "+backbone.drop_path_rate=0.1"), id="drop_path"),
        pytest.param(("data.in_memory=false", "data.num_workers=2", "dropout=0.3"), id="file_path_2_workers"),
    ],
)
def test_continuing_from_a_checkpoint_equals_training_directly(tiny_config, tmp_path, randomness):
    """The schedule's horizon is fixed, batches and their augmentation depend only on (seed, epoch), and dropout and
    drop-path draws only on (seed, epoch, batch): resuming changes nothing, on the in-memory path (the synthetic
    faces' default) and on the file path with DataLoader workers."""
    common = ("scheduler.horizon_epochs=3", "logger=none", "data.transforms.hflip=0.5", *randomness)
    direct = train(tiny_config(*common, "trainer.max_epochs=2", output_dir=tmp_path / "direct"))
    train(tiny_config(*common, "trainer.max_epochs=1", output_dir=tmp_path / "short"))
    resumed = train(
        tiny_config(
            *common,
            "trainer.max_epochs=2",
            f"resume_from={tmp_path / 'short' / 'checkpoints' / 'last.ckpt'}",
            output_dir=tmp_path / "resumed",
        )
    )
    assert resumed["epochs_trained"] == direct["epochs_trained"] == 2
    for key in ("error", "rank", "rank_disparity"):
        assert resumed["val"][key] == pytest.approx(direct["val"][key], abs=1e-6)
    direct_weights = torch.load(tmp_path / "direct" / "checkpoints" / "last.ckpt", weights_only=False)["state_dict"]
    resumed_weights = torch.load(tmp_path / "resumed" / "checkpoints" / "last.ckpt", weights_only=False)["state_dict"]
    for name, tensor in direct_weights.items():
        torch.testing.assert_close(resumed_weights[name], tensor, rtol=1e-4, atol=1e-5)


def test_images_of_groups_outside_group_order_are_reported_under_no_group(tiny_config, tmp_path):
    """Three groups, ``data.group_order=[g0,g1]``: g2's probes count overall and as impostors, in no group."""
    three = ("data.table.n_groups=3", "data.table.n_identities=36", "logger=none")
    listed = train(tiny_config(*three, "data.group_order=[g0,g1]", output_dir=tmp_path / "listed"))["val"]
    every = train(tiny_config(*three, output_dir=tmp_path / "every"))["val"]
    assert {key for key in listed if key.startswith("n_probes/")} == {"n_probes/g0", "n_probes/g1"}
    for key in ("n_probes", "error", "rank", "n_probes/g0", "n_probes/g1", "rank/g0", "rank/g1"):
        assert listed[key] == pytest.approx(every[key]), key
    assert listed["n_probes/g0"] + listed["n_probes/g1"] + every["n_probes/g2"] == listed["n_probes"]


def test_last_checkpoint_is_the_last_epoch_even_when_validation_does_not_improve(tiny_config, tmp_path):
    """Continuation (search rungs, resume) reads last.ckpt: it must hold the final epoch, not the best one. The
    monitored value here is constant (val/n_probes), so only epoch 0 is ever an improvement."""
    train(
        tiny_config(
            "callbacks.model_checkpoint.monitor=val/n_probes",
            "trainer.max_epochs=3",
            "logger=none",
            output_dir=tmp_path / "run",
        )
    )
    checkpoints = tmp_path / "run" / "checkpoints"
    best = list(checkpoints.glob("best-*.ckpt"))
    assert len(best) == 1 and torch.load(best[0], weights_only=True)["epoch"] == 0
    assert torch.load(checkpoints / "last.ckpt", weights_only=True)["epoch"] == 2


def test_without_test_evaluation_and_with_one_validation(tiny_config, tmp_path):
    """What a search trial runs: ``eval.test=false`` and validation after the last epoch only."""
    metrics = train(
        tiny_config(
            "eval.test=false", "trainer.max_epochs=2", "trainer.check_val_every_n_epoch=2", output_dir=tmp_path / "run"
        )
    )
    saved = json.loads((tmp_path / "run" / "metrics.json").read_text())
    assert metrics["test"] is None and saved["test"] is None and saved["val"]["epoch"] == 2
    logged = (tmp_path / "run" / "csv" / "version_0" / "metrics.csv").read_text()
    header = logged.splitlines()[0].split(",")
    assert not any(name.startswith("test/") for name in header)
    rows = [line.split(",") for line in logged.splitlines()[1:]]
    assert sum(row[header.index("val/error")] != "" for row in rows) == 1  # validated once


def test_test_split_every_epoch_equals_a_run_of_that_many_epochs(tiny_config, tmp_path):
    """``eval.test_every_epoch``: epoch b's test metrics of a 2-epoch run equal a b-epoch run's (fixed horizon)."""
    common = ("scheduler.horizon_epochs=2", "logger=csv", "data.transforms.hflip=0.5")
    long = train(
        tiny_config(*common, "trainer.max_epochs=2", "eval.test_every_epoch=true", output_dir=tmp_path / "long")
    )
    short = train(tiny_config(*common, "trainer.max_epochs=1", output_dir=tmp_path / "short"))
    logged = pd.read_csv(tmp_path / "long" / "csv" / "version_0" / "metrics.csv")
    per_epoch = logged.dropna(subset=["test/error"]).reset_index(drop=True)
    assert len(per_epoch) == 2 and long["test"]["epoch"] == 2
    assert per_epoch.loc[0, "test/error"] == pytest.approx(short["test"]["error"])
    assert per_epoch.loc[0, "test/rank_disparity"] == pytest.approx(short["test"]["rank_disparity"])
    assert per_epoch.loc[1, "test/error"] == pytest.approx(long["test"]["error"])


def test_a_checkpoint_that_cannot_be_written_on_a_full_disk_is_an_out_of_space_error(tmp_path, monkeypatch):
    """Torch reports a full disk as a failed archive write; the checkpoint writer raises it as ENOSPC, which a
    search does not record as a crashed trial (fairnas.search.trial.is_out_of_space)."""
    import errno
    import shutil

    from fairnas.search.trial import is_out_of_space
    from fairnas.training.run import AtomicCheckpointIO

    def failing_save(*args, **kwargs):
        raise RuntimeError("[enforce fail at inline_container.cc] unexpected pos 64 vs 0")

    monkeypatch.setattr(torch, "save", failing_save)
    usage = shutil.disk_usage(tmp_path)
    monkeypatch.setattr(shutil, "disk_usage", lambda path: usage._replace(free=1024))
    with pytest.raises(OSError) as error:
        AtomicCheckpointIO().save_checkpoint({}, tmp_path / "last.ckpt")
    assert error.value.errno == errno.ENOSPC and is_out_of_space(error.value)
    assert not list(tmp_path.iterdir())  # no partial checkpoint or temporary file
    monkeypatch.setattr(shutil, "disk_usage", lambda path: usage._replace(free=10 * 2**30))
    with pytest.raises(RuntimeError, match="unexpected pos"):  # with space left it is some other failure
        AtomicCheckpointIO().save_checkpoint({}, tmp_path / "last.ckpt")


class HostReads(pl.Callback):
    """Counts the device-to-host scalar reads (``aten::_local_scalar_dense``: ``.item()``, ``bool(tensor)``,
    ``.tolist()``; on a GPU each waits for the queued work) in training steps 2 to 4, transforms included. Reads in
    ``on_before_batch_transfer`` are left out: the batch is still on the host there."""

    def __init__(self):
        activities = [torch.profiler.ProfilerActivity.CPU]
        self.profiler, self.reads = torch.profiler.profile(activities=activities, with_stack=True), None

    def on_train_batch_start(self, trainer, module, batch, batch_idx):
        if batch_idx == 2:
            self.profiler.__enter__()

    def on_train_batch_end(self, trainer, module, outputs, batch, batch_idx):
        if batch_idx == 4:
            self.profiler.__exit__(None, None, None)
            reads = [event for event in self.profiler.events() if event.name == "aten::_local_scalar_dense"]
            self.reads = [
                chain for chain in map(callers, reads) if not any("on_before_batch_transfer" in c for c in chain)
            ]


def callers(event) -> list[str]:
    chain, parent = [], event.cpu_parent
    while parent is not None:
        chain, parent = [*chain, parent.name], parent.cpu_parent
    return chain


def test_a_training_step_reads_nothing_back_from_the_device(tiny_config, tmp_path):
    # what a GPU step must not do: each read stalls the host until the GPU has caught up
    from fairnas.training.build import build_model

    module, data = build_model(tiny_config("data.batch_size=8", "logger=none"))
    reads = HostReads()
    trainer = pl.Trainer(
        max_steps=6,
        max_epochs=1,
        logger=False,
        enable_checkpointing=False,
        enable_progress_bar=False,
        callbacks=[reads],
        limit_val_batches=0,
        enable_model_summary=False,
        default_root_dir=tmp_path,
    )
    trainer.fit(module, datamodule=data)
    assert reads.reads == []


def test_a_non_finite_loss_stops_training_by_the_end_of_its_epoch(tiny_config, tmp_path):
    from fairnas.training.build import build_model

    module, data = build_model(tiny_config("logger=none"))
    with torch.no_grad():
        module.head.weight.fill_(float("nan"))
    trainer = pl.Trainer(
        max_epochs=1,
        logger=False,
        enable_checkpointing=False,
        enable_progress_bar=False,
        limit_val_batches=0,
        enable_model_summary=False,
        default_root_dir=tmp_path,
    )
    with pytest.raises(FloatingPointError) as raised:
        trainer.fit(module, datamodule=data)
    batches = min(trainer.num_training_batches, FINITE_CHECK_EVERY)  # the first check: step 50 or the epoch's end
    expected = f"non-finite training loss in the {batches} training batches up to step {batches} (epoch 0)"
    assert str(raised.value) == expected


def test_compile_must_be_a_boolean(tiny_config):
    from fairnas.training.build import build_model

    with pytest.raises(ValueError, match=r"^compile='yes' must be true or false$"):
        build_model(tiny_config("compile=yes"))


@pytest.mark.slow
def test_a_compiled_embedder_trains_and_keeps_the_checkpoint_keys(tiny_config, tmp_path):
    from fairnas.training.build import build_model

    eager, _ = build_model(tiny_config("logger=none"))
    metrics = train(tiny_config("logger=none", "compile=true", output_dir=tmp_path / "compiled"))
    saved = torch.load(tmp_path / "compiled" / "checkpoints" / "last.ckpt", weights_only=False)["state_dict"]
    assert set(saved) == set(eager.state_dict()) and 0 <= metrics["val"]["error"] <= 1


class SetUpProbe(pl.Callback):
    """What the first training step runs under, seen from inside it: autocast and the dtype of the embeddings and
    of the head's logits (forward hooks), the embedder's memory format and the optimizer's settings."""

    seen: dict = {}

    def on_train_start(self, trainer, module):
        def record(name):
            def hook(_, inputs, output):
                tensor = output if isinstance(output, torch.Tensor) else output.logits
                autocast = torch.is_autocast_enabled("cpu"), torch.get_autocast_dtype("cpu")
                SetUpProbe.seen.setdefault(name, (*autocast, tensor.dtype))

            return hook

        module.embedder.register_forward_hook(record("embedder"))
        module.head.register_forward_hook(record("head"))
        convolutions = [p for p in module.embedder.parameters() if p.ndim == 4]
        SetUpProbe.seen["channels_last"] = all(p.is_contiguous(memory_format=torch.channels_last) for p in convolutions)
        SetUpProbe.seen["optimizer"] = trainer.optimizers[0].defaults


def test_the_gpu_set_up_composes_on_the_cpu(tiny_config, tmp_path):
    # trainer=gpu's pieces (bf16 autocast, channels_last weights, the configured optimizer, float32 margins)
    # together in one run, here on the CPU: what a GPU session measures for speed must train at all
    SetUpProbe.seen.clear()
    probe = f"+callbacks.probe._target_={SetUpProbe.__module__}.SetUpProbe"
    overrides = ["trainer=gpu", "trainer.accelerator=cpu", "trainer.max_epochs=1", "eval.test=false", "logger=none"]
    metrics = train(tiny_config(*overrides, "optimizer=adamw", probe, output_dir=tmp_path / "run"))
    assert SetUpProbe.seen["embedder"] == (True, torch.bfloat16, torch.bfloat16)  # under autocast, in bf16
    assert SetUpProbe.seen["head"] == (True, torch.bfloat16, torch.float32)  # margins in float32 regardless
    assert SetUpProbe.seen["channels_last"] is True
    assert SetUpProbe.seen["optimizer"]["fused"] is True  # AdamW's fused update (conf/optimizer/adamw.yaml)
    assert 0 <= metrics["val"]["error"] <= 1 and metrics["epochs_trained"] == 1
