"""Training throughput, measured side by side in one run: what Lightning costs, and what the paper's DPN costs.

Two parts, both on pre-built random batches (data loading is excluded; ``bench/data_loading.py`` measures it):

- ``loop``: the fairnas training step under Lightning (``FaceRecognitionModule`` fitted by a ``pl.Trainer``) against
  a bare PyTorch loop over the same embedder, margin head, loss and optimiser, started from the same weights, on the
  same batches, for the same number of steps (``--loop-bf16``: both under bf16 autocast). The first ``--warmup``
  steps of each are not timed, and both synchronise the device only where their timing starts and ends. Goal:
  Lightning >= 0.95x the bare loop's images/s.
- ``models``: training images/s (forward, backward, optimiser step) of the paper-sized searchable DPN
  (``backbone.preset=paper``, SMAC_301) against timm's ``dpn68`` at 112 px, fp32 and bf16 autocast, each also with
  ``channels_last`` (``--channels-last``, which adds bf16 channels_last with cuDNN autotuning,
  ``torch.backends.cudnn.benchmark``) and ``torch.compile`` (``--compile``, timed after compilation), as a ratio
  to the same model's fp32 eager run, and each model's training GFLOP per image (3x the forward pass's,
  ``torch.utils.flop_counter``), from which ``bench/gpu_check.py`` computes the model FLOP utilisation.
- ``compile``: the paper's DPN in the default GPU set-up (bf16 autocast, ``channels_last``), eager and under
  ``torch.compile``: images/s after the warm-up, the warm-up's seconds, and the training steps after which the
  compilation has paid for itself (``compile.csv``, ``compile_payback.csv``).
- ``overhead``: the host time Lightning adds per step, with a near-zero model on the CPU (flatten + one 16-wide
  linear layer at 8 px, batch 4, one intra-op thread): ms/step of the bare loop and of Lightning with the module and
  profiler as ``train.py`` gives them, with Lightning's own pass-through profiler, with the callbacks of every
  ``train.py`` run, logging every step, and as before 2026-11-28 (every step logged, Lightning's per-hook attribute
  set through ``nn.Module.__setattr__``, the pass-through profiler), in ``--overhead-repeats`` rounds of
  ``--overhead-steps`` timed steps after 50 (median, min, max, and each median's excess over the bare loop's; goal:
  the first at most ``OVERHEAD_GOAL_MS``); then Lightning's host time by group (the model's own work, fairnas's
  ``training_step`` and hooks, logging, hook dispatch, callbacks, the optimisation closure, the optimizer wrapper,
  data loader and batch transfer, the loop), traced with ``sys.setprofile`` and scaled to the measured ms/step, and
  the functions with the most time of their own (``overhead.csv``, ``overhead_breakdown.csv``,
  ``overhead_functions.csv``).
- ``profile``: the ``loop`` part's Lightning steps under ``torch.profiler``: per timed step, the wall and host
  milliseconds, the device-to-host reads (``aten::_local_scalar_dense``: ``.item()``, ``bool(tensor)``; on a GPU
  each waits for the queued work) and the stream synchronisations, and the operations that take the most host and
  device time (``profile.csv``).
- ``optimizer``: one ``optimizer.step()`` alone on the parameters of the default DPN, the paper's DPN and timm's
  ``resnet18``, for SGD and AdamW as ``conf/optimizer`` configures them, with the for-loop, foreach and fused
  update (``optimizer.fused``, ``optimizer.foreach``): ms per step and the speed-up over the for-loop.
- ``showcase``: the models of the showcase study (``python study.py experiment=showcase``: the default and a
  searched DPN, ``timm_zoo_small.yaml``'s architectures) on the ``experiment=showcase`` preset at 32 px (AdamW),
  trained in PyTorch's default NCHW memory format with AdamW's for-loop update, then with ``channels_last``, then
  also with AdamW's fused update (both the training config's defaults since 2026-11-24), as a ratio to the first.

The defaults finish in a few minutes on 2 CPU cores (small batches, few steps: CPU figures are for ratios, not for
absolute speed). On a GPU, one command:

    python bench/training_speed.py --device cuda --batch-size 128 --steps 50 --channels-last --compile
    python bench/training_speed.py --parts showcase --batch-size 128     # the showcase's batches
    python bench/training_speed.py --parts overhead                       # host time per step, CPU, ~30 s
"""

from __future__ import annotations

import argparse
import copy
import os
import platform
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple

import pandas as pd
import pytorch_lightning as pl
import torch
from hydra.utils import instantiate
from omegaconf import DictConfig
from pytorch_lightning.callbacks import ModelCheckpoint
from pytorch_lightning.profilers import PassThroughProfiler, Profiler
from torch.utils.flop_counter import FlopCounterMode

from bench.evidence.overhead_report import OVERHEAD_GOAL_MS
from fairnas.config import compose_config
from fairnas.search import load_space
from fairnas.search.parallel import with_threads
from fairnas.training.build import build_embedder, instantiate_partial
from fairnas.training.module import FaceRecognitionModule
from fairnas.training.profiler import trainer_profiler

