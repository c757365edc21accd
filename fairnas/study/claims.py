"""The claims of thesis Chapter 4, each a paired comparison over training seeds decided by the tests of
:mod:`fairnas.study.inference`.

Models compared in a study share their training seeds, so differences are paired by seed (a seed's effect is largely
shared by all models; pairing removes it), over the seeds both have run successfully. Every claim says that a metric
is lower: a mitigation lowers a model's rank disparity, or a searched model *dominates* a baseline (lower error and
lower rank disparity; both objectives' one-sided tests must reject, so the larger p of each test decides). The
study's settings (``study.claims``) say which claims are *primary* (the paper's own; Holm's method holds their
family-wise error rate at ``alpha``, applied to the t-tests' and to the sign-flip tests' p-values each) and which are
exploratory (unadjusted p). Each claim is planned at a level fixed before the data
(:func:`~fairnas.study.inference.plan_level`: ``alpha / m`` for the ``m`` primary claims, ``alpha`` for an
exploratory one), where its seed floor (:func:`~fairnas.study.inference.min_seeds`) and its minimum detectable effect
are stated. The verdict is one of :data:`VERDICTS`: a claim holds when it rests on at least its floor of seeds and
both its (adjusted) p-values are below ``alpha``; a mitigation that changes nothing in a model's training is *not
applicable* and is not trained. The ``status`` column says what a claim's statistics can say (a difference the same
in every seed is *degenerate: zero variance*: no interval, no detectable effect). Nothing here is asserted, only
computed from the runs table (one row per run: ``stage``, ``model``, ``kind``, ``mitigation``, ``data``, ``seed``,
``status``, ``<split>/<metric>``).
"""

from __future__ import annotations

import dataclasses
import fnmatch
import math
from collections.abc import Mapping, Sequence
from typing import Any

import pandas as pd

from fairnas.groups import mean_se, mean_se_by_group
from fairnas.study.inference import (
    ZERO_VARIANCE,
    PairedTest,
    holm,
    intersection_union,
    min_seeds,
    minimum_detectable_effect,
    paired_test,
    plan_level,
)
from fairnas.validation import Settings

CLAIMS = Settings("study.claims.")
OBJECTIVES = ("error", "rank_disparity")
SUCCESS = "success"
NOT_APPLICABLE = "not applicable"
"""The status of a run a study did not train: its mitigation changes nothing in the model's training."""
HOLDS, DOES_NOT_HOLD, TOO_FEW_SEEDS = "holds", "does not hold", "too few seeds"
VERDICTS = (HOLDS, DOES_NOT_HOLD, TOO_FEW_SEEDS, NOT_APPLICABLE)
PRIMARY, EXPLORATORY = "primary", "exploratory"
NOT_TRAINED = "not trained"
"""The ``status`` of a claim whose mitigation was not trained (its verdict: not applicable)."""
COLUMNS = (
    "id",
    "stage",
    "claim",
    "family",
    "verdict",
    "status",
    "n",
    "metric",
    "effect",
    "ci_low",
    "ci_high",
    "sd",
    "d_z",
    "p",
    "p_exact",
    "p_holm",
    "p_exact_holm",
    "level",
    "mde",
    "evidence",
)
"""The columns of a study's claims.csv, one row per claim: ``p`` and ``p_holm`` are the t-test's (unadjusted and
Holm-adjusted), ``p_exact`` and ``p_exact_holm`` the exact sign-flip test's, ``level`` the plan level at which the
seed floor and the minimum detectable effect ``mde`` are stated, ``status`` what the statistics can say
(:data:`~fairnas.study.inference.TESTED`, :data:`~fairnas.study.inference.ZERO_VARIANCE`, one seed, no paired seeds,
:data:`NOT_TRAINED`)."""


