"""A search folder's records, checked before a search resumes from them: until they pass, nothing is written.

``search.json`` must be whole JSON and record the settings the search runs with; ``trials.csv`` and
``final_trials.csv`` must hold only lines a search writes (:func:`~fairnas.search.records.read_trials`); every
final-stage run must be of a configuration ``trials.csv`` holds at the full budget (the final stage's runs are derived
from the trials: another search's would lend this one results it never selected); and without a trial recorded, no
file a search writes only after its trials may be there (the search would silently start again beside them). Each
fault is refused in one line naming the file (and the line). ``pareto_front.csv`` and ``hypervolume.csv`` are not
checked: every run rebuilds them from ``trials.csv``.
"""

from __future__ import annotations

import json
import logging
import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from fairnas.search.final import FINAL_CANDIDATES_FILE, FINAL_FRONT_FILE, FINAL_TRIALS_FILE
from fairnas.search.outputs import PARETO_FRONT_FILE, PARETO_PLOT_FILE, SETTINGS_FILE, TRIALS_FILE
from fairnas.search.records import TrialRecord, read_trials
from fairnas.search.settings import SearchSettings
from fairnas.search.trial import SUCCESS, config_id

log = logging.getLogger("fairnas.search")

LATER_RECORDS = (FINAL_TRIALS_FILE, FINAL_CANDIDATES_FILE, FINAL_FRONT_FILE, PARETO_PLOT_FILE)
"""Files a search writes only once it recorded trials (with pareto_front.csv when it has a row)."""


def check_folder(
    output_dir: Path, settings: SearchSettings, invariants: Mapping[str, Any], *, final_metrics: Sequence[str] = ()
) -> dict[str, Any] | None:
    """Check the records in ``output_dir`` for a search with ``settings``, which must match the ``invariants`` its
    search.json records (a setting an older search.json lacks is taken from ``settings.resume_unrecorded()``, what
    older versions ran with), and whose final stage also records ``final_metrics``. Returns what search.json must
    record from now on (None: it does)."""
    to_record = _settings_to_record(output_dir / SETTINGS_FILE, invariants, settings.resume_unrecorded())
    trials_path = output_dir / TRIALS_FILE
    budgets = (settings.min_budget, settings.max_budget)
    trials = read_trials(trials_path, settings.objectives, budgets=budgets)[0] if trials_path.is_file() else []
    if not trials:
        state = "records no trial" if trials_path.is_file() else "is missing"
        _check_nothing_later(output_dir, f"{trials_path} {state}")
    elif not (output_dir / SETTINGS_FILE).is_file():
        raise ValueError(
            f"{trials_path} has no {SETTINGS_FILE} beside it, so the settings its trials ran with are unknown; restore "
            f"{SETTINGS_FILE}, or start the search in a new folder"
        )
    if (output_dir / FINAL_TRIALS_FILE).is_file():
        _check_final_runs(output_dir / FINAL_TRIALS_FILE, trials, settings, final_metrics)
    return to_record


def _check_final_runs(
    path: Path, trials: Sequence[TrialRecord], settings: SearchSettings, final_metrics: Sequence[str]
) -> None:
    """final_trials.csv's lines, each a run of a successful full-budget trial's configuration."""
    metrics = [*settings.objectives, *final_metrics]
    runs, _ = read_trials(path, metrics, budgets=(settings.max_budget,) * 2, nan_when_crashed=final_metrics)
    selectable = {
        config_id(trial.config)
        for trial in trials
        if math.isclose(trial.budget, settings.max_budget) and trial.outcome.status == SUCCESS
    }
    for line, run in enumerate(runs, start=2):
        if config_id(run.config) not in selectable:
            raise ValueError(
                f"{path} line {line}: config {config_id(run.config)} is no successful full-budget trial of "
                f"{TRIALS_FILE}, so the final stage ran for another search; remove {FINAL_TRIALS_FILE}, "
                f"{FINAL_CANDIDATES_FILE} and {FINAL_FRONT_FILE} to run it again"
            )


def _settings_to_record(
    path: Path, settings: Mapping[str, Any], unrecorded_values: Mapping[str, Any]
) -> dict[str, Any] | None:
    """The settings search.json at ``path`` must record (None: it does); refused when it records others."""
    current: dict[str, Any] = json.loads(json.dumps(settings))  # normalised (tuples -> lists) for comparison
    if not path.is_file():
        return current
    recorded = _json_object(path)
    previous = json.loads(json.dumps(unrecorded_values)) | recorded
    changed = [name for name, value in current.items() if name in previous and previous[name] != value]
    if changed:
        texts = {name: json.dumps(previous[name]) for name in changed}
        there = ", ".join(f"{name}={text}" for name, text in texts.items() if len(text) <= 80)  # not a space
        raise ValueError(
            f"{path.parent} holds a search with different {changed}"
            + (f" (it ran with {there})" if there else "")
            + "; resume it with those values or use a new output_dir to change them"
        )
    if set(current) <= set(recorded):
        return None
    unknown = [name for name in current if name not in previous]
    if unknown:  # search.json from an older version: what it lacks cannot be checked now, only recorded
        log.warning("%s does not record %s; resuming with the current values", path, unknown)
    return recorded | current


def _json_object(path: Path) -> dict[str, Any]:
    """search.json's settings; a file that is not a whole JSON object is named."""
    try:
        recorded = json.loads(path.read_text())
    except ValueError as error:  # JSONDecodeError, UnicodeDecodeError
        raise ValueError(
            f"{path} is not whole JSON ({error}): restore the search's settings record, or start the search in a new "
            "folder"
        ) from None
    if not isinstance(recorded, dict):
        raise ValueError(f"{path} holds a JSON {type(recorded).__name__}, not a search's settings")
    return recorded


def _check_nothing_later(output_dir: Path, no_trials: str) -> None:
    """No trial is recorded in ``output_dir`` (``no_trials`` says how): no file a search writes only after its trials
    may be there."""
    later = [name for name in LATER_RECORDS if (output_dir / name).exists()]
    front = output_dir / PARETO_FRONT_FILE
    if front.is_file() and len(front.read_text().splitlines()) > 1:
        later.append(PARETO_FRONT_FILE)
    if later:
        raise ValueError(
            f"{no_trials}, yet {', '.join(later)} are there: the search's trials are lost, and it would start again "
            f"beside their results; restore {TRIALS_FILE}, or start the search in a new folder"
        )
