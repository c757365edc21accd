"""The claims of thesis Chapter 4, each decided from a study's runs with its margin in standard errors.

A claim *holds* when the measured difference points the claimed way by more than :data:`HOLDS` standard errors.
A mitigation that changes nothing in a model's training (Balanced on a model that re-samples its groups already) is
*not applicable* to it and is not trained; one that trains but reproduces its baseline exactly in every seed has *no
effect* (Angular's extra margin where the target class's softmax probability underflows, so its gradient is the same).
Models compared in a study share their training seeds, so differences are paired by seed (a seed's effect is largely
shared by all models; pairing removes it), over the seeds both have run successfully. Every claim says how many
seeds it rests on and how many runs behind it crashed; nothing here is asserted, only computed from the runs table
(one row per run: ``stage``, ``model``, ``kind``, ``mitigation``, ``data``, ``seed``, ``status``, ``<split>/<metric>``).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence

import numpy as np
import pandas as pd

HOLDS = 2.0
"""A claim holds when the measured difference points the claimed way by more than this many standard errors."""
OBJECTIVES = ("error", "rank_disparity")
SUCCESS = "success"
NOT_APPLICABLE = "not applicable"
"""The status of a run a study did not train: its mitigation changes nothing in the model's training."""


@dataclasses.dataclass(frozen=True)
class Claim:
    """One claim: what it says, its verdict, its margin in s.e. (in the claimed direction) and the evidence."""

    stage: str
    statement: str
    holds: bool
    margin: float
    evidence: str
    outcome: str | None = None
    """Set instead of a margin's verdict: ``not applicable`` or ``no effect``."""

    @property
    def verdict(self) -> str:
        if self.outcome is not None:
            return self.outcome
        if math.isnan(self.margin):
            return "undecided"
        if math.isinf(self.margin):  # the same difference in every seed: no standard error to measure it by
            return f"{'holds' if self.holds else 'does not hold'} (the same difference in every seed)"
        return f"{'holds' if self.holds else 'does not hold'} ({self.margin:+.1f} s.e.)"

    def line(self) -> str:
        return f"{self.statement}: **{self.verdict}**. {self.evidence}"


def mean_se(values: Sequence[float] | pd.Series) -> tuple[float, float]:
    """Mean and standard error (NaN with fewer than two values)."""
    values = np.asarray(values, dtype=float)
    if len(values) == 0:
        return math.nan, math.nan
    se = values.std(ddof=1) / math.sqrt(len(values)) if len(values) > 1 else math.nan
    return float(values.mean()), float(se)


def fmt(mean: float, se: float, digits: int = 3) -> str:
    """``mean ± se``, or the mean alone without a standard error."""
    return f"{mean:.{digits}f}" if math.isnan(se) else f"{mean:.{digits}f} ± {se:.{digits}f}"


def margin(difference: float, se: float, claimed_sign: int) -> float:
    """The difference in standard errors, positive when it points the claimed way (+inf for a constant difference
    of the claimed sign, NaN without a standard error)."""
    if math.isnan(se) or math.isnan(difference):
        return math.nan
    if se == 0:
        return math.copysign(math.inf, difference * claimed_sign) if difference else 0.0
    return difference * claimed_sign / se


def successful(runs: pd.DataFrame) -> pd.DataFrame:
    return runs[runs["status"] == SUCCESS]


def paired(
    runs: pd.DataFrame,
    model: str,
    baseline: str,
    column: str,
    *,
    mitigation: str = "none",
    baseline_mitigation: str = "none",
    data: str = "main",
) -> tuple[float, float, int]:
    """Mean and s.e. of ``model`` (with ``mitigation``) - ``baseline`` (with ``baseline_mitigation``) in ``column``,
    paired over the seeds both ran successfully."""

    def values(name: str, mitigation_name: str) -> pd.Series:
        rows = successful(runs)
        rows = rows[(rows["model"] == name) & (rows["mitigation"] == mitigation_name) & (rows["data"] == data)]
        return rows.drop_duplicates("seed").set_index("seed")[column]

    ours, theirs = values(model, mitigation), values(baseline, baseline_mitigation)
    difference = (ours - theirs).dropna()
    return (*mean_se(difference), len(difference))


def failed(runs: pd.DataFrame) -> pd.DataFrame:
    """The runs that crashed (neither successful nor left untrained as not applicable)."""
    return runs[~runs["status"].isin([SUCCESS, NOT_APPLICABLE])]


def crashed(runs: pd.DataFrame, models: Sequence[str], data: str = "main") -> int:
    return len(failed(runs[runs["model"].isin(list(models)) & (runs["data"] == data)]))


