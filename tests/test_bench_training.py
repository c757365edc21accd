"""bench/training_speed.py runs end to end and reports every row it promises (no timing is asserted), and
bench/gpu_check.py reads its tables."""

from __future__ import annotations

import re
import subprocess

import pandas as pd
import pytest
import torch

from bench import gpu_check, training_speed
from fairnas.config import compose_config
from fairnas.training.build import instantiate_partial


@pytest.mark.integration
@pytest.mark.filterwarnings("ignore")
def test_training_speed_reports_both_loops_and_every_model_variant(capsys):
    tables = training_speed.main(
        ["--steps", "1", "--warmup", "1", "--batch-size", "2", "--loop-image-size", "32", "--model-image-size", "64"]
        + ["--channels-last"]
    )
    loop, models = tables["loop"], tables["models"]
    assert list(loop["loop"]) == ["bare PyTorch", "Lightning"] and (loop["images/s"] > 0).all()
    assert loop["ratio to bare"].iloc[0] == 1.0
    variants = {"fp32", "bf16", "fp32 channels_last", "bf16 channels_last", "bf16 channels_last autotuned"}
    assert set(models["variant"]) == variants and not training_speed.torch.backends.cudnn.benchmark  # restored
    assert models.groupby("model").size().to_dict() == {"DPN paper (SMAC_301)": 5, "timm dpn68": 5}
    assert (models.loc[models["variant"] == "fp32", "ratio to fp32"] == 1.0).all() and (models["images/s"] > 0).all()
    flops = models.groupby("model")["GFLOP/image"]
    assert (flops.nunique() == 1).all()  # one count per model, whatever the precision or memory format
    # dpn68: 2.3 G multiply-adds per image at 224 px (timm), (64/224)^2 of that at 64 px; forward and backward 3x
    assert flops.first()["timm dpn68"] == pytest.approx(3 * 2 * 2.3 * (64 / 224) ** 2, rel=0.05)
    assert "Lightning vs a bare loop" in capsys.readouterr().out

    # bench/gpu_check.py's reading of these tables: model FLOP utilisation against a peak, and the goals
    summary = gpu_check.throughput_summary(loop, models, peaks=(2.0, 1.0))
    first = summary["models"][0]
    assert first["mfu"] == pytest.approx(first["images/s"] * first["GFLOP/image"] * 1e9 / 1e12)  # fp32: TF32 peak
    assert summary["lightning_to_bare"] == loop["ratio to bare"].iloc[1]
    assert (
        summary["paper_dpn_bf16_images_per_s"]
        == models.loc[
            models["variant"].str.startswith("bf16") & (models["model"] == "DPN paper (SMAC_301)"), "images/s"
        ].max()
    )
    assert gpu_check.throughput_summary(loop, models, peaks=None)["models"][0].keys() == set(models.columns)


def test_the_gpu_check_stops_in_one_line_without_a_gpu(monkeypatch):
    monkeypatch.setattr(gpu_check.torch.cuda, "is_available", lambda: False)
    with pytest.raises(SystemExit, match=r"^gpu_check: no CUDA device here"):
        gpu_check.main(["--out", "unused"])


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


def test_the_gpu_check_names_an_unknown_check_and_the_allowed_ones_before_looking_for_a_gpu():
    allowed = r"allowed: gpu_tests, .*, ddp, trials_per_gpu$"
    with pytest.raises(SystemExit, match=rf"^gpu_check: unknown --checks speed; {allowed}"):
        gpu_check.main(["--checks", "metrics,speed"])


def test_the_gpu_checks_overrides_compose_as_meant():
    search = compose_config("search", gpu_check.SEARCH).search
    assert (
        list(search.train_overrides) == ["trainer=gpu", "logger=none"]
        and search.total_budget == 24
        and search.final.seeds == 1
    )
    assert not compose_config("search", gpu_check.SEARCH).get("logger")
    train = compose_config("train", ["trainer=gpu", *gpu_check.PAPER_DPN])
    assert train.data.table.image_size == 112 and train.trainer.accelerator == "gpu"


@pytest.mark.filterwarnings("ignore")
def test_the_profile_part_times_lightning_steps_and_counts_their_device_reads(tmp_path):
    options = ["--steps", "2", "--warmup", "1", "--batch-size", "2", "--loop-image-size", "32"]
    tables = training_speed.main(["--parts", "profile", *options, "--output-dir", str(tmp_path)])
    summary, operations = tables["profile_summary"].iloc[0], tables["profile"]
    assert summary["wall ms/step"] >= summary["host ms/step"] * 0.5 > 0
    assert summary["device-to-host reads/step"] == 0  # what a GPU step must not do (tests/test_train.py)
    assert "aten::convolution_backward" in set(operations["operation"])
    assert operations["host ms/step"].is_monotonic_decreasing and (tmp_path / "profile_summary.csv").is_file()