@dataclasses.dataclass(frozen=True)
class ClaimSettings:
    """``study.claims``: the family-wise error rate ``alpha``, the ``power`` at which the minimum detectable effect
    is reported, and the ``primary`` claims as patterns over claim ids (``fnmatch``, e.g. ``final/dominates/*/test``);
    every other claim is exploratory."""

    alpha: float = 0.05
    power: float = 0.8
    primary: tuple[str, ...] = ()

    @classmethod
    def from_mapping(cls, mapping: Mapping[str, Any]) -> ClaimSettings:
        unknown = set(mapping) - {field.name for field in dataclasses.fields(cls)}
        if unknown:
            raise ValueError(f"study.claims: unknown keys {sorted(unknown)}; allowed: alpha, power, primary")
        settings = cls(**{**dataclasses.asdict(cls()), **mapping})
        for key in ("alpha", "power"):
            CLAIMS.probability(key, getattr(settings, key))
        if isinstance(settings.primary, str) or not all(isinstance(item, str) for item in settings.primary):
            CLAIMS.fail("primary", settings.primary, "a list of claim id patterns")
        return dataclasses.replace(settings, primary=tuple(settings.primary))

    def is_primary(self, claim_id: str) -> bool:
        return any(fnmatch.fnmatchcase(claim_id, pattern) for pattern in self.primary)

    def unmatched(self, claim_ids: Sequence[str]) -> list[str]:
        """The ``primary`` patterns that name none of ``claim_ids`` (a typo would leave claims unadjusted)."""
        return [pattern for pattern in self.primary if not fnmatch.filter(claim_ids, pattern)]


@dataclasses.dataclass(frozen=True)
class Claim:
    """One claim: its id (``<stage>/<what>/<model kind>/<split>``), what it says, the test of the metric that decides
    it and the evidence in words. ``applicable`` is False for a mitigation the study did not train."""

    id: str
    stage: str
    statement: str
    metric: str
    test: PairedTest
    evidence: str
    applicable: bool = True


def fmt(mean: float, se: float, digits: int = 3) -> str:
    """``mean ± se``, or the mean alone without a standard error."""
    return f"{mean:.{digits}f}" if math.isnan(se) else f"{mean:.{digits}f} ± {se:.{digits}f}"


def successful(runs: pd.DataFrame) -> pd.DataFrame:
    return runs[runs["status"] == SUCCESS]


def differences(
    runs: pd.DataFrame,
    model: str,
    baseline: str,
    column: str,
    *,
    mitigation: str = "none",
    baseline_mitigation: str = "none",
    data: str = "main",
) -> pd.Series:
    """``model`` (with ``mitigation``) minus ``baseline`` (with ``baseline_mitigation``) in ``column``, per seed both
    ran successfully."""

    def values(name: str, mitigation_name: str) -> pd.Series:
        rows = successful(runs)
        rows = rows[(rows["model"] == name) & (rows["mitigation"] == mitigation_name) & (rows["data"] == data)]
        return rows.drop_duplicates("seed").set_index("seed")[column]

    return (values(model, mitigation) - values(baseline, baseline_mitigation)).dropna()


def failed(runs: pd.DataFrame) -> pd.DataFrame:
    """The runs that crashed (neither successful nor left untrained as not applicable)."""
    return runs[~runs["status"].isin([SUCCESS, NOT_APPLICABLE])]


def crashed(runs: pd.DataFrame, models: Sequence[str], data: str = "main") -> int:
    return len(failed(runs[runs["model"].isin(list(models)) & (runs["data"] == data)]))


def describe(test: PairedTest, digits: int = 3) -> str:
    """A test in words: the mean difference, its 95 % interval and the one-sided p of each test."""
    if test.n < 2:
        return f"{test.effect:+.{digits}f} (one seed: no interval)" if test.n else "no paired seeds"
    p = f"p = {test.p:.3g}, sign-flip p = {test.p_exact:.3g}"
    if test.sd == 0:
        return f"{test.effect:+.{digits}f} in every seed (zero variance: no interval), {p}"
    return f"{test.effect:+.{digits}f} [{test.ci_low:+.{digits}f}, {test.ci_high:+.{digits}f}], {p}"


