"""trials.csv: the durable, resumable record of a search (the source of truth on restart).

Every finished trial is appended right away as one line, flushed to disk (a new file is written whole, atomically),
so a search killed at any instant leaves every finished trial but at most a last line cut short. On restart the
records tell which trials are done; each line is checked as it is read back (:func:`read_trials`), so a resumed search
never builds on a line no search writes.
"""

from __future__ import annotations

import io
import json
import logging
import math
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from fairnas.io import append_csv_rows, write_csv_atomic, write_text_atomic
from fairnas.search.trial import CRASHED, SUCCESS, TrialOutcome, config_id, native_config

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
    """Finished trials of one search, mirrored to ``trials.csv`` after every append. Read back through
    :func:`read_trials`; a last line cut short by a crash mid-append is dropped from the file (that trial runs
    again), as is a temporary file an interrupted writer left (fairnas.io.atomic_path): the folder has one writer.
    ``budgets`` and ``nan_when_crashed`` are :func:`read_trials`'."""

    def __init__(
        self,
        path: str | Path,
        objectives: Sequence[str],
        hyperparameters: Sequence[str],
        *,
        budgets: tuple[float, float] | None = None,
        nan_when_crashed: Collection[str] = (),
    ):
        self.path = Path(path)
        self.objectives = tuple(objectives)
        self.hyperparameters = tuple(hyperparameters)
        self.records: list[TrialRecord] = []
        if self.path.exists():
            self.records, cut = read_trials(self.path, objectives, budgets=budgets, nan_when_crashed=nan_when_crashed)
            if cut:
                log.warning(
                    "%s: dropping its last line, cut short (the search was stopped while writing it)", self.path
                )
                self._drop_cut_line()
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

    def _drop_cut_line(self) -> None:
        whole = _whole_lines(self.path.read_text())
        if whole:
            write_text_atomic(self.path, whole)
        else:  # only the header was being written: no trial is recorded, the first append writes it again
            self.path.unlink()


def read_trials(
    path: Path,
    objectives: Sequence[str],
    *,
    budgets: tuple[float, float] | None = None,
    nan_when_crashed: Collection[str] = (),
) -> tuple[list[TrialRecord], bool]:
    """The trials ``path`` records, and whether its last line is cut short (by a crash mid-append; left out here).
    Writes nothing. A file or line no search writes is refused in one line naming the file and line: a column
    missing, a value that does not parse, a status other than success or crashed, a config_id that is not its
    config's, an objective that is not finite (``nan_when_crashed``: metrics a crashed run records as NaN, as the
    final stage's test metrics), a budget outside ``budgets`` (the search's min and max), a trial id or a trial
    (configuration, budget, seed) recorded twice."""
    text = path.read_text()
    whole = _whole_lines(text)
    if not whole:  # not even the header is whole: nothing is recorded
        return [], True
    try:
        frame = pd.read_csv(io.StringIO(whole), keep_default_na=False, dtype=str)
    except pd.errors.ParserError as error:
        raise ValueError(f"{path}: not a table a search writes ({str(error).strip()})") from None
    missing = [column for column in (*BASE_COLUMNS, *objectives, *TAIL_COLUMNS) if column not in frame]
    if missing:
        raise ValueError(f"{path} lacks columns {missing}; it was written by a different search")
    records: list[TrialRecord] = []
    lines: dict[Any, int] = {}  # each trial id and each trial (its run key): the line recording it
    for line, row in enumerate(frame.to_dict("records"), start=2):
        where = f"{path} line {line}"
        record = _checked(where, row, objectives, budgets, nan_when_crashed)
        trial = f"the trial (config {record.run_key[0]}, budget {record.budget:g}, seed {record.seed})"
        for key, what in ((record.trial_id, f"trial_id {record.trial_id}"), (record.run_key, trial)):
            earlier = lines.setdefault(key, line)
            if earlier != line:
                raise ValueError(
                    f"{where}: {what} is recorded on line {earlier} too; a search records each trial once: remove one"
                )
        records.append(record)
    return records, whole != text


def _checked(
    where: str,
    row: dict[str, str],
    objectives: Sequence[str],
    budgets: tuple[float, float] | None,
    nan_when_crashed: Collection[str],
) -> TrialRecord:
    """One line of a trials file as a record, checked as :func:`read_trials` says (but for repeated trials)."""
    record = _parsed(where, row, objectives)
    if row["config_id"] != config_id(record.config):
        raise ValueError(f"{where}: config_id {row['config_id']} is not its config's ({config_id(record.config)})")
    for name, value in record.outcome.values.items():
        undefined = record.outcome.status == CRASHED and name in nan_when_crashed and math.isnan(value)
        if not math.isfinite(value) and not undefined:
            raise ValueError(
                f"{where}: {name}={value} is not a finite number, which no search records (a crash records the crash "
                "cost); correct the line or remove it (that trial then runs again)"
            )
    if budgets is not None and not budgets[0] <= record.budget <= budgets[1]:
        raise ValueError(
            f"{where}: budget={record.budget:g} lies outside the search's budgets, {budgets[0]:g} to {budgets[1]:g}"
        )
    return record


def _parsed(where: str, row: dict[str, str], objectives: Sequence[str]) -> TrialRecord:
    """One line of a trials file as a record; a value that does not parse is named."""
    status = row["status"]
    if status not in (SUCCESS, CRASHED):
        raise ValueError(f"{where}: status={status!r} is neither {SUCCESS} nor {CRASHED}")
    config = _value(where, row, "config", json.loads, "a configuration in JSON")
    if not isinstance(config, dict):
        raise ValueError(f"{where}: config={row['config']!r} is not a configuration in JSON")
    return TrialRecord(
        trial_id=_value(where, row, "trial_id", _integer, "an integer"),
        config=config,
        budget=_value(where, row, "budget", float, "a number"),
        seed=_value(where, row, "seed", _integer, "an integer"),
        outcome=TrialOutcome(
            values={name: _value(where, row, name, _number, "a number") for name in objectives},
            status=status,
            wall_time_s=_value(where, row, "wall_time_s", _number, "a number"),
            error=row["error_message"],
            finished_at=_value(where, row, "finished_at", _number, "a number"),
        ),
    )


def _value(where: str, row: dict[str, str], column: str, parse: Callable[[str], Any], expected: str) -> Any:
    try:
        return parse(row[column])
    except ValueError:
        raise ValueError(f"{where}: {column}={row[column]!r} is not {expected}") from None


def _number(text: str) -> float:
    """A number as the trials files write it: NaN as an empty field."""
    return math.nan if text == "" else float(text)


def _integer(text: str) -> int:
    number = float(text)
    if not number.is_integer():
        raise ValueError(text)
    return int(number)


def _whole_lines(text: str) -> str:
    """``text`` up to its last line break: without a line a crash cut short."""
    return text[: text.rfind("\n") + 1]