@pytest.mark.integration
def test_worker_speed_trains_every_way_and_gives_ratios_to_one_at_a_time(cache_dir):
    from bench import worker_speed

    small = ["experiment=smoke", "trainer.max_epochs=1", "data.batch_size=16", "embedding_dim=32"]
    table = worker_speed.main(["--runs", "2", "--overrides", *small, f"paths.cache_dir={cache_dir}"])
    assert len(table) == 3 and (table["runs"] == 2).all() and (table["wall s"] > 0).all()
    assert table["runs an hour, ratio to one at a time"].iloc[0] == 1.0
    assert "MALLOC_TRIM_THRESHOLD_" in table["way"].iloc[2]


@pytest.mark.filterwarnings("ignore")
def test_the_overhead_part_times_bare_and_lightning_steps_and_breaks_lightnings_down_by_group(tmp_path):
    options = ["--overhead-steps", "3", "--overhead-repeats", "1", "--output-dir", str(tmp_path)]
    tables = training_speed.main(["--parts", "overhead", *options])
    summary, breakdown = tables["overhead"], tables["overhead_breakdown"]
    assert list(summary["way"]) == ["bare PyTorch", *training_speed.OVERHEAD_WAYS]
    assert (summary["ms/step"] > 0).all() and summary["over bare"].iloc[0] == 0
    assert list(breakdown["group"]) == list(training_speed.OVERHEAD_GROUPS)
    assert breakdown["Lightning: share"].sum() == pytest.approx(1.0)
    assert breakdown.set_index("group").loc["model, loss, backward, update", "Lightning: share"] > 0
    assert (tmp_path / "overhead_breakdown.csv").is_file() and len(tables["overhead_functions"]) > 0


def test_the_gpu_check_records_the_commit_it_checked():
    commit = gpu_check.source_commit()
    assert re.fullmatch(r"[0-9a-f]{7,40}(\+dirty)?|unknown", commit)
    if (gpu_check.REPOSITORY / ".git").exists():
        head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=gpu_check.REPOSITORY, capture_output=True, text=True)
        assert head.stdout.startswith(commit.removesuffix("+dirty"))


def test_compiling_pays_back_after_the_steps_its_extra_warm_up_buys():
    rows = pd.DataFrame(
        {"model": ["m", "m"], "variant": ["eager", "compiled"], "images/s": [100.0, 200.0], "warm-up s": [1.0, 11.0]}
    )
    payback = training_speed.compile_payback(rows, batch_size=10).iloc[0]
    assert payback["speed-up"] == 2.0 and payback["compile s"] == 10.0
    assert payback["break-even steps"] == pytest.approx(200)  # 10 s / (0.1 - 0.05) s a step
    slower = rows.assign(**{"images/s": [100.0, 90.0]})
    assert training_speed.compile_payback(slower, batch_size=10).iloc[0]["break-even steps"] == float("inf")


@pytest.mark.filterwarnings("ignore")
def test_the_compile_part_times_the_paper_dpn_eager_and_compiled_in_the_gpu_set_up(tmp_path, monkeypatch):
    compiled = []
    monkeypatch.setattr(training_speed.torch, "compile", lambda module: compiled.append(module) or module)
    options = ["--steps", "1", "--warmup", "1", "--batch-size", "2", "--model-image-size", "32"]
    tables = training_speed.main(["--parts", "compile", *options, "--output-dir", str(tmp_path)])
    times = tables["compile"]
    assert list(times["variant"]) == ["bf16 channels_last", "bf16 channels_last compiled"] and len(compiled) == 1
    assert (times["model"] == training_speed.PAPER_DPN).all() and (times["warm-up s"] > 0).all()
    assert set(tables["compile_payback"].columns) == {"model", "speed-up", "compile s", "break-even steps"}
    assert (tmp_path / "compile_payback.csv").is_file()


def test_the_optimizer_part_times_the_for_loop_foreach_and_fused_update_of_each_optimizer(monkeypatch):
    monkeypatch.setattr(training_speed, "OPTIMIZER_MODELS", {"default DPN (train.py)": []})
    setting = training_speed.Setting("cpu", batch_size=2, image_size=32, steps=2, warmup=0)
    table = training_speed.compare_optimizer_steps(setting, ["sgd", "adamw"], repeats=1)
    assert list(table["update"]) == list(training_speed.OPTIMIZER_IMPLEMENTATIONS) * 2
    assert (table["ms/step"] > 0).all()
    assert (table.loc[table["update"] == "for-loop", "speed-up over for-loop"] == 1).all()
    parameters = [torch.nn.Parameter(torch.zeros(2))]
    for implementation, options in training_speed.OPTIMIZER_IMPLEMENTATIONS.items():  # each is what it says
        cfg = training_speed.training_config(["optimizer=sgd", *options])
        defaults = instantiate_partial(cfg.optimizer, "optimizer")(parameters).defaults
        expected = (implementation == "fused", implementation == "foreach")
        assert (bool(defaults["fused"]), bool(defaults["foreach"])) == expected