def dominance(
    runs: pd.DataFrame, candidate: str, baseline: str, *, claim_id: str, split: str, data: str = "main"
) -> Claim:
    """Does ``candidate`` dominate ``baseline``: lower error and lower rank disparity on ``split``, paired by seed?
    Both objectives must show a decrease (intersection-union), so each test's p is the larger of the two objectives'
    own: the claim's row shows the objective with the larger t-test p, and its sign-flip p is the larger of the
    objectives' sign-flip p-values (a missing one counts as the largest)."""
    tests = [
        paired_test(differences(runs, candidate, baseline, f"{split}/{name}", data=data).to_numpy())
        for name in OBJECTIVES
    ]
    deciding = intersection_union(tests)
    exact = [test.p_exact for test in tests]
    p_exact = math.nan if any(math.isnan(value) for value in exact) else max(exact)
    seeds = min(test.n for test in tests)  # both objectives must hold: the claim rests on the seeds both have
    parts = [f"{name.replace('_', ' ')} {describe(test)}" for name, test in zip(OBJECTIVES, tests, strict=True)]
    failures = crashed(runs, [candidate, baseline], data)
    where = f"{split}{'' if data == 'main' else ', transfer data'}"
    evidence = (
        f"{candidate} minus {baseline}: {'; '.join(parts)}; paired over {seeds} seeds"
        + (f"; {failures} runs crashed and are left out" if failures else "")
        + "."
    )
    return Claim(
        claim_id,
        claim_id.split("/", 1)[0],
        f"the searched model dominates {baseline} ({where})",
        f"{split}/{OBJECTIVES[deciding]}",
        dataclasses.replace(tests[deciding], n=seeds, p_exact=p_exact),
        evidence,
    )


def lowers(
    runs: pd.DataFrame,
    model: str,
    mitigation: str,
    column: str,
    *,
    claim_id: str,
    label: str | None = None,
    baseline: str = "none",
) -> Claim:
    """Does ``mitigation`` lower ``column`` of ``model``, paired by seed with its run with ``baseline`` (default:
    unmitigated)? Not applicable when the study did not train it (its runs' status)."""
    both = {"mitigation": mitigation, "baseline_mitigation": baseline}
    test = paired_test(differences(runs, model, model, column, **both).to_numpy())
    error = paired_test(differences(runs, model, model, column.rsplit("/", 1)[0] + "/error", **both).to_numpy())
    split, metric = column.split("/", 1)
    statement = f"{label or mitigation} lowers the {split} {metric.replace('_', ' ')} of {model}"
    stage = claim_id.split("/", 1)[0]
    treated = runs[(runs["model"] == model) & (runs["mitigation"] == mitigation)]
    if len(treated) and (treated["status"] == NOT_APPLICABLE).all():
        reason = treated["error_message"].iloc[0]
        return Claim(claim_id, stage, statement, column, test, f"Not trained: {reason}.", applicable=False)
    same = test.n > 0 and test.effect == test.sd == error.effect == error.sd == 0
    evidence = (
        f"change {describe(test)} at an error change of {describe(error)}, paired over {test.n} seeds"
        + (" (every run the same as its baseline's)" if same else "")
        + "."
    )
    return Claim(claim_id, stage, statement, column, test, evidence)


def decide(claims: Sequence[Claim], settings: ClaimSettings) -> pd.DataFrame:
    """The claims table (:data:`COLUMNS`): each claim's family, its tests, Holm's adjusted p of each test over the
    applicable primary claims, the plan level (``alpha / m`` for the ``m`` applicable primary claims, ``alpha`` for
    an exploratory one: a function of the plan, never of the p-values), its minimum detectable effect at
    ``settings.power`` and that level, and its verdict."""
    rows = []
    for claim in claims:
        test = claim.test
        rows.append(
            {
                "id": claim.id,
                "stage": claim.stage,
                "claim": claim.statement,
                "family": PRIMARY if settings.is_primary(claim.id) else EXPLORATORY,
                "status": test.status if claim.applicable else NOT_TRAINED,
                "n": test.n,
                "metric": claim.metric,
                "effect": test.effect,
                "ci_low": test.ci_low,
                "ci_high": test.ci_high,
                "sd": test.sd,
                "d_z": test.d_z,
                "p": test.p,
                "p_exact": test.p_exact,
                "p_holm": math.nan,
                "p_exact_holm": math.nan,
                "level": settings.alpha,
                "applicable": claim.applicable,
                "evidence": claim.evidence,
            }
        )
    table = pd.DataFrame(rows, columns=[*COLUMNS, "applicable"])
    family = table.index[(table["family"] == PRIMARY) & table["applicable"].astype(bool)]
    table.loc[family, "p_holm"] = holm(list(table.loc[family, "p"]), settings.alpha)
    table.loc[family, "p_exact_holm"] = holm(list(table.loc[family, "p_exact"]), settings.alpha)
    table.loc[family, "level"] = plan_level(settings.alpha, len(family))
    table["mde"] = [
        minimum_detectable_effect(int(row.n), float(row.sd), float(row.level), settings.power)
        for row in table.itertuples()
    ]
    table["verdict"] = [_verdict(row, settings.alpha) for row in table.to_dict("records")]
    return table[list(COLUMNS)]