REPOSITORY = Path(__file__).resolve().parents[1]
NUM_CLASSES = 100
LOOP_GOAL = 0.95


@dataclass(frozen=True)
class Setting:
    device: str
    batch_size: int
    image_size: int
    steps: int
    warmup: int
    bf16: bool = False  # the loop comparison under bf16 autocast (Lightning: precision bf16-mixed)


def training_config(overrides: list[str], output_dir: str | None = None) -> DictConfig:
    """The ``train.py`` config with ``overrides`` (a constant learning rate, no logger), writing under
    ``output_dir`` (default: a folder removed at once, for configs that write nothing)."""
    if output_dir is not None:
        return compose_config("train", ["scheduler=constant", "logger=none", *overrides], output_dir=output_dir)
    with tempfile.TemporaryDirectory() as folder:
        return training_config(overrides, folder)


def build_module(overrides: list[str], embedder: torch.nn.Module | None = None) -> FaceRecognitionModule:
    """The training module a ``train.py`` config with ``overrides`` builds, without its data (NUM_CLASSES classes);
    ``embedder`` replaces the configured backbone and neck (its output width must be ``embedding_dim``)."""
    cfg = training_config(overrides)
    head = instantiate_partial(cfg.head, "head")(embedding_dim=cfg.embedding_dim, num_classes=NUM_CLASSES)
    return FaceRecognitionModule(
        embedder=build_embedder(cfg) if embedder is None else embedder,
        head=head,
        loss=instantiate(cfg.loss),
        optimizer=instantiate_partial(cfg.optimizer, "optimizer"),
        scheduler=None,
        group_order=["g0", "g1"],
    )


def random_batches(setting: Setting, n: int, seed: int = 0) -> list[dict]:
    """``n`` batches in the training step's format, on the setting's device."""
    generator = torch.Generator().manual_seed(seed)
    size, device = (setting.batch_size, 3, setting.image_size, setting.image_size), setting.device
    return [
        {
            "image": torch.randn(size, generator=generator).to(device),
            "label": torch.randint(NUM_CLASSES, (setting.batch_size,), generator=generator).to(device),
            "group": torch.zeros(setting.batch_size, dtype=torch.long, device=device),
            "index": torch.arange(setting.batch_size, device=device),
        }
        for _ in range(n)
    ]


def synchronize(device: str) -> None:
    if device.startswith("cuda"):
        torch.cuda.synchronize()


class StepTimer(pl.Callback):
    """Wall time from the start of training step ``warmup`` to the end of the last step, timed as the bare loop is:
    the device is synchronised only at those two points, so queued GPU work overlaps the host as it does there."""

    def __init__(self, warmup: int, device: str):
        self.warmup, self.device, self.start, self.end = warmup, device, None, None

    def on_train_batch_start(self, trainer, pl_module, batch, batch_idx):
        if trainer.global_step == self.warmup:
            synchronize(self.device)
            self.start = time.perf_counter()

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx):
        if trainer.global_step == trainer.max_steps:  # the last optimiser step has been taken
            synchronize(self.device)
            self.end = time.perf_counter()


def fit_steps(
    module: FaceRecognitionModule,
    batches: list[dict],
    setting: Setting,
    callback: pl.Callback,
    profiler: Profiler | None = None,
    callbacks: tuple[pl.Callback, ...] = (),
) -> None:
    """Lightning fits ``module`` on ``batches``, one step each, with nothing else (no validation, logger, bar) but
    ``callbacks`` after ``callback``, and the profiler ``train.py`` gives unless ``profiler`` is another."""
    trainer = pl.Trainer(
        accelerator="gpu" if setting.device.startswith("cuda") else "cpu",
        devices=1,
        precision="bf16-mixed" if setting.bf16 else "32-true",
        max_steps=len(batches),
        limit_val_batches=0,
        num_sanity_val_steps=0,
        logger=False,
        enable_checkpointing=any(isinstance(extra, ModelCheckpoint) for extra in callbacks),
        enable_progress_bar=False,
        enable_model_summary=False,
        callbacks=[callback, *callbacks],
        profiler=profiler or trainer_profiler(None),
    )
    trainer.fit(module, train_dataloaders=torch.utils.data.DataLoader(batches, batch_size=None, shuffle=False))


def lightning_images_per_second(module: FaceRecognitionModule, batches: list[dict], setting: Setting) -> float:
    timer = StepTimer(setting.warmup, setting.device)
    fit_steps(module, batches, setting, timer)
    return setting.batch_size * setting.steps / (timer.end - timer.start)


class StepTimes(NamedTuple):
    images_per_s: float
    """after the warm-up steps"""
    warmup_s: float
    """the warm-up steps' seconds (with ``torch.compile``, the compilation's too)"""


