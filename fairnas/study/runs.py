"""A study's training runs as data: what each one trains (:class:`RunSpec`), the name of a searched model
(:func:`searched_name`), its row of ``runs.csv``, and the mitigations that change nothing in a model's training and
so are not trained (:func:`changes_training`).

A run is identified by its folder, ``runs/<data>/<model>/<mitigation>/seed<k>``: two stages that need the same run
(the default model's noise seeds and its final-comparison seeds) share it.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import cast

import pandas as pd
from omegaconf import OmegaConf

from fairnas.config import compose_config
from fairnas.metrics import IDENTIFICATION_METRICS
from fairnas.mitigations.grid import run_folder
from fairnas.search import SearchSpace
from fairnas.study.claims import NOT_APPLICABLE

RUNS_DIR = "runs"
SPLITS = ("val", "test")
REPORTED = (*IDENTIFICATION_METRICS, "robustness_bias")
UNSET_DATA_INFO = {"n_groups": 0, "num_classes": 0, "group_order": []}
"""Stands in for ``data_info`` (set when a run reads its data) where configs are compared before any run starts:
a mitigation that interpolates it (SensitiveNets' ``${data_info.n_groups}``) resolves."""


@dataclasses.dataclass(frozen=True)
class RunSpec:
    """One training run of a study: a model (name, kind, its overrides), on the main or another data set (``data``
    names it, ``data_overrides`` select it, e.g. the transfer stage's), with a seed; ``mitigation`` names the
    treatment (``none``, a conf/mitigation/ name, AdvERM's arms) and ``extra`` holds its overrides (e.g.
    ``mitigation=flipped`` and the baseline run it reads)."""

    model: str
    kind: str
    overrides: tuple[str, ...]
    seed: int
    mitigation: str = "none"
    data: str = "main"
    extra: tuple[str, ...] = ()
    data_overrides: tuple[str, ...] = ()

    @property
    def folder(self) -> Path:
        return Path(RUNS_DIR) / self.data / run_folder(self.model, self.mitigation, self.seed)

    def training_overrides(self, base: Sequence[str]) -> list[str]:
        """The run's overrides: the study's (``base``), its data set's, the model's, the stage's (a mitigation and
        its inputs, AdvERM's regulariser), then the seed."""
        return [*base, *self.data_overrides, *self.overrides, *self.extra, f"seed={self.seed}"]


def searched_name(config: dict, space: SearchSpace) -> str:
    """The name a study gives a searched configuration of ``space``: its values, less the space's constants."""
    constants = {name for name, hp in space.configspace.items() if hasattr(hp, "value")}
    return "searched " + " ".join(f"{key}={value}" for key, value in config.items() if key not in constants)


def changes_training(baseline: Sequence[str], mitigated: Sequence[str]) -> bool:
    """Whether the overrides ``mitigated`` train anything else than ``baseline``'s: False when their composed configs
    agree outside the ``mitigation`` node and that node builds nothing (no ``_target_``: no margin policy, embedder
    wrapper or regulariser), e.g. Balanced (``data.group_sampling.alpha=1``) on a model whose own overrides set the
    group sampling, which win over a config group's values."""

    def resolved(overrides: Sequence[str]) -> dict:
        config = compose_config("train", list(overrides), output_dir=".")
        config.data_info = UNSET_DATA_INFO  # what the data decides when a run starts; the same for both
        return cast(dict, OmegaConf.to_container(config, resolve=True))

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
    return pd.DataFrame([run_row(spec, {"error": reason}, stage) | {"status": NOT_APPLICABLE} for spec in specs])


def run_row(spec: RunSpec, metrics: dict, stage: str) -> dict:
    """A run's row of ``runs.csv``: ``stage``, the spec's fields, ``status``, ``error_message`` and
    ``<split>/<metric>`` from its ``metrics`` (``{"error": message}`` when it crashed)."""
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