def _verdict(row: Mapping[str, Any], alpha: float) -> str:
    """Not applicable, too few seeds for the plan level's floor, or whether both tests' (adjusted) p are below
    ``alpha``."""
    if not row["applicable"]:
        return NOT_APPLICABLE
    if row["n"] < min_seeds(row["level"]):
        return TOO_FEW_SEEDS
    primary = row["family"] == PRIMARY
    p, p_exact = (row["p_holm"], row["p_exact_holm"]) if primary else (row["p"], row["p_exact"])
    return HOLDS if p < alpha and p_exact < alpha else DOES_NOT_HOLD


def below_floor(table: pd.DataFrame) -> str | None:
    """A decided claims table's claims that rest on fewer seeds than the floor of their plan level (*too few seeds*),
    in one plain sentence: no such claim can hold whatever the data, since the exact sign-flip test cannot reject
    there; None when every tested claim reaches its floor."""
    tested = table[table["verdict"] != NOT_APPLICABLE]
    short = tested[tested["verdict"] == TOO_FEW_SEEDS]
    if short.empty:
        return None
    floors = ", ".join(f"{min_seeds(level)} seeds at level {level:.3g}" for level in sorted(set(short["level"])))
    seeds = "/".join(str(n) for n in sorted(set(short["n"])))
    if len(short) == len(tested):
        return (
            f"No claim of this study can hold: every tested claim rests on {seeds} seeds, below the floor of its plan "
            f"level ({floors}), where the exact sign-flip test cannot reject whatever the data; its verdicts say "
            "nothing about the effects. Give each stage that makes claims at least its floor of seeds."
        )
    return (
        f"{len(short)} of {len(tested)} tested claims rest on fewer seeds than the floor of their plan level "
        f"({floors}) and cannot hold whatever the data: {', '.join(short['id'])}."
    )


def finding(row: Mapping[str, Any], power: float = 0.8) -> str:
    """A claims-table row as one line of the report (Markdown); ``power``: the one its ``mde`` was computed at."""
    if row["verdict"] == NOT_APPLICABLE:
        return f"{row['claim']} ({row['family']}): **{row['verdict']}**. {row['evidence']}"
    if row["family"] == PRIMARY:
        p = f"Holm-adjusted p = {row['p_holm']:.3g}, sign-flip {row['p_exact_holm']:.3g}"
    else:
        p = f"p = {row['p']:.3g}, sign-flip {row['p_exact']:.3g}"
    level = f"at level {row['level']:.2g}"
    if row["status"] == ZERO_VARIANCE:
        detectable = "; degenerate: zero variance, so no interval and no detectable effect"
    elif math.isinf(row["mde"]):
        floor = min_seeds(row["level"])
        detectable = f"; no effect is detectable {level}: the sign-flip test needs {floor} seeds"
    elif math.isnan(row["mde"]):
        detectable = ""
    else:
        detectable = f"; smallest effect detectable at power {power:g} {level}: {row['mde']:.3g}"
    return (
        f"{row['claim']} ({row['family']}, n = {row['n']}): **{row['verdict']}** ({p}{detectable}). {row['evidence']}"
    )


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
    summary = mean_se_by_group(rows, columns, ["model", "kind"]).rename(columns={"n": "n_seeds"})
    order = ["model", "kind", *(f"{column}_mean" for column in columns), *(f"{column}_se" for column in columns)]
    return summary[[*order, "n_seeds"]]