def train_steps(
    embedder,
    head,
    loss,
    optimizer,
    batches: list[dict],
    setting: Setting,
    autocast: bool = False,
) -> StepTimes:
    """Images/s of plain forward / loss / backward / step over ``batches``, the first ``warmup`` untimed, and the
    seconds those took."""
    device_type = "cuda" if setting.device.startswith("cuda") else "cpu"
    synchronize(setting.device)
    first = time.perf_counter()
    for step, batch in enumerate(batches):
        if step == setting.warmup:
            synchronize(setting.device)
            start = time.perf_counter()
        with torch.autocast(device_type, dtype=torch.bfloat16, enabled=autocast):
            output = head(embedder(batch["image"]), batch["label"])
            value = loss(output.logits, batch["label"]) + sum(output.aux_losses.values())
        optimizer.zero_grad(set_to_none=True)
        value.backward()
        optimizer.step()
    synchronize(setting.device)
    return StepTimes(setting.batch_size * setting.steps / (time.perf_counter() - start), start - first)


class StepProfiler(pl.Callback):
    """``torch.profiler`` over training steps ``warmup`` to the last (host and, on CUDA, device activity)."""

    def __init__(self, warmup: int, device: str):
        activities = [torch.profiler.ProfilerActivity.CPU]
        if device.startswith("cuda"):
            activities.append(torch.profiler.ProfilerActivity.CUDA)
        self.warmup, self.device, self.profiler = warmup, device, torch.profiler.profile(activities=activities)
        self.seconds = 0.0

    def on_train_batch_start(self, trainer, pl_module, batch, batch_idx):
        if trainer.global_step == self.warmup:
            synchronize(self.device)
            self.profiler.__enter__()
            self.seconds = time.perf_counter()

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx):
        if trainer.global_step == trainer.max_steps:
            synchronize(self.device)
            self.seconds = time.perf_counter() - self.seconds
            self.profiler.__exit__(None, None, None)


def profile_lightning_steps(setting: Setting) -> tuple[dict, pd.DataFrame]:
    """The tiny DPN's Lightning steps under the profiler: a summary per step and the operations by host time."""
    torch.manual_seed(0)
    module = build_module(["backbone.preset=tiny"]).to(setting.device)
    profiler = StepProfiler(setting.warmup, setting.device)
    fit_steps(module, random_batches(setting, setting.warmup + setting.steps), setting, profiler)
    events, steps = profiler.profiler.key_averages(), setting.steps
    table = pd.DataFrame(
        [
            {
                "operation": event.key,
                "calls/step": event.count / steps,
                "host ms/step": event.self_cpu_time_total / 1e3 / steps,
                "device ms/step": getattr(event, "self_device_time_total", 0.0) / 1e3 / steps,
            }
            for event in events
        ]
    ).sort_values("host ms/step", ascending=False)
    calls = dict(zip(table["operation"], table["calls/step"], strict=True))
    summary = {
        "wall ms/step": round(profiler.seconds * 1e3 / steps, 2),
        "host ms/step": round(float(table["host ms/step"].sum()), 2),
        "device ms/step": round(float(table["device ms/step"].sum()), 2),
        "device-to-host reads/step": float(calls.get("aten::_local_scalar_dense", 0.0)),
        "stream syncs/step": float(calls.get("cudaStreamSynchronize", 0.0) + calls.get("cudaDeviceSynchronize", 0.0)),
    }
    return summary, table


def compare_loops(setting: Setting) -> pd.DataFrame:
    """Lightning and the bare loop on the tiny DPN from the same weights and batches."""
    torch.manual_seed(0)
    module = build_module(["backbone.preset=tiny"]).to(setting.device)
    bare = copy.deepcopy(module).train()
    batches = random_batches(setting, setting.warmup + setting.steps)
    optimizer = bare.optimizer_factory(params=bare.parameters())
    bare_rate = train_steps(
        bare.embedder, bare.head, bare.loss, optimizer, batches, setting, autocast=setting.bf16
    ).images_per_s
    lightning_rate = lightning_images_per_second(module, batches, setting)
    return pd.DataFrame(
        [
            {"loop": "bare PyTorch", "images/s": bare_rate, "ratio to bare": 1.0},
            {"loop": "Lightning", "images/s": lightning_rate, "ratio to bare": lightning_rate / bare_rate},
        ]
    )


OVERHEAD_GROUPS = (
    "model, loss, backward, update",
    "training_step (fairnas)",
    "module hooks (fairnas)",
    "logging",
    "hook dispatch",
    "callbacks",
    "closure",
    "optimizer wrapper",
    "data loader, batch transfer",
    "loop",
    "other",
)
"""The ``overhead`` part's groups of host time; the first is the bare loop's own work (``nn.Module`` calls,
``backward``, ``torch.optim``), the rest is what Lightning and the module add around it."""
_PL = f"{os.sep}pytorch_lightning{os.sep}"


