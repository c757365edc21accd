"""trials.csv: the durable, resumable record of a search (the source of truth on restart).

Every finished trial is written right away by rewriting the whole file atomically (temporary file,
fsync, ``os.replace``), so a search killed at any instant leaves either the old or the new file,
never a torn one. On restart the records tell which (configuration, budget) pairs are done.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from fairnas.io import append_csv_rows, write_csv_atomic, write_text_atomic
from fairnas.search.trial import TrialOutcome, config_id, native_config

log = logging.getLogger(__name__)

BASE_COLUMNS = ("trial_id", "config_id", "budget", "seed", "status")
TAIL_COLUMNS = ("wall_time_s", "finished_at", "error_message", "config")
RESERVED_COLUMNS = frozenset(BASE_COLUMNS + TAIL_COLUMNS)
TrialKey = tuple[str, float]
RunKey = tuple[str, float, int]


def trial_key(config: dict[str, Any], budget: float) -> TrialKey:
    """A strategy's identity of a trial: the configuration and the budget it ran at."""
    return config_id(config), round(float(budget), 9)


def run_key(config: dict[str, Any], budget: float, seed: int) -> RunKey:
    """The search loop's identity of a trial: configuration, budget and training seed (SMAC with ``n_seeds`` > 1
    and the final stage train one configuration and budget with several seeds)."""
    return (*trial_key(config, budget), int(seed))


@dataclass(frozen=True)
class TrialRecord:
    """A finished trial: what ran (config, budget, seed) and how it went (outcome)."""

    trial_id: int
    config: dict[str, Any]
    budget: float
    seed: int
    outcome: TrialOutcome

    @property
    def key(self) -> TrialKey:
        return trial_key(self.config, self.budget)

    @property
    def run_key(self) -> RunKey:
        return run_key(self.config, self.budget, self.seed)


class TrialStore:
    """Finished trials of one search, mirrored to ``trials.csv`` after every append."""

    def __init__(self, path: str | Path, objectives: Sequence[str], hyperparameters: Sequence[str]):
        self.path = Path(path)
        self.objectives = tuple(objectives)
        self.hyperparameters = tuple(hyperparameters)
        self.records: list[TrialRecord] = self._read() if self.path.exists() else []
        # a writer killed mid-write leaves its temporary file (fairnas.io.atomic_path); the folder has one writer
        for leftover in self.path.parent.glob(f".{self.path.name}.*"):
            leftover.unlink(missing_ok=True)

    def append(self, record: TrialRecord) -> None:
        """Add a finished trial and append its line to trials.csv, flushed to disk (the file is written whole only
        when it is new: a search's cost per trial does not grow with its trials)."""
        self.records.append(record)
        if self.path.is_file():
            row = self._row(record)
            append_csv_rows([[row.get(column) for column in self._columns]], self.path)
        else:
            write_csv_atomic(self.frame(), self.path)

    def frame(self) -> pd.DataFrame:
        """All records as a DataFrame: ids, budget, seed, status, objectives, timing, error, config."""
        return pd.DataFrame([self._row(record) for record in self.records], columns=self._columns)

    @property
    def _columns(self) -> list[str]:
        return [*BASE_COLUMNS, *self.objectives, *TAIL_COLUMNS, *self.hyperparameters]

    def _row(self, record: TrialRecord) -> dict[str, Any]:
        outcome = record.outcome
        return {
            "trial_id": record.trial_id,
            "config_id": config_id(record.config),
            "budget": record.budget,
            "seed": record.seed,
            "status": outcome.status,
            **outcome.values,
            "wall_time_s": outcome.wall_time_s,
            "finished_at": outcome.finished_at,
            "error_message": outcome.error,
            "config": json.dumps(native_config(record.config), sort_keys=True),
            **record.config,
        }

    def _read(self) -> list[TrialRecord]:
        text = self.path.read_text()
        if text and not text.endswith("\n"):  # a line cut short by a crash mid-append: that trial runs again
            log.warning("%s: dropping its last line, cut short (the search was stopped while writing it)", self.path)
            write_text_atomic(self.path, text[: text.rfind("\n") + 1])
        frame = pd.read_csv(self.path, keep_default_na=False)
        missing = [column for column in (*BASE_COLUMNS, *self.objectives, *TAIL_COLUMNS) if column not in frame]
        if missing:
            raise ValueError(f"{self.path} lacks columns {missing}; it was written by a different search")
        return [
            TrialRecord(
                trial_id=int(row["trial_id"]),
                config=json.loads(row["config"]),
                budget=float(row["budget"]),
                seed=int(row["seed"]),
                outcome=TrialOutcome(
                    values={name: float(row[name]) for name in self.objectives},
                    status=str(row["status"]),
                    wall_time_s=float(row["wall_time_s"]),
                    error=str(row["error_message"]),
                    finished_at=float(row["finished_at"]),
                ),
            )
            for row in frame.to_dict("records")
        ]
