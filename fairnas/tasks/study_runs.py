"""A study's training runs: each one a ``train`` run in its own folder, dispatched through the search's pool.

Every run of a study is independent of the others of its stage, so a stage hands all of them to a pool at once
(:func:`fairnas.search.parallel.open_pool`: in this process, a local Dask cluster of ``study.n_workers``, or an
existing Dask scheduler) and collects them as they finish. A run is identified by its folder,
``runs/<data>/<model>/<mitigation>/seed<k>``: two stages that need the same run (the default model's noise seeds and
its final-comparison seeds) share it, and a finished run is read back instead of trained
(:func:`fairnas.tasks.compare.train_once`, which also refuses a folder holding a run with other overrides). A run that
fails, or whose worker dies, is recorded as crashed with its message; the claims it feeds leave it out and say so.
A mitigation that changes nothing in a model's training (:func:`changes_training`) is not trained at all: its rows
say *not applicable* and why.
"""

from __future__ import annotations

import dataclasses
import logging
import time
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path

import pandas as pd
from omegaconf import OmegaConf

from fairnas.config import compose_config
from fairnas.metrics import IDENTIFICATION_METRICS
from fairnas.search.parallel import TrialPool
from fairnas.search.trial import is_out_of_space
from fairnas.study.claims import NOT_APPLICABLE
from fairnas.tasks.compare import path_name, train_once

log = logging.getLogger(__name__)
RUNS_DIR = "runs"
SPLITS = ("val", "test")
REPORTED = (*IDENTIFICATION_METRICS, "robustness_bias")
UNSET_DATA_INFO = {"n_groups": 0, "num_classes": 0, "group_order": []}
"""Stands in for ``data_info`` (set when a run reads its data) where configs are compared before any run starts:
a mitigation that interpolates it (SensitiveNets' ``${data_info.n_groups}``) resolves."""


@dataclasses.dataclass(frozen=True)
class RunSpec:
    """One training run of a study: a model (name, kind, its overrides), on the main or the transfer data, with a
    seed; ``mitigation`` names the treatment (``none``, a conf/mitigation/ name, AdvERM's arms) and ``extra`` holds
    its overrides (e.g. ``mitigation=flipped`` and the baseline run it reads)."""

    model: str
    kind: str
    overrides: tuple[str, ...]
    seed: int
    mitigation: str = "none"
    data: str = "main"
    extra: tuple[str, ...] = ()

    @property
    def folder(self) -> Path:
        return Path(RUNS_DIR) / self.data / path_name(self.model) / self.mitigation / f"seed{self.seed}"

    def training_overrides(self, base: Sequence[str], transfer: Sequence[str]) -> list[str]:
        """The run's overrides: the study's, the transfer data's (on ``data=transfer``), the model's, the stage's
        (a mitigation and its inputs, AdvERM's regulariser), then the seed."""
        data = list(transfer) if self.data == "transfer" else []
        return [*base, *data, *self.overrides, *self.extra, f"seed={self.seed}"]


def changes_training(baseline: Sequence[str], mitigated: Sequence[str]) -> bool:
    """Whether the overrides ``mitigated`` train anything else than ``baseline``'s: False when their composed configs
    agree outside the ``mitigation`` node and that node builds nothing (no ``_target_``: no margin policy, embedder
    wrapper or regulariser), e.g. Balanced (``data.group_sampling.alpha=1``) on a model whose own overrides set the
    group sampling, which win over a config group's values."""

    def resolved(overrides: Sequence[str]) -> dict:
        config = compose_config("train", list(overrides), output_dir=".")
        config.data_info = UNSET_DATA_INFO  # what the data decides when a run starts; the same for both
        return OmegaConf.to_container(config, resolve=True)

    before, after = resolved(baseline), resolved(mitigated)
    treatment = after.pop("mitigation", None) or {}
    before.pop("mitigation", None)
    return before != after or _builds(treatment)


def _builds(node: object) -> bool:
    """Whether a resolved config node instantiates anything (a ``_target_`` at any depth)."""
    if isinstance(node, dict):
        return "_target_" in node or any(_builds(value) for value in node.values())
    return isinstance(node, list) and any(_builds(value) for value in node)


def not_applicable(specs: Iterable[RunSpec], stage: str, reason: str) -> pd.DataFrame:
    """The rows of runs a stage does not train because their mitigation changes nothing (``reason`` says why)."""
    return pd.DataFrame([_row(spec, {"error": reason}, stage) | {"status": NOT_APPLICABLE} for spec in specs])


def train_run(run_dir: Path, overrides: list[str]) -> dict:
    """Train (or read back) one run; its metrics, or ``{"error": message}`` when it fails (what runs on a worker)."""
    try:
        return train_once(run_dir, overrides)
    except Exception as error:  # any failure of one run, out-of-memory included: recorded, the study goes on
        if is_out_of_space(error):  # the machine's fault: the study stops and the run is retried on resume
            raise
        return {"error": f"{type(error).__name__}: {str(error).splitlines()[0] if str(error) else ''}"}


def run_all(
    specs: Iterable[RunSpec],
    *,
    output_dir: Path,
    overrides: Callable[[RunSpec], list[str]],
    pool: Callable[[], TrialPool],
    stage: str,
) -> pd.DataFrame:
    """Every spec's run (each folder once), through ``pool()`` (asked for only when a run is left to train): one row
    per spec with ``stage``, its fields, ``status``, ``error_message`` and ``<split>/<metric>``."""
    specs = list(dict.fromkeys(specs))
    results: dict[Path, dict] = {}
    pending = []
    for spec in specs:
        if spec.folder in results:
            continue
        finished = _finished(output_dir / spec.folder, overrides(spec))
        if finished is not None:
            results[spec.folder] = finished
        else:
            results[spec.folder] = {}
            pending.append(spec)
    if pending:
        workers, queue = pool(), list(pending)
        log.info("study %s: %d runs to train (%d read back)", stage, len(pending), len(specs) - len(pending))
        started: dict[Path, float] = {}
        while queue or len(workers):
            while queue and len(workers) < workers.capacity:
                spec = queue.pop(0)
                started[spec.folder] = time.perf_counter()
                workers.submit(spec.folder, train_run, output_dir / spec.folder, overrides(spec))
            folder, metrics, error = workers.next_finished()
            if error is not None and is_out_of_space(error):
                raise error
            if error is not None:  # the worker itself died
                metrics = {"error": f"{type(error).__name__}: {error}".splitlines()[0]}
            results[folder] = metrics
            status = f"crashed ({metrics['error']})" if "error" in metrics else "done"
            log.info("study %s: %s %s in %.0f s", stage, folder, status, time.perf_counter() - started[folder])
    return pd.DataFrame([_row(spec, results[spec.folder], stage) for spec in specs])


def _finished(run_dir: Path, overrides: list[str]) -> dict | None:
    """A finished run's metrics, read back (None when it is not finished)."""
    if not (run_dir / "metrics.json").is_file():
        return None
    return train_run(run_dir, overrides)  # reads it back, after checking it ran with these overrides


def _row(spec: RunSpec, metrics: dict, stage: str) -> dict:
    row = {
        "stage": stage,
        "model": spec.model,
        "kind": spec.kind,
        "mitigation": spec.mitigation,
        "data": spec.data,
        "seed": spec.seed,
        "status": "crashed" if "error" in metrics else "success",
        "error_message": metrics.get("error", ""),
        "run_dir": str(spec.folder),
    }
    for split in SPLITS:
        values = metrics.get(split) or {}
        row |= {f"{split}/{name}": float(values[name]) for name in REPORTED if name in values}
    return row
