"""Group-disparity statistics of per-item audit records (thesis Sec. 3.3.1.1), reusable by any audit.

The thesis tests whether groups are treated equally with a Kruskal-Wallis rank-sum test across groups and, where
it finds a difference, pairwise two-sided Wilcoxon rank-sum tests (Mann-Whitney U) to see which groups differ and
in which direction, all at alpha = 0.05 with Bonferroni-Holm corrections; it shows disparities as odds ratios of
a good outcome between two groups with 95% error bars.

Choices made here, where the thesis leaves them open:

- Unit of analysis: one value per source image (:func:`unit_means`: the mean of its records in the scope). The
  corrupted versions of one image are not independent observations, so the tests compare per-image means; the
  odds ratios use every record, with standard errors clustered by source image instead.
- Holm family: every test of one table (:func:`scoped_tests`), so the family-wise error rate of all the claims
  an audit makes is at most alpha. A pairwise test counts as significant only when its Kruskal-Wallis test is
  (the thesis runs pairwise tests only after a significant Kruskal-Wallis test).
- Degenerate data: a metric constant over all compared values gives no evidence of a difference (statistic NaN,
  p = 1, ``note`` says so); a group without values takes no part. Odds ratios that cannot be estimated
  (separation, no informative cell, no convergence) are NaN with the reason in ``note``.
"""

from __future__ import annotations

import itertools
import warnings
from collections.abc import Collection, Sequence

import numpy as np
import pandas as pd
import statsmodels.api as sm
from scipy import stats
from statsmodels.stats.multitest import multipletests
from statsmodels.tools.sm_exceptions import ConvergenceWarning, PerfectSeparationWarning

from fairnas.groups import by_group

KRUSKAL = "kruskal_wallis"
WILCOXON = "wilcoxon_rank_sum"


def unit_means(
    frame: pd.DataFrame, metrics: Sequence[str], unit: str, by: Sequence[str] = (), group: str = "group"
) -> pd.DataFrame:
    """One row per ``unit`` (e.g. source image) and value of ``by``: the mean of each metric over its records."""
    return by_group(frame, metrics, [*by, group, unit]).reset_index()


def group_tests(
    values: pd.DataFrame, metric: str, order: Sequence[str], *, group: str = "group", lower_is_better: bool = False
) -> list[dict]:
    """Kruskal-Wallis across the groups of ``order`` present in ``values`` and two-sided Wilcoxon rank-sum
    (Mann-Whitney U) tests of every pair: rows with ``test, groups, n, statistic, p, worse, note``. ``worse``
    is the group with the worst mean (of the pair; of all groups for Kruskal-Wallis)."""
    samples = {name: values.loc[values[group] == name, metric].dropna().to_numpy(float) for name in order}
    samples = {name: sample for name, sample in samples.items() if len(sample)}
    if len(samples) < 2:
        return []
    sign = 1.0 if lower_is_better else -1.0
    rows = []
    for test, names in [
        (KRUSKAL, list(samples)),
        *((WILCOXON, list(pair)) for pair in itertools.combinations(samples, 2)),
    ]:
        data = [samples[name] for name in names]
        worse = max(names, key=lambda name: sign * samples[name].mean())
        row = {"test": test, "groups": ",".join(names), "n": sum(map(len, data)), "worse": worse, "note": ""}
        if np.ptp(np.concatenate(data)) == 0:
            row.update(statistic=np.nan, p=1.0, worse="", note="constant")
        elif test == KRUSKAL:
            result = stats.kruskal(*data)
            row.update(statistic=float(result.statistic), p=float(result.pvalue))
        else:
            result = stats.mannwhitneyu(*data, alternative="two-sided")
            row.update(statistic=float(result.statistic), p=float(result.pvalue))
        rows.append(row)
    return rows


def scoped_tests(
    frame: pd.DataFrame,
    metrics: Sequence[str],
    order: Sequence[str],
    *,
    unit: str,
    scopes: Sequence[str] = (),
    group: str = "group",
    alpha: float = 0.05,
    lower_is_better: Collection[str] = (),
) -> pd.DataFrame:
    """:func:`group_tests` of every metric, pooled and per value of each column in ``scopes``, on per-``unit``
    means (:func:`unit_means`), Holm-corrected over the whole table.

    Columns: ``test, metric, scope, scope_value, groups, n, statistic, p, p_holm, significant, worse, note``.
    """
    rows = []
    for scope in ("pooled", *scopes):
        by = [] if scope == "pooled" else [scope]
        means = unit_means(frame, metrics, unit, by, group)
        parts = [("all", means)] if scope == "pooled" else list(means.groupby(scope, sort=False))
        for value, part in parts:
            for metric in metrics:
                rows += [
                    {"metric": metric, "scope": scope, "scope_value": str(value), **row}
                    for row in group_tests(part, metric, order, group=group, lower_is_better=metric in lower_is_better)
                ]
    columns = [
        "test",
        "metric",
        "scope",
        "scope_value",
        "groups",
        "n",
        "statistic",
        "p",
        "p_holm",
        "significant",
        "worse",
        "note",
    ]
    tests = pd.DataFrame(rows, columns=columns)
    tests["p_holm"], rejected = holm(tests["p"].to_numpy(float), alpha)
    scopes = list(tests[["metric", "scope", "scope_value"]].itertuples(index=False, name=None))
    kruskal = {
        scope for scope, test, reject in zip(scopes, tests["test"], rejected, strict=True) if test == KRUSKAL and reject
    }
    tests["significant"] = rejected & np.array([scope in kruskal for scope in scopes], dtype=bool)
    return tests