def overhead_group(code) -> str | None:
    """The group a Python function belongs to (None: its caller's group), by its file and name. The innermost
    function with a group decides, so e.g. a ``torch.optim`` step that calls Lightning's closure counts as the
    closure, and the forward passes inside ``training_step`` as the model."""
    path, name = code.co_filename, code.co_name
    if (
        f"utils{os.sep}data{os.sep}" in path
        or name in ("batch_to_device", "_on_before_batch_transfer")
        or (path.endswith(f"loops{os.sep}fetchers.py"))
    ):
        return "data loader, batch transfer"
    if f"{os.sep}torch{os.sep}" in path:
        if path.endswith(f"nn{os.sep}modules{os.sep}module.py") and "call_impl" in name:
            return OVERHEAD_GROUPS[0]
        if f"{os.sep}optim{os.sep}" in path or name == "backward":
            return OVERHEAD_GROUPS[0]
        return None
    if path.endswith(f"fairnas{os.sep}training{os.sep}module.py"):
        if name == "__setattr__":  # as its caller (Lightning sets _current_fx_name around each hook)
            return None
        return OVERHEAD_GROUPS[1] if name in ("training_step", "_log_step") else OVERHEAD_GROUPS[2]
    if path == __file__ and name.startswith("on_train_batch"):  # the benchmark's own timer
        return "callbacks"
    if path.endswith(f"fairnas{os.sep}training{os.sep}rng.py"):  # train.py's batch seeding
        return "callbacks"
    if _PL not in path and "lightning_fabric" not in path:
        return None
    if "logger_connector" in path or (path.endswith(f"core{os.sep}module.py") and "log" in name.lower()):
        return "logging"
    if path.endswith(f"trainer{os.sep}call.py") or path.endswith(f"core{os.sep}hooks.py"):
        return "hook dispatch"
    if f"{_PL}callbacks{os.sep}" in path:
        return "callbacks"
    if f"loops{os.sep}optimization" in path:
        return "closure"
    if path.endswith(f"core{os.sep}optimizer.py") or f"{os.sep}precision{os.sep}" in path or "optimizer" in name:
        return "optimizer wrapper"
    if f"{os.sep}strategies{os.sep}" in path:  # the strategy's training_step and backward: inside the closure
        return "closure"
    if f"{_PL}loops{os.sep}" in path or f"{_PL}trainer{os.sep}" in path:
        return "loop"
    return None


class GroupTracer(pl.Callback):
    """Host time of training steps ``warmup`` to the last, by :data:`OVERHEAD_GROUPS` (``sys.setprofile``: every
    Python call and return; the time between two events goes to the group of the innermost function with one). The
    tracer slows Python code more than native code, so its shares, not its milliseconds, are what to read."""

    def __init__(self, warmup: int):
        self.warmup, self.seconds, self.groups = warmup, dict.fromkeys(OVERHEAD_GROUPS, 0.0), {}
        self.stack: list[tuple[str, object]] = []  # (group, code or C function) per open call
        self.functions: dict[tuple[str, str], float] = {}
        self.last = 0.0
        self.traced = 0.0

    def _group(self, code, parent: str) -> str:
        group = self.groups.get(code, False)
        if group is False:
            group = self.groups[code] = overhead_group(code)
        return group or parent

    def _event(self, frame, event, arg):
        now = time.perf_counter()
        group, function = self.stack[-1] if self.stack else ("other", None)
        self.seconds[group] += now - self.last
        key = (group, function)
        self.functions[key] = self.functions.get(key, 0.0) + now - self.last
        if event == "call":
            self.stack.append((self._group(frame.f_code, group), frame.f_code))
        elif event == "c_call":
            self.stack.append((group, arg))
        elif event in ("return", "c_return", "c_exception") and self.stack:
            self.stack.pop()
        self.last = time.perf_counter()

    def top_functions(self, steps: int, n: int = 15) -> pd.DataFrame:
        """The ``n`` functions with the most traced time of their own outside the first group, in ms/step."""
        rows = [
            {"group": group, "function": function_name(function), "traced ms/step": seconds * 1e3 / steps}
            for (group, function), seconds in self.functions.items()
            if group != OVERHEAD_GROUPS[0]
        ]
        table = pd.DataFrame(rows).groupby(["group", "function"], as_index=False)["traced ms/step"].sum()
        return table.sort_values("traced ms/step", ascending=False).head(n)

    def on_train_batch_start(self, trainer, pl_module, batch, batch_idx):
        if trainer.global_step == self.warmup:
            frames, frame = [], sys._getframe()
            while frame is not None:
                frames.append(frame.f_code)
                frame = frame.f_back
            self.stack = []
            for code in reversed(frames):
                self.stack.append((self._group(code, self.stack[-1][0] if self.stack else "other"), code))
            self.traced = self.last = time.perf_counter()
            sys.setprofile(self._event)

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx):
        if trainer.global_step == trainer.max_steps:
            sys.setprofile(None)
            self.traced = time.perf_counter() - self.traced


def function_name(function) -> str:
    """``file:line name`` of a Python function's code (the file relative to its package root), a C function's name."""
    if function is None:
        return "?"
    if hasattr(function, "co_filename"):
        path = function.co_filename
        for root in ("site-packages" + os.sep, str(REPOSITORY) + os.sep):
            path = path.split(root)[-1]
        return f"{path}:{function.co_firstlineno} {function.co_name}"
    return f"<C> {getattr(function, '__qualname__', getattr(function, '__name__', repr(function)))}"


class EveryStepLogging(FaceRecognitionModule):
    """The training module logging every training step, as before 2026-11-28."""

    def _should_log_step(self) -> bool:
        return True


