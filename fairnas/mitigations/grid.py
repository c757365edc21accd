"""The model x mitigation x seed grid that ``compare.py`` and the study's mitigation stage train (Tables 4.4/4.6).

A mitigation is a config choice (``mitigation=<name>`` and its own overrides); one that starts from the unmitigated
baseline run of the same model and seed declares which of its files it reads (:data:`BASELINE_INPUTS`). Every cell
trains in ``<model>/<mitigation>/seed<k>`` under the command's runs folder.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Mapping, Sequence
from pathlib import Path

BASELINE = "none"
BASELINE_INPUTS = {"reference_metrics": "metrics.json", "checkpoint": "checkpoints/last.ckpt"}
"""Keys a mitigation config may declare to receive the baseline run of the same model and seed."""


@dataclasses.dataclass(frozen=True)
class Mitigation:
    """A mitigation as its composed config declares it: column ``title``, training ``overrides`` and the keys of
    :data:`BASELINE_INPUTS` it reads from its baseline run."""

    name: str
    title: str
    overrides: tuple[str, ...]
    inputs: tuple[str, ...] = ()

    @classmethod
    def declared(cls, name: str, overrides: Sequence[str], node: Mapping) -> Mitigation:
        """``mitigation=<name>`` with its own ``overrides``, whose composed ``mitigation`` node is ``node``."""
        inputs = () if name == BASELINE else tuple(key for key in BASELINE_INPUTS if key in node)
        return cls(name, node.get("title", name), choice(name, overrides), inputs)

    def baseline_overrides(self, baseline_dir: Path) -> list[str]:
        """The overrides that hand this mitigation its inputs from the baseline run in ``baseline_dir``."""
        return [f"mitigation.{key}='{baseline_dir / BASELINE_INPUTS[key]}'" for key in self.inputs]


@dataclasses.dataclass(frozen=True)
class Cell:
    """One run of the grid."""

    model: str
    mitigation: Mitigation
    seed: int

    @property
    def folder(self) -> Path:
        return run_folder(self.model, self.mitigation.name, self.seed)


def grid(models: Sequence[str], mitigations: Sequence[Mitigation], seeds: Sequence[int]) -> list[Cell]:
    """Every model x mitigation x seed, by mitigation, then model, then seed (a table's columns in order)."""
    return [Cell(model, mitigation, seed) for mitigation in mitigations for model in models for seed in seeds]


def choice(name: str, overrides: Sequence[str] = ()) -> tuple[str, ...]:
    """The training overrides that choose mitigation ``name`` with its own ``overrides``."""
    return (f"mitigation={name}", *overrides)


def run_folder(model: str, mitigation: str, seed: int) -> Path:
    """Where a run of ``model`` with ``mitigation`` and ``seed`` trains, relative to the runs folder."""
    return Path(path_name(model)) / mitigation / f"seed{seed}"


def path_name(name: str) -> str:
    """``name`` as a folder name: every run of other characters than word characters, ``.``, ``+`` and ``-`` an
    underscore."""
    return re.sub(r"[^\w.+-]+", "_", name)
