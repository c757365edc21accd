"""The host work of a training step that ``bench/training_speed.py --parts overhead`` measures, counted: reads back
from the device, values logged and hooks called per step, for Lightning steps of the real module on the CPU."""

from __future__ import annotations

import collections
import math

import pytest
import pytorch_lightning as pl
import torch
from pytorch_lightning.loggers import Logger
from pytorch_lightning.profilers import PassThroughProfiler

from bench.training_speed import EveryStepLogging, with_same_weights
from fairnas.models import CosFaceHead
from fairnas.training import module as training_module
from fairnas.training.module import FaceRecognitionModule
from fairnas.training.profiler import NoProfiler, trainer_profiler
from fairnas.training.settings import check_training_settings

STEPS = 20
LOG_EVERY = 5
TERMS = 1  # classification: the only loss term of a CosFace head without regularisers
HOOKS_PER_STEP = 24
"""Hook calls Lightning 2.6 makes per automatic-optimisation step of this module with one callback (counted through
the trainer's profiler; the once-a-fit hooks left out): measured 24. A new per-step hook of fairnas (or a Lightning
upgrade) raises it: each costs several microseconds of host time a step (``python bench/training_speed.py --parts
overhead``); restate the number here when one is meant."""

OPERATORS_OVER_BARE = 20.5
"""ATen operators a Lightning step of this module calls beyond the bare loop's, on average over STEPS steps with a
logging step every LOG_EVERY and a finite check every 5 (:func:`operator_calls`; on a GPU each is a kernel launch or
a view): measured 20.5 (Lightning 2.6). Most are Lightning's: ``to`` for each batch tensor (6.3 a step), ``detach``
of the loss and of the logged values it keeps (5.4), the closure's division and copy of the loss (2 ``div``, 2
``clone``). fairnas's step adds its finite flag (``isfinite``, ``&``: 1.8); ``sum`` of the loss terms (``0 + loss``)
and a ``detach`` before ``isfinite`` were two more until 2026-11-29. A new per-step operator raises it; restate
the number when one is meant."""


def tiny_module() -> FaceRecognitionModule:
    torch.manual_seed(0)
    return FaceRecognitionModule(
        embedder=torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(3 * 4 * 4, 8)),
        head=CosFaceHead(embedding_dim=8, num_classes=10),
        loss=torch.nn.CrossEntropyLoss(),
        optimizer=lambda params: torch.optim.SGD(params, lr=0.1, momentum=0.9),
        scheduler=None,
        group_order=["g0", "g1"],
    )


def batches(n: int = STEPS) -> list[dict]:
    generator = torch.Generator().manual_seed(0)
    return [
        {
            "image": torch.randn(4, 3, 4, 4, generator=generator),
            "label": torch.randint(10, (4,), generator=generator),
            "group": torch.zeros(4, dtype=torch.long),
            "index": torch.arange(4),
        }
        for _ in range(n)
    ]


class HookCounter(PassThroughProfiler):
    """Counts the actions Lightning profiles: one per hook it calls on a callback, the module or the strategy."""

    def __init__(self):
        super().__init__()
        self.actions: collections.Counter = collections.Counter()
        self.counting = False

    def start(self, action_name: str) -> None:
        if self.counting:
            self.actions[action_name] += 1


def operator_calls(profiler: torch.profiler.profile) -> collections.Counter:
    """The ATen operators called from outside another operator (from Python: on a GPU, each launches its kernels or
    is a view) in a profiler's window, by name."""
    return collections.Counter(
        event.name
        for event in profiler.events()
        if event.name.startswith("aten::") and not (event.cpu_parent and event.cpu_parent.name.startswith("aten::"))
    )


def bare_loop_operator_calls(module: FaceRecognitionModule, data: list[dict]) -> collections.Counter:
    """:func:`operator_calls` of the bare loop (forward, loss, zero_grad, backward, step) over ``data``."""
    optimizer = module.optimizer_factory(module.parameters())
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as profiler:
        for batch in data:
            output = module.head(module.embedder(batch["image"]), batch["label"])
            loss = module.loss(output.logits, batch["label"])
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            optimizer.step()
    return operator_calls(profiler)


class StepWindow(pl.Callback):
    """The device-to-host reads (``aten::_local_scalar_dense``: ``.item()``, ``bool(tensor)``, ``.tolist()``) and the
    operators called (:func:`operator_calls`) from the first training step to the end of training, its epoch-end
    check included, and the hooks called meanwhile."""

    def __init__(self, hooks: HookCounter):
        self.hooks, self.reads, self.operators = hooks, None, None
        self.profiler = torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU])

    def on_train_start(self, trainer, pl_module):
        self.profiler.__enter__()
        self.hooks.counting = True

    def on_train_end(self, trainer, pl_module):
        self.hooks.counting = False
        self.profiler.__exit__(None, None, None)
        self.operators = operator_calls(self.profiler)
        self.reads = sum(event.name == "aten::_local_scalar_dense" for event in self.profiler.events())


class Recorder(Logger):
    """What the loggers receive: (step, metrics) per call."""

    def __init__(self):
        super().__init__()
        self.calls: list[tuple[int | None, dict]] = []

    name, version = "recorder", 0  # type: ignore[assignment]

    def log_metrics(self, metrics, step=None):
        self.calls.append((step, dict(metrics)))

    def log_hyperparams(self, params, *args, **kwargs):
        pass


def fit(module: FaceRecognitionModule, callbacks: list, **options) -> pl.Trainer:
    trainer = pl.Trainer(
        accelerator="cpu",
        max_steps=STEPS,
        log_every_n_steps=LOG_EVERY,
        limit_val_batches=0,
        num_sanity_val_steps=0,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        callbacks=callbacks,
        **options,
    )
    trainer.fit(module, train_dataloaders=torch.utils.data.DataLoader(batches(), batch_size=None))
    return trainer