class AsBefore(EveryStepLogging):
    """The training module as before 2026-11-28: every step logged, and Lightning's per-hook attribute set through
    ``nn.Module.__setattr__``."""

    __setattr__ = torch.nn.Module.__setattr__


def tiny_embedder(image_size: int, width: int) -> torch.nn.Module:
    """A near-zero embedder: flatten and one small linear layer."""
    return torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(3 * image_size**2, width))


def with_same_weights(module: FaceRecognitionModule, variant: type[FaceRecognitionModule]) -> FaceRecognitionModule:
    """``variant`` around copies of ``module``'s embedder and head, with its loss and optimiser."""
    return variant(
        embedder=copy.deepcopy(module.embedder),
        head=copy.deepcopy(module.head),
        loss=module.loss,
        optimizer=module.optimizer_factory,
        scheduler=None,
        group_order=module.group_order,
    )


@dataclass(frozen=True)
class OverheadWay:
    """How the ``overhead`` part runs Lightning's steps: the module's class, the trainer's profiler (None: the one
    ``train.py`` gives, :class:`fairnas.training.profiler.NoProfiler`) and whether the callbacks every ``train.py``
    run has (its two checkpoints and batch seeding, ``conf/callbacks/default.yaml``) are added."""

    module: type[FaceRecognitionModule] = FaceRecognitionModule
    profiler: type[Profiler] | None = None
    run_callbacks: bool = False


OVERHEAD_WAYS = {
    "Lightning": OverheadWay(),
    "Lightning, its pass-through profiler": OverheadWay(profiler=PassThroughProfiler),
    "Lightning, train.py's callbacks": OverheadWay(run_callbacks=True),
    "Lightning, every step logged": OverheadWay(module=EveryStepLogging),
    "Lightning, as before": OverheadWay(module=AsBefore, profiler=PassThroughProfiler),
}
"""The ``overhead`` part's Lightning ways: each differs from the first in one thing, except the module, logging and
profiler of before 2026-11-28 together."""
TRACED_WAYS = ("Lightning", "Lightning, train.py's callbacks", "Lightning, as before")


def overhead_modules(setting: Setting, width: int) -> dict[str, FaceRecognitionModule]:
    """Each of :data:`OVERHEAD_WAYS`' modules around the near-zero embedder, all from the same weights."""
    torch.manual_seed(0)
    overrides = [f"embedding_dim={width}", "channels_last=false"]
    module = build_module(overrides, tiny_embedder(setting.image_size, width)).to(setting.device)
    return {way: with_same_weights(module, spec.module) for way, spec in OVERHEAD_WAYS.items()}


def fit_way(
    way: str, module, batches: list[dict], setting: Setting, callback: pl.Callback, run_callbacks: DictConfig
) -> None:
    """:func:`fit_steps` the way ``OVERHEAD_WAYS[way]`` says: its profiler, and new callbacks from
    ``run_callbacks`` (the ``callbacks`` of a ``train.py`` config) when it has them."""
    spec = OVERHEAD_WAYS[way]
    profiler = spec.profiler() if spec.profiler else None
    callbacks = tuple(instantiate(node) for node in run_callbacks.values()) if spec.run_callbacks else ()
    fit_steps(module, batches, setting, callback, profiler, callbacks)


def ms_per_step(seconds: float, setting: Setting) -> float:
    return seconds * 1e3 / setting.steps


def host_overhead(setting: Setting, repeats: int, width: int = 16) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    """ms/step of the bare loop and of each of :data:`OVERHEAD_WAYS`, in ``repeats`` rounds whose order rotates
    (median, min, max, and the median over the bare loop's); then one traced run of each of :data:`TRACED_WAYS`: its
    host time by group, each group's share scaled to the way's measured median ms/step; and the functions with the
    most traced time of their own outside the model's work (the first way)."""
    batches = random_batches(setting, setting.warmup + setting.steps)
    ways = ["bare PyTorch", *OVERHEAD_WAYS]
    rows = []
    with tempfile.TemporaryDirectory() as folder:
        run_callbacks = training_config([], folder).callbacks  # train.py's (conf/callbacks/default.yaml)
        for repeat in range(repeats):
            order = ways[repeat % len(ways) :] + ways[: repeat % len(ways)]
            modules = overhead_modules(setting, width)
            for way in order:
                if way == "bare PyTorch":
                    bare = copy.deepcopy(modules["Lightning"]).train()
                    optimizer = bare.optimizer_factory(params=bare.parameters())
                    rate = train_steps(bare.embedder, bare.head, bare.loss, optimizer, batches, setting).images_per_s
                    seconds = setting.batch_size * setting.steps / rate
                else:
                    timer = StepTimer(setting.warmup, setting.device)
                    fit_way(way, modules[way], batches, setting, timer, run_callbacks)
                    seconds = timer.end - timer.start
                rows.append({"repeat": repeat, "way": way, "ms/step": ms_per_step(seconds, setting)})
        runs = pd.DataFrame(rows)
        summary = runs.groupby("way", sort=False)["ms/step"].agg(["median", "min", "max"]).reindex(ways)
        bare = summary.loc["bare PyTorch", "median"]
        summary["over bare"] = summary["median"] - bare
        summary = summary.reset_index().rename(columns={"median": "ms/step", "min": "min", "max": "max"})

        columns, top = {}, None
        for way in TRACED_WAYS:
            tracer = GroupTracer(setting.warmup)
            fit_way(way, overhead_modules(setting, width)[way], batches, setting, tracer, run_callbacks)
            traced = pd.Series(tracer.seconds) * 1e3 / setting.steps
            measured = summary.loc[summary["way"] == way, "ms/step"].iloc[0]
            columns[f"{way}: share"] = traced / traced.sum()
            columns[f"{way}: ms/step"] = traced / traced.sum() * measured
            top = tracer.top_functions(setting.steps) if top is None else top
    breakdown = pd.DataFrame(columns).rename_axis("group").reset_index()
    return summary, breakdown, top