def holm(p: np.ndarray, alpha: float = 0.05) -> tuple[np.ndarray, np.ndarray]:
    """Holm-adjusted p-values and rejections at family-wise error rate ``alpha`` (NaN p-values are left out of
    the family and stay NaN, not rejected)."""
    p = np.asarray(p, dtype=float)
    adjusted, rejected = np.full(p.shape, np.nan), np.zeros(p.shape, dtype=bool)
    finite = np.isfinite(p)
    if finite.any():
        rejected[finite], adjusted[finite] = multipletests(p[finite], alpha=alpha, method="holm")[:2]
    return adjusted, rejected


def odds_ratios(
    frame: pd.DataFrame,
    outcome: str,
    order: Sequence[str],
    *,
    cluster: str,
    fixed: Sequence[str] = (),
    group: str = "group",
    level: float = 0.95,
) -> pd.DataFrame:
    """Odds ratios of ``outcome`` (0/1) of each group against the first group of ``order``.

    A logistic regression (binomial GLM) of ``outcome`` on group dummies plus fixed effects of every combination
    of the ``fixed`` columns (e.g. corruption x severity); standard errors clustered by ``cluster`` (e.g. the
    source image). Cells whose outcome is constant carry no information on the group effect (their own effect
    diverges) and are dropped first. OR > 1: the group's odds of the outcome are higher than the reference's.
    Columns: ``outcome, group, reference, odds_ratio, ci_low, ci_high, p, n, n_clusters, note``.
    """
    reference, others = order[0], list(order[1:])
    data = frame[frame[group].isin(order)].copy()
    data["_cell"] = data.groupby(list(fixed), sort=False).ngroup() if fixed else 0
    data = data[data.groupby("_cell")[outcome].transform("nunique") > 1]
    groups = set(data[group])
    note = _unidentified(data, outcome, group, reference, groups)
    rows = {
        other: {"note": note or ("" if other in groups else f"no informative record of {other}")} for other in others
    }
    for other in others:
        if not rows[other]["note"] and data.loc[data[group] == other, outcome].nunique() < 2:
            rows[other]["note"] = f"perfect separation: {outcome} of {other} is constant"
    fitted = [other for other in others if not rows[other]["note"]]
    if fitted:
        data = data[data[group].isin([reference, *fitted])]
        estimates, failure = _fit_logit(data, outcome, group, fitted, cluster, level)
        for other in fitted:
            rows[other] = estimates.get(other, {"note": failure})
    return pd.DataFrame(
        [{"outcome": outcome, "group": other, "reference": reference, **_NAN, **rows[other]} for other in others],
        columns=["outcome", "group", "reference", *_NAN, "note"],
    )


_NAN = {"odds_ratio": np.nan, "ci_low": np.nan, "ci_high": np.nan, "p": np.nan, "n": 0, "n_clusters": 0}


def _unidentified(data: pd.DataFrame, outcome: str, group: str, reference: str, groups: set) -> str:
    """Why no odds ratio can be estimated at all ('' if one can)."""
    if data.empty:
        return f"{outcome} is constant within every cell"
    if reference not in groups:
        return f"no informative record of the reference group {reference}"
    if data.loc[data[group] == reference, outcome].nunique() < 2:
        return f"perfect separation: {outcome} of the reference group {reference} is constant"
    return ""


def _fit_logit(
    data: pd.DataFrame, outcome: str, group: str, others: list[str], cluster: str, level: float
) -> tuple[dict, str]:
    """({group: estimate row}, '') of the clustered logistic regression, or ({}, why it failed)."""
    design = pd.concat(
        [
            pd.get_dummies(data[group]).reindex(columns=others, fill_value=False),
            pd.get_dummies(data["_cell"], prefix="cell", drop_first=True),
        ],
        axis=1,
    ).astype(float)
    design.insert(0, "const", 1.0)
    clusters = pd.factorize(data[cluster])[0]
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error", PerfectSeparationWarning)
            warnings.simplefilter("error", ConvergenceWarning)
            fit = sm.GLM(data[outcome].astype(float), design, family=sm.families.Binomial()).fit(
                cov_type="cluster", cov_kwds={"groups": clusters}
            )
    except (PerfectSeparationWarning, ConvergenceWarning, np.linalg.LinAlgError, ValueError) as error:
        return {}, f"logistic regression failed: {type(error).__name__}: {str(error).splitlines()[0]}"
    ci = np.exp(fit.conf_int(alpha=1 - level))
    estimates = {}
    for other in others:
        estimate = {
            "odds_ratio": float(np.exp(fit.params[other])),
            "ci_low": float(ci.loc[other, 0]),
            "ci_high": float(ci.loc[other, 1]),
            "p": float(fit.pvalues[other]),
            "n": len(data),
            "n_clusters": int(clusters.max()) + 1,
            "note": "",
        }
        if not np.isfinite([estimate["ci_low"], estimate["ci_high"], estimate["odds_ratio"]]).all():
            estimate = {"note": "logistic regression gave a non-finite estimate (quasi-separation)"}
        estimates[other] = estimate
    return estimates, ""
