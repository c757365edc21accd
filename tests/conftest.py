"""Shared fixtures: the real Hydra config composed once per test, forced onto the CPU and a tiny data set; the
markers' rules (``extra``, ``gpu``) and the default suite's time limit per test."""

from __future__ import annotations

import csv
import importlib.util
import os
from collections import defaultdict
from pathlib import Path

import pytest
from filelock import FileLock

os.environ.setdefault("WANDB_MODE", "offline")
os.environ.setdefault("WANDB_SILENT", "true")
# The golden sets (tests/golden/) were recorded on an AVX2 machine, and the kernels torch, oneDNN and MKL choose for
# AVX-512 round floats differently (a one-thread tiny search's rank disparity, the smoke study's claims). So the suite
# caps their instruction set at AVX2, in this process and in the commands it starts, unless the environment sets one.
AVX2_ONLY = {"ATEN_CPU_CAPABILITY": "avx2", "ONEDNN_MAX_CPU_ISA": "AVX2", "MKL_ENABLE_INSTRUCTIONS": "AVX2"}
for variable, isa in AVX2_ONLY.items():
    os.environ.setdefault(variable, isa)

TINY_DATA = [
    "data.table.n_identities=24",
    "data.table.images_per_identity=6",
    "data.table.image_size=32",
    "data.transforms.resize=36",
    "data.batch_size=16",
    "data.eval_batch_size=64",
    "embedding_dim=64",
    "trainer.accelerator=cpu",
    "trainer.enable_progress_bar=false",
    "trainer.enable_model_summary=false",
    "trainer.max_epochs=1",
]


EXTRAS = {"botorch": "botorch", "moasha": "syne_tune", "slurm": "dask_jobqueue"}
"""Each optional extra of pyproject.toml that tests mark (``@pytest.mark.extra(name)``) and the module it brings."""

CALL_LIMIT_S = float(os.environ.get("FAIRNAS_TEST_CALL_LIMIT_S", "25"))
SETUP_LIMIT_S = float(os.environ.get("FAIRNAS_TEST_SETUP_LIMIT_S", "120"))
"""The default suite's limits: a test's own seconds, and a set-up's (a shared fixture's, charged to its first test).
A test that needs longer belongs in the ``integration`` set (CONTRIBUTING.md). The variables move them."""


def limits_fail(environment=os.environ) -> bool:
    """Whether a default-suite test over a limit fails (``FAIRNAS_TEST_LIMITS=fail``; the default where ``CI`` is set,
    as CI services set it) or is only reported at the end of the run (``FAIRNAS_TEST_LIMITS=report``; the default
    elsewhere): seconds depend on the machine and its load, so the README's test command never fails for being slow."""
    mode = environment.get("FAIRNAS_TEST_LIMITS", "")
    if mode not in ("", "fail", "report"):
        raise ValueError(f"FAIRNAS_TEST_LIMITS={mode!r}; allowed: fail, report")
    return mode == "fail" or (not mode and environment.get("CI", "").lower() in ("1", "true", "yes"))


OVER_LIMIT = "over the default suite's limit"
"""The key of a report's ``user_properties`` entry that says a test took longer than its limit."""


def pytest_configure(config):
    """Under pytest-xdist, each worker trains on one thread (two workers with two threads each would oversubscribe
    two cores), and so do the commands its tests start unless a test sets its own threads. A bad
    ``FAIRNAS_TEST_LIMITS`` stops the run before any test."""
    try:
        limits_fail()
    except ValueError as error:
        raise pytest.UsageError(str(error)) from None
    if os.environ.get("PYTEST_XDIST_WORKER"):
        import torch

        torch.set_num_threads(1)
        os.environ.setdefault("OMP_NUM_THREADS", "1")


def pytest_runtest_setup(item):
    """A test marked ``extra(name)`` skips, naming the install line, where that extra is not installed."""
    for mark in item.iter_markers("extra"):
        (name,) = mark.args
        if importlib.util.find_spec(EXTRAS[name]) is None:
            pytest.skip(f"needs the {name} extra: pip install -e '.[{name}]'")


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item, call):
    """A passing default-suite test whose set-up or call took longer than the suite's limit is reported at the end of
    the run, and fails where :func:`limits_fail`. Tests of an extra are not in the README's test command (its
    install has no extras): they run in CI's extras step."""
    report = yield
    limit = {"setup": SETUP_LIMIT_S, "call": CALL_LIMIT_S}.get(report.when)
    in_default = all(item.get_closest_marker(name) is None for name in ("integration", "slow", "gpu", "extra"))
    if limit is not None and report.passed and in_default and report.duration > limit:
        reason = (
            f"{report.when} took {report.duration:.1f} s, {OVER_LIMIT} of {limit:.0f} s: make it faster, share its "
            f"set-up, or mark it integration (CONTRIBUTING.md, 'Which marker')"
        )
        report.user_properties.append((OVER_LIMIT, reason))
        if limits_fail():
            report.outcome, report.longrepr = "failed", reason
    return report


OVER_LIMIT_REPORTS: list[str] = []