PAPER_DPN = "DPN paper (SMAC_301)"
MODELS = {PAPER_DPN: ["backbone.preset=paper"], "timm dpn68": ["backbone=timm", "backbone.name=dpn68"]}
SHOWCASE_MODELS = {
    "default DPN (3-0-1)": ["experiment=showcase"],
    "searched DPN (6-6-3)": ["experiment=showcase", "backbone.ops=[6,6,3]"],
    **{
        name: ["experiment=showcase", "backbone=timm", f"backbone.name={name}"]
        for name in load_space(REPOSITORY / "searchspaces" / "timm_zoo_small.yaml").configspace["architecture"].choices
    },
}


def training_flops_per_image(module: FaceRecognitionModule, batch: dict) -> float:
    """FLOPs of one training step per image: 3x the forward pass's (the backward pass of a convolution or matrix
    product computes the input's and the weights' gradients, each as costly as the forward), counted by
    ``torch.utils.flop_counter`` on two images of ``batch`` (2 FLOPs per multiply-add). The forward count only: in
    torch 2.14 the counter charges a grouped convolution's backward as if it were dense (measured: 34x the forward
    at 32 groups instead of 3x), and the DPNs are built of grouped convolutions."""
    images, labels = batch["image"][:2], batch["label"][:2]
    with torch.no_grad(), FlopCounterMode(display=False) as counter:
        module.head(module.embedder(images), labels)
    return 3 * counter.get_total_flops() / len(images)


@dataclass(frozen=True)
class Variant:
    """One way of training a model in the ``models``, ``compile`` and ``showcase`` parts."""

    name: str
    autocast: bool
    overrides: tuple[str, ...]
    compiled: bool = False
    autotuned: bool = False
    """cuDNN picks the fastest convolution algorithm for each shape (``torch.backends.cudnn.benchmark``)"""


def compare_models(setting: Setting, models: dict[str, list[str]], variants: list[Variant]) -> pd.DataFrame:
    """Training images/s per model and :class:`Variant`, the ratio to the model's first variant, the warm-up's
    seconds, and the model's training GFLOP per image (the same in every variant)."""
    batches = random_batches(setting, setting.warmup + setting.steps)
    rows = []
    for model, overrides in models.items():
        torch.manual_seed(0)
        flops = training_flops_per_image(build_module(overrides).to(setting.device).train(), batches[0])
        for variant in variants:
            torch.manual_seed(0)
            module = build_module([*overrides, *variant.overrides]).to(setting.device).train()
            embedder = torch.compile(module.embedder) if variant.compiled else module.embedder
            autotuned = torch.backends.cudnn.benchmark
            torch.backends.cudnn.benchmark = variant.autotuned
            try:
                times = train_steps(
                    embedder,
                    module.head,
                    module.loss,
                    module.optimizer_factory(params=module.parameters()),
                    batches,
                    setting,
                    autocast=variant.autocast,
                )
            finally:
                torch.backends.cudnn.benchmark = autotuned
            rows.append(
                {
                    "model": model,
                    "variant": variant.name,
                    "images/s": times.images_per_s,
                    "warm-up s": times.warmup_s,
                    "GFLOP/image": flops / 1e9,
                }
            )
    table = pd.DataFrame(rows)
    baseline = table[table["variant"] == variants[0].name].set_index("model")["images/s"]
    table[f"ratio to {variants[0].name}"] = table["images/s"] / table["model"].map(baseline)
    return table


def compile_payback(models: pd.DataFrame, batch_size: int) -> pd.DataFrame:
    """The ``compile`` part's answer from its two rows (eager, then compiled): the compiled model's speed-up, the
    seconds compiling added to the warm-up, and the training steps after which it has paid them back (infinite when
    the compiled steps are not faster)."""
    eager, compiled = models.iloc[0], models.iloc[1]
    extra = compiled["warm-up s"] - eager["warm-up s"]
    saved_per_step = batch_size / eager["images/s"] - batch_size / compiled["images/s"]
    steps = extra / saved_per_step if saved_per_step > 0 else float("inf")
    return pd.DataFrame(
        [
            {
                "model": eager["model"],
                "speed-up": compiled["images/s"] / eager["images/s"],
                "compile s": extra,
                "break-even steps": steps,
            }
        ]
    )