@pytest.fixture(scope="module")
def counted(tmp_path_factory):
    """One fit of STEPS steps with every count: reads, self.log calls, hooks, what the logger got, operators."""
    logged: collections.Counter = collections.Counter()
    log = FaceRecognitionModule.log

    def counting_log(self, name, *args, **kwargs):  # log_dict calls it once per key
        logged[name] += 1
        return log(self, name, *args, **kwargs)

    hooks, recorder = HookCounter(), Recorder()
    window = StepWindow(hooks)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(training_module, "FINITE_CHECK_EVERY", 5)
        patch.setattr(FaceRecognitionModule, "log", counting_log)
        fit(tiny_module(), [window], logger=recorder, profiler=hooks, default_root_dir=tmp_path_factory.mktemp("fit"))
    return window.reads, logged, hooks.actions, recorder, window.operators


@pytest.mark.filterwarnings("ignore")
def test_a_training_step_reads_back_only_the_periodic_finite_check(counted):
    reads, *_ = counted
    # one read of the finite flag every FINITE_CHECK_EVERY (here 5) steps (and one at the epoch's end when steps are
    # left unchecked), and Lightning's conversion of each logged value to a float in the steps it hands to the
    # loggers; a .item() or bool(tensor) added to the training step or a per-step hook adds STEPS more
    allowed = STEPS // 5 + 1 + math.ceil(STEPS / LOG_EVERY) * (1 + TERMS)
    assert reads <= allowed, f"{reads} device-to-host reads in {STEPS} steps (allowed: {allowed})"


def test_a_training_step_calls_a_stated_number_of_operators_beyond_the_bare_loops(counted):
    *_, operators = counted
    extra = (sum(operators.values()) - sum(bare_loop_operator_calls(tiny_module(), batches()).values())) / STEPS
    assert extra <= OPERATORS_OVER_BARE, f"{extra} more operators per step than the bare loop: {dict(operators)}"


@pytest.mark.filterwarnings("ignore")
def test_a_training_step_logs_only_in_the_steps_the_loggers_get_and_calls_a_stated_number_of_hooks(counted):
    _, logged, hooks, recorder, _ = counted
    logging_steps = math.ceil(STEPS / LOG_EVERY)
    assert dict(logged) == {"train/loss": logging_steps, "train/classification": logging_steps}
    assert sum(logged.values()) <= logging_steps * (1 + TERMS)
    per_step = sum(count for count in hooks.values() if count >= STEPS) / STEPS  # once-a-fit hooks left out
    assert per_step <= HOOKS_PER_STEP, f"{per_step} hook calls per step: {dict(hooks)}"
    assert [step for step, _ in recorder.calls] == [4, 9, 14, 19]


class StopAt(pl.Callback):
    """Stops training after global step ``step`` (as e.g. Lightning's ``Timer`` does, in ``on_train_batch_end``)."""

    def __init__(self, step: int | None):
        self.step = step

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx):
        if trainer.global_step == self.step:
            trainer.should_stop = True


@pytest.mark.filterwarnings("ignore")
@pytest.mark.parametrize("stop", [None, 7], ids=["all steps", "stopped after a step not logged"])
def test_the_loggers_get_the_same_losses_as_when_every_step_was_logged(tmp_path, stop):
    module = tiny_module()
    before = with_same_weights(module, EveryStepLogging)
    now, then = Recorder(), Recorder()
    fit(module, [StopAt(stop)], logger=now, default_root_dir=tmp_path / "now")
    fit(before, [StopAt(stop)], logger=then, default_root_dir=tmp_path / "then")
    assert now.calls == then.calls
    assert [step for step, _ in now.calls] == ([4, 9, 14, 19] if stop is None else [4, 6])
    assert {"train/loss", "train/classification"} <= set(now.calls[0][1])
    for a, b in zip(module.parameters(), before.parameters(), strict=True):
        assert torch.equal(a, b)  # the same training, to the bit


class ProfilerProbe(pl.Callback):
    """Keeps the profiler of the trainer that fits the module (``+callbacks.probe._target_=...`` adds it)."""

    seen: list = []

    def on_fit_start(self, trainer, pl_module):
        ProfilerProbe.seen.append(trainer.profiler)


@pytest.mark.filterwarnings("ignore")
def test_train_py_profiles_nothing_and_builds_no_context_manager_per_hook(tiny_config, tmp_path):
    from fairnas.training.run import train

    ProfilerProbe.seen.clear()
    probe = f"+callbacks.probe._target_={ProfilerProbe.__module__}.ProfilerProbe"
    train(tiny_config("logger=none", "trainer.max_epochs=1", "eval.test=false", probe))
    (profiler,) = ProfilerProbe.seen
    assert isinstance(profiler, NoProfiler)
    # the same no-op context manager for every hook: Lightning's own pass-through profiler builds one per hook call
    assert profiler.profile("[LightningModule]x.training_step") is profiler.profile("[Callback]y.on_train_batch_end")
    assert trainer_profiler("simple") == "simple"  # trainer.profiler=simple: Lightning's SimpleProfiler


def test_a_profiler_lightning_does_not_name_is_refused_in_one_line(tiny_config):
    with pytest.raises(ValueError) as refused:
        check_training_settings(tiny_config("trainer.profiler=fast"))
    assert str(refused.value) == (
        "trainer.profiler='fast' must be null (none) or one of ['simple', 'advanced', 'pytorch', 'xla']"
    )