def pytest_runtest_logreport(report):
    """Collects, in the process that prints the summary (xdist's workers send their reports there), the tests over a
    limit that passed."""
    for key, reason in report.user_properties:
        if key == OVER_LIMIT and report.passed:
            OVER_LIMIT_REPORTS.append(f"{report.nodeid}: {reason}")


def pytest_terminal_summary(terminalreporter):
    """The passing tests over a limit, each on one line, after the run (FAIRNAS_TEST_LIMITS=fail fails them)."""
    if OVER_LIMIT_REPORTS:
        terminalreporter.section(f"{len(OVER_LIMIT_REPORTS)} test(s) {OVER_LIMIT} (reported, not failed)")
        for line in OVER_LIMIT_REPORTS:
            terminalreporter.line(line)


PROFILES = Path(__file__).resolve().parents[1] / "results" / "test_suite_profile"
"""The suite's last committed profiles (``bench/suite_profile.py``): each test's seconds, by its id."""


def recorded_seconds() -> dict[str, float]:
    """Each profiled test's seconds (set-up, call and tear-down) in the default and the integration profile."""
    seconds: dict[str, float] = {}
    for table in sorted(PROFILES.glob("*/tests.csv")):
        if table.parent.name != "before":
            with table.open(newline="") as rows:
                seconds.update({row["test"]: float(row["seconds"]) for row in csv.DictReader(rows)})
    return seconds


@pytest.hookimpl(trylast=True)  # after ``-m`` deselected: only the selected tests count
def pytest_collection_modifyitems(config, items):
    """Modules with the most profiled seconds come first (their tests in their order), so that under pytest-xdist
    (``--dist loadscope --no-loadscope-reorder``) no long module starts last while the other workers idle: a
    longest-first schedule. A test the profiles do not hold counts 0 s. ``gpu`` tests skip, with their reason, on
    machines without a CUDA device."""
    items[:] = longest_modules_first(items, recorded_seconds())
    skip_gpu_tests_without_cuda(items)


def longest_modules_first(items: list, seconds: dict[str, float]) -> list:
    """``items`` (anything with a pytest ``nodeid``) ordered by their module's summed ``seconds``, longest first;
    a module's own order and, among equal modules, the collection order are kept."""
    by_module: dict[str, float] = defaultdict(float)
    for item in items:
        by_module[item.nodeid.split("::")[0]] += seconds.get(item.nodeid, 0.0)
    return sorted(items, key=lambda item: -by_module[item.nodeid.split("::")[0]])


def skip_gpu_tests_without_cuda(items) -> None:
    import torch

    if torch.cuda.is_available():
        return
    skip = pytest.mark.skip(reason="needs a CUDA device (marker gpu)")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


def shared_folder(tmp_path_factory, name: str):
    """A folder every pytest-xdist worker of this run sees (the workers' common base), or this session's own."""
    base = tmp_path_factory.getbasetemp()
    folder = (base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base) / name
    folder.mkdir(exist_ok=True)
    return folder


def built_once(tmp_path_factory, name: str, build) -> Path:
    """``<shared folder>/<name>/``, made by ``build(folder)`` in the first worker that asks; the others wait for it
    (a file lock), then read it."""
    shared = shared_folder(tmp_path_factory, name)
    folder = shared / name
    with FileLock(shared / "lock"):
        if not (shared / "built").is_file():
            folder.mkdir(exist_ok=True)
            build(folder)
            (shared / "built").touch()
    return folder


@pytest.fixture(scope="session")
def cache_dir(tmp_path_factory):
    """One synthetic-face cache for the whole run, so each tiny data set renders once (rendering publishes a data
    set atomically, so workers may share it)."""
    return shared_folder(tmp_path_factory, "fairnas_cache")


@pytest.fixture
def tiny_config(tmp_path, cache_dir):
    """``tiny_config(*overrides)`` -> the composed training config on tiny synthetic data, logging to CSV."""
    from fairnas.config import compose_config

    def make(*overrides: str, output_dir=None):
        return compose_config(
            "train",
            [*TINY_DATA, f"paths.cache_dir={cache_dir}", "logger=csv", *overrides],
            output_dir=output_dir or tmp_path / "run",
        )

    return make


@pytest.fixture(scope="session")
def trained_run(tmp_path_factory, cache_dir):
    """One tiny DPN trained for one epoch on the tiny synthetic set, shared read-only by every test (and worker) that
    needs a finished run: its run folder (``checkpoints/last.ckpt``, ``metrics.json``, ...)."""
    from fairnas.config import compose_config
    from fairnas.training.run import train

    overrides = [*TINY_DATA, f"paths.cache_dir={cache_dir}", "logger=none"]
    return built_once(tmp_path_factory, "run", lambda run: train(compose_config("train", overrides, output_dir=run)))


@pytest.fixture(scope="session")
def tabular(tmp_path_factory):
    """``bench.comparison.table_builder`` and a tiny table built with it (6 configurations x 2 seeds x 2 epochs, the
    space of ``tests/test_bench_tabular.py``), built once for every bench test (and worker)."""
    from bench.comparison import table_builder as module
    from fairnas.training.run import train
    from tests.test_bench_tabular import build_tiny

    cache = shared_folder(tmp_path_factory, "tiny_table_cache")
    return module, built_once(tmp_path_factory, "tiny_table", lambda folder: build_tiny(module, folder, train, cache))