OPTIMIZER_MODELS = {
    "default DPN (train.py)": [],
    PAPER_DPN: ["backbone.preset=paper"],
    "timm resnet18": ["backbone=timm", "backbone.name=resnet18"],
}
OPTIMIZER_IMPLEMENTATIONS = {
    "for-loop": ("++optimizer.fused=false", "++optimizer.foreach=false"),
    "foreach": ("++optimizer.fused=false", "++optimizer.foreach=true"),
    "fused": ("++optimizer.fused=true", "++optimizer.foreach=false"),
}
"""The three implementations of a ``torch.optim`` update, as overrides of a training config's ``optimizer``."""


def compare_optimizer_steps(setting: Setting, optimizers: list[str], repeats: int = 5) -> pd.DataFrame:
    """ms per ``optimizer.step()`` alone (the best of ``repeats`` rounds of ``setting.steps`` steps, on random
    gradients) of each of ``optimizers`` (``conf/optimizer`` names) on each of :data:`OPTIMIZER_MODELS`' parameters,
    for-loop, foreach and fused, and each one's speed-up over the for-loop."""
    factories = {
        (optimizer, implementation): instantiate_partial(
            training_config([f"optimizer={optimizer}", *options]).optimizer, "optimizer"
        )
        for optimizer in optimizers
        for implementation, options in OPTIMIZER_IMPLEMENTATIONS.items()
    }
    rows = []
    for model, overrides in OPTIMIZER_MODELS.items():
        torch.manual_seed(0)
        parameters = list(build_module(overrides).to(setting.device).parameters())
        for parameter in parameters:
            parameter.grad = torch.randn_like(parameter)
        for (optimizer, implementation), factory in factories.items():
            step = factory(parameters).step
            step()  # the state (momentum buffers) is created in the first step
            seconds = []
            for _ in range(repeats):
                synchronize(setting.device)
                start = time.perf_counter()
                for _ in range(setting.steps):
                    step()
                synchronize(setting.device)
                seconds.append((time.perf_counter() - start) / setting.steps)
            rows.append(
                {"model": model, "optimizer": optimizer, "update": implementation, "ms/step": min(seconds) * 1e3}
            )
    table = pd.DataFrame(rows)
    loop = table[table["update"] == "for-loop"].set_index(["model", "optimizer"])["ms/step"]
    pairs = pd.MultiIndex.from_frame(table[["model", "optimizer"]])
    table["speed-up over for-loop"] = loop.reindex(pairs).to_numpy() / table["ms/step"].to_numpy()
    return table


NCHW, NHWC = ("channels_last=false",), ("channels_last=true",)


def model_variants(channels_last: bool, compile_model: bool) -> list[Variant]:
    """The ``models`` part's variants: fp32 and bf16 in NCHW; with ``channels_last`` also both in channels_last and
    bf16 channels_last with cuDNN autotuning; compiled when asked."""
    variants = [Variant("fp32", False, NCHW), Variant("bf16", True, NCHW)]
    if channels_last:
        variants += [Variant("fp32 channels_last", False, NHWC), Variant("bf16 channels_last", True, NHWC)]
        variants += [Variant("bf16 channels_last autotuned", True, NHWC, autotuned=True)]
    if compile_model:
        variants += [
            Variant("fp32 compile", False, NCHW, compiled=True),
            Variant("bf16 compile", True, NCHW, compiled=True),
        ]
    return variants


def header(device: str) -> str:
    name = torch.cuda.get_device_name(device) if device.startswith("cuda") else platform.processor() or "CPU"
    load = ", ".join(f"{value:.1f}" for value in os.getloadavg())
    return (
        f"torch {torch.__version__}, lightning {pl.__version__}, device {device} ({name}), "
        f"{torch.get_num_threads()} threads, load average {load}"
    )


