"""SearchResult: the trials of a search, its Pareto front and hypervolume; plus writing the outputs."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from fairnas.io import atomic_path, write_csv_atomic
from fairnas.search.final import FINAL_CANDIDATES_FILE, FINAL_FRONT_FILE, FINAL_TRIALS_FILE, FinalResult
from fairnas.search.hypervolume import ReferencePoint, default_reference_point, hypervolume, hypervolume_curve
from fairnas.search.pareto import final_trials, pareto_front
from fairnas.search.plots import pareto_figure

SETTINGS_FILE = "search.json"
TRIALS_FILE = "trials.csv"
PARETO_FRONT_FILE = "pareto_front.csv"
PARETO_PLOT_FILE = "pareto_front.png"
HYPERVOLUME_FILE = "hypervolume.csv"


@dataclass(frozen=True)
class SearchResult:
    """Trials of a search (one row each, in finishing order), the observed front at the maximum budget and, when the
    search ran its final stage, that stage's result (``final``: the search's answer, a front of means over seeds)."""

    trials: pd.DataFrame
    pareto_front: pd.DataFrame
    objectives: tuple[str, ...]
    max_budget: float
    output_dir: Path
    final: FinalResult | None = None

    @classmethod
    def from_trials(
        cls, trials: pd.DataFrame, objectives: Sequence[str], max_budget: float, output_dir: str | Path
    ) -> SearchResult:
        front = pareto_front(trials, objectives, max_budget)
        return cls(trials, front, tuple(objectives), float(max_budget), Path(output_dir))

    @classmethod
    def load(cls, output_dir: str | Path) -> SearchResult:
        """Read a (finished or interrupted) search back from its output directory."""
        output_dir = Path(output_dir)
        if not (output_dir / SETTINGS_FILE).is_file() or not (output_dir / TRIALS_FILE).is_file():
            raise ValueError(f"'{output_dir}' holds no search (needs {SETTINGS_FILE} and {TRIALS_FILE})")
        settings = json.loads((output_dir / SETTINGS_FILE).read_text())
        trials = pd.read_csv(output_dir / TRIALS_FILE)
        trials["error_message"] = trials["error_message"].fillna("")
        result = cls.from_trials(trials, settings["objectives"], settings["max_budget"], output_dir)
        files = [output_dir / name for name in (FINAL_TRIALS_FILE, FINAL_CANDIDATES_FILE, FINAL_FRONT_FILE)]
        if all(file.is_file() for file in files):
            final = FinalResult(*(pd.read_csv(file) for file in files))
            result = cls(result.trials, result.pareto_front, result.objectives, result.max_budget, output_dir, final)
        return result

    def hypervolume(self, reference_point: ReferencePoint) -> float:
        """Hypervolume of the Pareto front with respect to ``reference_point`` (all minimised)."""
        self._check_reference(reference_point)
        return hypervolume(self.pareto_front[list(self.objectives)].to_numpy(dtype=float), reference_point)

    def hypervolume_curve(self, reference_point: ReferencePoint) -> pd.DataFrame:
        """Hypervolume of the front after each finished trial against consumed budget."""
        self._check_reference(reference_point)
        return hypervolume_curve(self.trials, self.objectives, self.max_budget, reference_point)

    def default_reference_point(self) -> np.ndarray | None:
        """Worst max-budget value per objective plus 10% of its range; None without such trials."""
        final = final_trials(self.trials, self.max_budget)
        if final.empty:
            return None
        return default_reference_point(final[list(self.objectives)].to_numpy(dtype=float))

    def _check_reference(self, reference_point: ReferencePoint) -> None:
        if len(reference_point) != len(self.objectives):
            raise ValueError(
                f"reference_point has {len(reference_point)} values; objectives are {list(self.objectives)}"
            )


def write_outputs(result: SearchResult, reference_point: Sequence[float] | None, *, plot: bool) -> pd.DataFrame:
    """Write pareto_front.csv, hypervolume.csv (and pareto_front.png when ``plot``); return the curve.

    Without a ``reference_point`` the curve uses ``result.default_reference_point()``.
    """
    reference = reference_point if reference_point is not None else result.default_reference_point()
    if reference is None:
        curve = hypervolume_curve(
            result.trials, result.objectives, result.max_budget, [np.nan] * len(result.objectives)
        )
    else:
        curve = result.hypervolume_curve(reference)
    write_csv_atomic(result.pareto_front, result.output_dir / PARETO_FRONT_FILE)
    write_csv_atomic(curve, result.output_dir / HYPERVOLUME_FILE)
    if plot:
        final_front = None if result.final is None else result.final.candidates
        figure = pareto_figure(result.trials, result.pareto_front, result.objectives, result.max_budget, final_front)
        with atomic_path(result.output_dir / PARETO_PLOT_FILE) as tmp:
            figure.savefig(tmp, dpi=120, format="png")
    return curve
