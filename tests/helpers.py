"""Small modules the tests plug into the real training code, and the headless browser the page tests use."""

import os
import re
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import pytorch_lightning as pl
import torch
from torch import nn

GOLDEN = Path(__file__).resolve().parent / "golden"


def cpu_vendor() -> str:
    """The CPU's vendor as Linux names it (``GenuineIntel``, ``AuthenticAMD``), or ``unknown``."""
    cpuinfo = Path("/proc/cpuinfo")
    found = re.search(r"^vendor_id\s*:\s*(\S+)", cpuinfo.read_text(), re.M) if cpuinfo.is_file() else None
    return found.group(1) if found else "unknown"


def recorded_vendors(name: str) -> list[str]:
    """The CPU vendors ``tests/golden/<name>`` has a variant of (``<stem>.<vendor><suffix>``), sorted."""
    path = GOLDEN / name
    pattern = re.compile(rf"{re.escape(path.stem)}\.([^.]+){re.escape(path.suffix)}")
    found = (pattern.fullmatch(each.name) for each in GOLDEN.glob(f"{path.stem}.*{path.suffix}"))
    return sorted(match.group(1) for match in found if match)


def golden_path(name: str) -> Path:
    """``tests/golden/<name>``, or its variant for this CPU's vendor (``<stem>.<vendor><suffix>``) where one was
    recorded: a set whose float kernels round differently on another vendor's CPUs keeps one file per vendor. A set
    kept per vendor only (variants, no ``<name>``) gives this vendor's variant even where it is not recorded yet."""
    path = GOLDEN / name
    variant = path.with_name(f"{path.stem}.{cpu_vendor()}{path.suffix}")
    if variant.is_file() or (not path.is_file() and recorded_vendors(name)):
        return variant
    return path


def assert_matches_golden(frame: pd.DataFrame, name: str) -> None:
    """``frame`` as CSV, character for character (floats to their last digit), against ``tests/golden/<name>`` (or
    this CPU vendor's variant of it): outputs recorded before a refactor, which must not change them.
    ``FAIRNAS_RECORD_GOLDEN=1`` rewrites the file instead (record only from a commit whose outputs are known good).
    A set recorded per vendor, on other vendors' CPUs only, skips with the vendors it was recorded on; a set not
    recorded at all fails."""
    text = frame.to_csv(index=False, lineterminator="\n")
    path = golden_path(name)
    if os.environ.get("FAIRNAS_RECORD_GOLDEN") == "1":
        path.parent.mkdir(exist_ok=True)
        path.write_text(text)
        return
    if not path.is_file() and recorded_vendors(name):
        pytest.skip(
            f"{name} is recorded per CPU vendor, on {', '.join(recorded_vendors(name))} only, not {cpu_vendor()}: "
            f"record this one with FAIRNAS_RECORD_GOLDEN=1 (writes tests/golden/{path.name})"
        )
    assert path.is_file(), f"no golden file {path}: record it with FAIRNAS_RECORD_GOLDEN=1"
    if text != path.read_text():
        expected = pd.read_csv(path)
        changed = [column for column in expected if column not in frame or not frame[column].equals(expected[column])]
        pytest.fail(f"{name} differs from the golden set in {changed or 'its rows or columns'}")


class EmbeddingNormPenalty(nn.Module):
    """A regulariser with the interface of ``fairnas.regularizers``: mean squared embedding norm."""

    def __init__(self, weight: float):
        super().__init__()
        self.weight = weight

    def forward(self, *, batch, embeddings, logits, module) -> torch.Tensor:
        return embeddings.pow(2).sum(dim=1).mean()


def from_config(group: str, option: str, **overrides):
    """The object the project's ``conf/<group>/<option>.yaml`` builds (a partial for ``_partial_`` configs)."""
    from hydra.utils import instantiate
    from omegaconf import OmegaConf

    from fairnas.config import CONFIG_DIR

    return instantiate(OmegaConf.load(CONFIG_DIR / group / f"{option}.yaml"), **overrides)


HEAD_NAMES = ("arcface", "cosface", "magface")


def make_head(name: str, embedding_dim: int, num_classes: int, **options):
    """The margin head of ``conf/head/<name>.yaml`` with ``options`` replacing its settings."""
    return from_config("head", name, **options)(embedding_dim=embedding_dim, num_classes=num_classes)


class NonFiniteWeightsAtLastStep(pl.Callback):
    """A Lightning callback that turns every weight to NaN after the optimiser step of a run's last training batch
    when the model's head class is ``head``: the divergence the loss check (before the step) cannot see."""

    def __init__(self, head: str):
        self.head = head

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx):
        last = trainer.current_epoch + 1 == trainer.max_epochs and batch_idx + 1 == trainer.num_training_batches
        if last and type(pl_module.head).__name__ == self.head:
            with torch.no_grad():
                for parameter in pl_module.parameters():
                    parameter.fill_(float("nan"))


class RecordTrainingLabels(pl.Callback):
    """Writes ``epoch,index,label`` of every training image as the training step used it to ``path`` (CSV)."""

    def __init__(self, path: str):
        self.path, self.rows = path, []

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx):
        pairs = zip(batch["index"], batch["label"], strict=True)
        self.rows += [(trainer.current_epoch, int(i), int(label)) for i, label in pairs]

    def on_train_end(self, trainer, pl_module):
        with open(self.path, "w") as file:
            file.write("epoch,index,label\n" + "".join(f"{e},{i},{label}\n" for e, i, label in self.rows))


CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")


def needs_chromium(test):
    """A test that opens a page in headless Chromium: in the integration set, skipped where Chromium is missing."""
    skip = pytest.mark.skipif(CHROMIUM is None, reason="headless Chromium is not installed (Debian package chromium)")
    return pytest.mark.integration(skip(test))


def chromium(folder: Path, *arguments: str) -> subprocess.CompletedProcess:
    """Headless Chromium with ``arguments``, offline, its profile under ``folder``, a 1000x1400 window."""
    return subprocess.run(
        [
            CHROMIUM,
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--no-first-run",
            f"--user-data-dir={folder / 'profile'}",
            "--window-size=1000,1400",
            *arguments,
        ],
        check=True,
        capture_output=True,
        timeout=120,
    )


def screenshot(url: str, folder: Path) -> np.ndarray:
    """The page at ``url`` as Chromium draws it: an RGB integer array."""
    from PIL import Image

    shot = folder / "shot.png"
    chromium(folder, f"--screenshot={shot}", url)
    return np.asarray(Image.open(shot).convert("RGB")).astype(int)


def page_overflows(page, folder, extra: str = "") -> tuple[bool, str]:
    """Whether Chromium needs a horizontal scroll bar for ``page`` (plus ``extra`` HTML), and the DOM it built. The
    measuring script goes into a copy: the report itself has none."""
    probe = folder / "probe.html"
    script = (
        "<script>document.body.dataset.overflow = String("
        "document.documentElement.scrollWidth > document.documentElement.clientWidth);</script>"
    )
    probe.write_text(page.read_text().replace("</body>", f"{extra}{script}</body>"))
    dom = chromium(folder, "--dump-dom", probe.as_uri()).stdout.decode()
    assert re.search(r'data-overflow="(true|false)"', dom), "the probe did not run"
    return 'data-overflow="true"' in dom, dom
