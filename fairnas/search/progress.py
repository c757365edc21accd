"""One progress line per finished trial: trials done, budget used of total, front size, hypervolume."""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence

from fairnas.search.records import TrialRecord
from fairnas.search.trial import SUCCESS

log = logging.getLogger("fairnas.search")


def progress_line(
    record: TrialRecord,
    last: Mapping[str, float],
    *,
    objectives: Sequence[str],
    n_trials: int | None,
    total_budget: float | None,
) -> str:
    """Format the state of the search after ``record`` finished (``last``: hypervolume.csv's last row)."""
    trials = f"{int(last['n_trials'])}" + (f"/{n_trials}" if n_trials is not None else "")
    budget = f"{last['consumed_budget']:g}" + (f"/{total_budget:g}" if total_budget is not None else "")
    if record.outcome.status == SUCCESS:
        outcome = " ".join(f"{name}={record.outcome.values[name]:.4g}" for name in objectives)
        outcome += f" ({record.outcome.error})" if record.outcome.error else ""
    else:
        outcome = f"crashed: {record.outcome.error[:120]}"
    return (
        f"trials {trials} | budget {budget} | front {int(last['front_size'])} | "
        f"hypervolume {last['hypervolume']:.4g} | trial {record.trial_id} "
        f"(config {record.key[0]}, budget {record.budget:g}) {outcome}"
    )
