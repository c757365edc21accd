"""A finished study's claims decided again under the current rule from its runs table alone, without training
(:func:`redecide`; ``python -m bench.evidence.results redecide-study <results folder>`` writes them).

Every claim is rebuilt from ``runs.csv`` with the functions the stages use (:func:`~fairnas.study.claims.dominance`,
:func:`~fairnas.study.claims.lowers`), as its id (``<stage>/<what>/<model kind>/<split>``), statement and deciding
metric in the recorded ``claims.csv`` name it: a dominance claim compares the stage's searched model with the
baseline of the id's kind on the stage's data; any other claim is a mitigation (``what``, matched to the runs'
``mitigation`` without case) of the model of that kind against its baseline runs in the same stage (the unmitigated
final comparison's for ``mitigations``, the other arm otherwise). Before anything is decided, each rebuilt claim must
reproduce the statistics the recorded one shares with it (statement, metric, n, effect, one-sided t-test p, and the
interval and s.d. where the differences vary), to the last digit but float rounding: a claim that does not is not
re-decided at all. The primary family is the recorded one, so the plan is the study's own.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable

import pandas as pd

from fairnas.study import claims
from fairnas.study.inference import TESTED

RULE = (
    "a one-sided paired t-test and an exact sign-flip test, both required, Holm per test over the primary claims; "
    "seed floor floor(log2(1 / level)) + 1 at the plan level alpha / m (primary) or alpha (exploratory); detectable "
    "effects at the plan level; zero variance degenerate (docs/study.md, 'How a claim is decided')"
)
"""The rule :func:`redecide` decides by, in words (a results manifest records it)."""
SHARED = ("n", "effect", "p")
"""The statistics every rebuilt claim must reproduce; ``ci_low``, ``ci_high`` and ``sd`` too where the differences
vary (the current rule reports no interval for zero variance, where an older one wrote [c, c])."""
RUN_COLUMNS = ("stage", "model", "kind", "mitigation", "data", "seed")
"""The columns of ``runs.csv`` a claim is rebuilt from (with its deciding metric's)."""
RECORDED_COLUMNS = ("id", "claim", "family", "metric", "verdict", *SHARED, "ci_low", "ci_high", "sd")
"""The columns of the recorded ``claims.csv`` a claim is rebuilt and checked by."""


def redecide(runs: pd.DataFrame, recorded: pd.DataFrame, *, alpha: float = 0.05, power: float = 0.8) -> pd.DataFrame:
    """The claims of ``recorded`` (a study's ``claims.csv``) rebuilt from ``runs`` (its ``runs.csv``) and decided
    together under the current rule, with the recorded primary family; raises ValueError naming every claim that
    cannot be rebuilt or does not reproduce its recorded statistics."""
    rebuilt, problems = [], []
    for row in recorded.to_dict("records"):
        try:
            claim = rebuild(runs, row)
        except ValueError as error:
            problems.append(f"{row['id']}: {error}")
            continue
        problems += [f"{row['id']}: {difference}" for difference in _differences(claim, row)]
        rebuilt.append(claim)
    if problems:
        raise ValueError("claims not reproduced from the runs: " + "; ".join(problems))
    primary = tuple(recorded.loc[recorded["family"] == claims.PRIMARY, "id"])
    return claims.decide(rebuilt, claims.ClaimSettings(alpha=alpha, power=power, primary=primary))


def rebuild(runs: pd.DataFrame, row: dict) -> claims.Claim:
    """The claim of recorded ``row`` (its ``id``, ``claim`` and ``metric``) from ``runs``."""
    stage, what, kind, split = row["id"].split("/")
    rows = runs[runs["stage"] == stage]
    if stage == "mitigations":  # the baselines are the final comparison's runs of the same model and seed
        rows = pd.concat([runs[runs["stage"] == "final"], rows], ignore_index=True)
    if rows.empty:
        raise ValueError(f"no runs of stage {stage}")
    if what == "dominates":
        (data,) = _one(rows.loc[rows["kind"] == "searched", "data"], "data set of the searched runs")
        candidate = _one(rows.loc[rows["kind"] == "searched", "model"], "searched model")[0]
        baseline = _model(rows, kind, row["claim"])
        return claims.dominance(rows, candidate, baseline, claim_id=row["id"], split=split, data=data)
    model = _model(rows, kind, row["claim"])
    arms = set(rows.loc[rows["model"] == model, "mitigation"])
    treated = _one([arm for arm in arms if arm.lower() == what], f"mitigation {what!r} of {model}")[0]
    others = sorted(arms - {treated})
    baseline = "none" if "none" in others else _one(others, f"baseline arm of {model}")[0]
    label = row["claim"].split(" lowers ", 1)[0]
    return claims.lowers(rows, model, treated, row["metric"], claim_id=row["id"], label=label, baseline=baseline)


def _model(rows: pd.DataFrame, kind: str, statement: str) -> str:
    """The one model of ``kind`` in ``rows`` (a ranked kind, ``hand-designed-2``, as its kind: the recorded
    statement, which must name the model, tells them apart only where one is in the stage); raises ValueError."""
    (model,) = _one(rows.loc[rows["kind"] == re.sub(r"-\d+$", "", kind), "model"], f"{kind} model")
    if model not in statement:
        raise ValueError(f"its statement {statement!r} does not name the {kind} model {model!r}")
    return model


def _one(values: Iterable, what: str) -> list:
    found = list(dict.fromkeys(values))
    if len(found) != 1:
        raise ValueError(f"expected one {what}, found {found}")
    return found


def _differences(claim: claims.Claim, row: dict) -> list[str]:
    """Where ``claim`` does not reproduce the recorded ``row``."""
    found = []
    if claim.statement != row["claim"] or claim.metric != row["metric"]:
        found.append(f"rebuilt as {claim.statement!r} on {claim.metric}, recorded {row['claim']!r} on {row['metric']}")
    test = claim.test
    names = SHARED + (("ci_low", "ci_high", "sd") if test.status == TESTED else ())
    for name in names:
        value, expected = float(getattr(test, name)), float(row[name])
        same = (math.isnan(value) and math.isnan(expected)) or math.isclose(
            value, expected, rel_tol=1e-12, abs_tol=1e-15
        )
        if not same:
            found.append(f"{name} {value!r}, recorded {expected!r}")
    return found