def dominance(
    runs: pd.DataFrame, candidates: Sequence[str], baseline: str, *, split: str, data: str = "main", stage: str
) -> Claim:
    """Does one of ``candidates`` dominate ``baseline``: lower error and lower rank disparity, paired by seed? The
    candidate with the largest smaller margin decides."""
    best: tuple[float, str, list[tuple[float, float, int]]] | None = None
    for candidate in candidates:
        differences = [paired(runs, candidate, baseline, f"{split}/{name}", data=data) for name in OBJECTIVES]
        smaller = min(margin(mean, se, -1) for mean, se, _ in differences)
        if best is None or (not math.isnan(smaller) and (math.isnan(best[0]) or smaller > best[0])):
            best = (smaller, candidate, differences)
    where = f"{split}{'' if data == 'main' else ', transfer data'}"
    statement = f"the searched front dominates {baseline} ({where})"
    if best is None:
        return Claim(stage, statement, False, math.nan, "No searched model was trained.")
    smaller, candidate, differences = best
    parts = [
        f"{name.replace('_', ' ')} {mean:+.3f} ± {se:.3f} ({_se_text(margin(mean, se, -1))})"
        for name, (mean, se, _) in zip(OBJECTIVES, differences, strict=True)
    ]
    seeds = min(n for _, _, n in differences)
    failures = crashed(runs, [candidate, baseline], data)
    evidence = (
        f"{candidate} minus {baseline}: {', '.join(parts)}; paired over {seeds} seeds"
        + (f"; {failures} runs crashed and are left out" if failures else "")
        + "."
    )
    return Claim(stage, statement, smaller > HOLDS, smaller, evidence)


def lowers(
    runs: pd.DataFrame,
    model: str,
    mitigation: str,
    column: str,
    *,
    stage: str,
    label: str | None = None,
    baseline: str = "none",
) -> Claim:
    """Does ``mitigation`` lower ``column`` of ``model``, paired by seed with its run with ``baseline`` (default:
    unmitigated)? *Not applicable* when the study did not train it (its runs' status), *no effect* when every seed's
    run reproduces the baseline's ``column`` and error exactly."""
    both = {"mitigation": mitigation, "baseline_mitigation": baseline}
    mean, se, seeds = paired(runs, model, model, column, **both)
    error_mean, error_se, _ = paired(runs, model, model, column.rsplit("/", 1)[0] + "/error", **both)
    split, metric = column.split("/", 1)
    statement = f"{label or mitigation} lowers the {split} {metric.replace('_', ' ')} of {model}"
    treated = runs[(runs["model"] == model) & (runs["mitigation"] == mitigation)]
    if len(treated) and (treated["status"] == NOT_APPLICABLE).all():
        reason = treated["error_message"].iloc[0]
        return Claim(stage, statement, False, math.nan, f"Not trained: {reason}.", outcome=NOT_APPLICABLE)
    evidence = f"change {fmt(mean, se)} at an error change of {fmt(error_mean, error_se)}, paired over {seeds} seeds."
    if seeds and mean == se == error_mean == error_se == 0:
        return Claim(stage, statement, False, 0.0, evidence, outcome="no effect (the same run as the baseline's)")
    found = margin(mean, se, -1)
    return Claim(stage, statement, found > HOLDS, found, evidence)


def seed_noise(runs: pd.DataFrame, model: str, split: str = "val") -> pd.DataFrame:
    """Mean, seed s.d. and s.e. of each objective of ``model``'s unmitigated runs on the main data."""
    rows = successful(runs)
    rows = rows[(rows["model"] == model) & (rows["mitigation"] == "none") & (rows["data"] == "main")]
    rows = rows.drop_duplicates("seed")
    table = []
    for name in OBJECTIVES:
        values = rows[f"{split}/{name}"]
        mean, se = mean_se(values)
        table.append(
            {
                "metric": f"{split} {name}",
                "mean": mean,
                "seed s.d.": values.std(ddof=1),
                "seed s.e.": se,
                "seeds": len(values),
            }
        )
    return pd.DataFrame(table)


def model_summary(runs: pd.DataFrame, data: str = "main", splits: Sequence[str] = ("val", "test")) -> pd.DataFrame:
    """Per model of the unmitigated runs on ``data``: mean and s.e. of every objective on ``splits``."""
    rows = successful(runs)
    rows = rows[(rows["mitigation"] == "none") & (rows["data"] == data)].drop_duplicates(["model", "seed"])
    columns = [f"{split}/{name}" for split in splits for name in OBJECTIVES]
    grouped = rows.groupby(["model", "kind"], sort=False)[columns]
    summary = grouped.mean().add_suffix("_mean").join(grouped.sem().add_suffix("_se"))
    return summary.join(grouped.size().rename("n_seeds")).reset_index()


def _se_text(value: float) -> str:
    return "no spread over the seeds" if math.isinf(value) else f"{value:+.1f} s.e."