def main(argv: list[str] | None = None) -> dict[str, pd.DataFrame]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cpu")
    parts_help = "comma-separated: loop, models, compile, overhead, profile, optimizer, showcase"
    parser.add_argument("--parts", default="loop,models", help=parts_help)
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--loop-image-size", type=int, default=64, help="image size of the loop comparison")
    parser.add_argument("--loop-bf16", action="store_true", help="the loop comparison under bf16 autocast")
    parser.add_argument("--model-image-size", type=int, default=112, help="image size of the model comparison")
    parser.add_argument("--steps", type=int, default=10, help="timed steps")
    parser.add_argument("--warmup", type=int, default=3, help="untimed steps first")
    parser.add_argument("--channels-last", action="store_true")
    parser.add_argument("--compile", action="store_true")
    parser.add_argument("--overhead-steps", type=int, default=300, help="timed steps of the overhead part")
    parser.add_argument("--overhead-repeats", type=int, default=5, help="repeats of the overhead part")
    parser.add_argument("--overhead-batch-size", type=int, default=4)
    parser.add_argument("--overhead-image-size", type=int, default=8)
    parser.add_argument("--output-dir", type=Path, help="also write each part's table as <part>.csv there")
    args = parser.parse_args(argv)
    parts = set(args.parts.split(","))
    print(header(args.device))
    tables = {}
    if "loop" in parts:
        setting = Setting(args.device, args.batch_size, args.loop_image_size, args.steps, args.warmup, args.loop_bf16)
        tables["loop"] = compare_loops(setting)
        precision = "bf16" if setting.bf16 else "fp32"
        print(
            f"\nLightning vs a bare loop (tiny DPN, CosFace, {setting.image_size} px, batch {setting.batch_size}, "
            f"{precision}; "
            f"goal >= {LOOP_GOAL}):\n{tables['loop'].to_string(index=False, float_format='{:.3f}'.format)}"
        )
    if "overhead" in parts:
        setting = Setting(args.device, args.overhead_batch_size, args.overhead_image_size, args.overhead_steps, 50)
        # one intra-op thread: a near-zero model gains nothing from two, and on shared cores their hand-offs cost
        # tens of milliseconds a step (measured: 67 ms/step bare with 2 threads under load, 0.56 ms with 1)
        overhead = with_threads(1, host_overhead, setting, args.overhead_repeats)
        tables["overhead"], tables["overhead_breakdown"], tables["overhead_functions"] = overhead
        print(
            f"\nHost overhead per step, near-zero model (flatten + linear, {setting.image_size} px, batch "
            f"{setting.batch_size}, 1 thread, {setting.steps} timed steps after {setting.warmup}, median of "
            f"{args.overhead_repeats} repeats; goal: Lightning at most {OVERHEAD_GOAL_MS} ms/step over bare):\n"
            f"{tables['overhead'].to_markdown(index=False, floatfmt='.3f')}\n\n"
            f"Lightning's host time by group (traced; ms/step = share x the way's untraced median):\n"
            f"{tables['overhead_breakdown'].to_markdown(index=False, floatfmt='.3f')}\n\n"
            f"The functions with the most traced time of their own outside the model's work (Lightning):\n"
            f"{tables['overhead_functions'].to_markdown(index=False, floatfmt='.3f')}"
        )
    if "profile" in parts:
        setting = Setting(args.device, args.batch_size, args.loop_image_size, args.steps, args.warmup, args.loop_bf16)
        summary, tables["profile"] = profile_lightning_steps(setting)
        tables["profile_summary"] = pd.DataFrame([summary])
        print(f"\nLightning steps under torch.profiler: {summary}\n{tables['profile'].head(15).to_string(index=False)}")
    if "models" in parts:
        setting = Setting(args.device, args.batch_size, args.model_image_size, args.steps, args.warmup)
        tables["models"] = compare_models(setting, MODELS, model_variants(args.channels_last, args.compile))
        print(
            f"\nTraining images/s at {setting.image_size} px, batch {setting.batch_size}:\n"
            f"{tables['models'].to_string(index=False, float_format='{:.3f}'.format)}"
        )
    if "compile" in parts:
        setting = Setting(args.device, args.batch_size, args.model_image_size, args.steps, args.warmup)
        variants = [Variant("bf16 channels_last", True, NHWC), Variant("bf16 channels_last compiled", True, NHWC, True)]
        paper = {name: overrides for name, overrides in MODELS.items() if name == PAPER_DPN}
        tables["compile"] = compare_models(setting, paper, variants)
        tables["compile_payback"] = compile_payback(tables["compile"], setting.batch_size)
        print(
            f"\nThe paper's DPN compiled, in the default GPU set-up (bf16, channels_last), {setting.image_size} px, "
            f"batch {setting.batch_size}:\n{tables['compile'].to_string(index=False, float_format='{:.3f}'.format)}\n"
            f"{tables['compile_payback'].to_string(index=False, float_format='{:.2f}'.format)}"
        )
    if "optimizer" in parts:
        setting = Setting(args.device, args.batch_size, args.model_image_size, args.steps, args.warmup)
        tables["optimizer"] = compare_optimizer_steps(setting, ["sgd", "adamw"])
        print(
            f"\nOne optimizer step alone, ms (best of 5 rounds of {setting.steps} steps):\n"
            f"{tables['optimizer'].to_string(index=False, float_format='{:.3f}'.format)}"
        )
    if "showcase" in parts:
        setting = Setting(args.device, args.batch_size, 32, args.steps, args.warmup)
        variants = [
            Variant("NCHW", False, (*NCHW, "optimizer.fused=false")),
            Variant("channels_last", False, (*NHWC, "optimizer.fused=false")),
            Variant("channels_last, fused AdamW", False, (*NHWC, "optimizer.fused=true")),
        ]
        tables["showcase"] = compare_models(setting, SHOWCASE_MODELS, variants)
        print(
            f"\nTraining images/s of the showcase's models at 32 px, batch {setting.batch_size}:\n"
            f"{tables['showcase'].to_string(index=False, float_format='{:.3f}'.format)}"
        )
    if args.output_dir is not None:
        args.output_dir.mkdir(parents=True, exist_ok=True)
        for part, table in tables.items():
            table.to_csv(args.output_dir / f"{part}.csv", index=False)
    return tables


if __name__ == "__main__":
    main()
