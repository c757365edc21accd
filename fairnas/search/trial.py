"""One trial: run the target on (config, seed, budget) and turn any failure into a crashed outcome.

``evaluate_trial`` is what runs on a worker (in-process or on a Dask worker). It never raises for a
failing target: exceptions (non-finite embeddings included), out-of-memory errors, missing objectives and NaN or
-inf values all become a ``crashed`` outcome carrying the crash cost and the error message, so the search goes on.
A full disk (or quota) is no result of the trial either: :func:`is_out_of_space` errors escape, so that the search
stops without recording the trial and retries it when the same command runs again. A +inf value is a result, not
a failure: a ratio of Table 4.1 is +inf by definition when its denominator is 0 and
its numerator is not. It is capped at the objective's crash cost (the worst value the search records, and the
number the optimiser is told), the trial stays successful, and its message says which value was capped.
"""

from __future__ import annotations

import errno
import hashlib
import json
import math
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

SUCCESS = "success"
CRASHED = "crashed"

Target = Callable[[dict[str, Any], int, float], Mapping[str, float]]


def native_config(config: Mapping[str, Any]) -> dict[str, Any]:
    """Plain-Python copy of a configuration (numpy scalars -> Python scalars), keys sorted."""
    return {name: value.item() if hasattr(value, "item") else value for name, value in sorted(dict(config).items())}


def config_id(config: Mapping[str, Any]) -> str:
    """Stable 12-hex-digit id of a configuration (same active values -> same id, across runs).

    A target can use it to name a configuration's checkpoints, e.g. to continue training a
    configuration promoted from a lower budget.
    """
    canonical = json.dumps(native_config(config), sort_keys=True, separators=(",", ":"))
    return hashlib.sha1(canonical.encode()).hexdigest()[:12]


@dataclass(frozen=True)
class TrialOutcome:
    """The result of one evaluation: objective values (the crash cost when crashed), status, timing, and a message
    (the error of a crashed trial; the capped values of a successful one)."""

    values: dict[str, float]
    status: str
    wall_time_s: float
    error: str = ""
    finished_at: float = field(default_factory=time.time)


def evaluate_trial(
    target: Target,
    config: dict[str, Any],
    seed: int,
    budget: float,
    objectives: Sequence[str],
    crash_cost: Sequence[float],
) -> TrialOutcome:
    """Call ``target(config, seed, budget)`` and validate its objectives; failures become crashed."""
    start = time.perf_counter()
    try:
        result = target(dict(config), seed, budget)
        values = _objective_values(result, objectives)
    except Exception as error:  # any failure, including MemoryError and torch.cuda.OutOfMemoryError
        if is_out_of_space(error):
            raise
        _release_accelerator_memory()
        return crashed_outcome(objectives, crash_cost, error, time.perf_counter() - start)
    worst = dict(zip(objectives, crash_cost, strict=True))
    capped = {name: worst[name] for name, value in values.items() if value == math.inf}
    message = "; ".join(f"{name}=+inf capped at {cap:g}" for name, cap in capped.items())
    return TrialOutcome(values=values | capped, status=SUCCESS, wall_time_s=time.perf_counter() - start, error=message)


def _objective_values(result: Any, objectives: Sequence[str]) -> dict[str, float]:
    if not isinstance(result, Mapping):
        raise TypeError(
            f"target must return a dict keyed by the objectives {list(objectives)}, got {type(result).__name__}"
        )
    missing = [name for name in objectives if name not in result]
    if missing:
        raise ValueError(f"target result lacks objectives {missing}; it returned {sorted(result)}")
    values = {name: float(result[name]) for name in objectives}
    undefined = {name: value for name, value in values.items() if math.isnan(value) or value == -math.inf}
    if undefined:
        raise FloatingPointError(f"undefined objective values {undefined}")
    return values


OUT_OF_SPACE = (errno.ENOSPC, errno.EDQUOT)


def is_out_of_space(error: BaseException) -> bool:
    """Whether ``error`` (or an error it was raised from) is a full disk or an exceeded quota: the machine's fault,
    not the trial's."""
    while error is not None:
        if isinstance(error, OSError) and error.errno in OUT_OF_SPACE:
            return True
        error = error.__cause__ or error.__context__  # type: ignore[assignment]
    return False


class TrialsCrashAlike(RuntimeError):
    """The first ``search.fail_fast`` trials of a search run all crashed with one and the same error: a setting or
    the environment (a missing package, no GPU, a bad path), not the configurations, so the search stops before it
    spends its budget on crashes."""


def crashed_outcome(
    objectives: Sequence[str], crash_cost: Sequence[float], error: BaseException, wall_time_s: float
) -> TrialOutcome:
    """A crashed trial: the crash cost for every objective and the error as a one-line message."""
    message = f"{type(error).__name__}: {error}".replace("\n", " ").strip()
    return TrialOutcome(
        values=dict(zip(objectives, crash_cost, strict=True)), status=CRASHED, wall_time_s=wall_time_s, error=message
    )


def _release_accelerator_memory() -> None:
    """Free cached GPU memory after a failed trial (e.g. CUDA OOM) if torch is in use here."""
    torch = sys.modules.get("torch")
    if torch is not None and torch.cuda.is_available():
        torch.cuda.empty_cache()
