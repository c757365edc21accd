"""The statistics behind a study's verdicts: a one-sided paired t-test per claim, Holm's correction over the
primary claims, the minimum detectable effect, and the fewest seeds at which a claim can hold at all.

Every claim of a study is a paired comparison over training seeds: the differences ``model - baseline`` of one
metric, one per seed both ran, and the claim says the metric is *lower* (the mean difference is negative). Its test is
scipy's one-sided one-sample t-test of the differences (df = n - 1), its interval the two-sided 95 % t-interval of
the mean difference. The primary claims (the paper's own) form one family whose family-wise error rate is held at the
study's alpha by Holm's step-down method (statsmodels' ``multipletests``); the exploratory ones are reported with
their unadjusted p. A claim with ``n`` seeds cannot hold below :func:`min_seeds`: with n seeds, all n differences
pointing the claimed way happen by chance with probability 2^-n even when nothing differs, so no test that does not
lean on the normal model can reach the level alpha with fewer than log2(1 / alpha) seeds (5 at alpha = 0.05). The
t-test can (two seeds whose differences happen to agree give any p), which is why such a verdict reads *too few
seeds* instead.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence

import numpy as np
from scipy import stats
from statsmodels.stats.multitest import multipletests
from statsmodels.stats.power import TTestPower

CONFIDENCE = 0.95
"""The coverage of the reported interval of an effect (two-sided)."""


@dataclasses.dataclass(frozen=True)
class PairedTest:
    """The one-sided paired t-test of ``differences`` (model - baseline per seed) for a claimed decrease."""

    n: int
    effect: float
    """The mean difference (negative: the claimed direction)."""
    ci_low: float
    ci_high: float
    sd: float
    """The s.d. of the differences (ddof 1); the unit of the standardised effect d_z = effect / sd."""
    p: float
    """One-sided p of H0: mean difference >= 0 against H1: < 0; NaN below two seeds."""

    @property
    def d_z(self) -> float:
        """The effect in the claimed direction in units of the differences' s.d. (Cohen's d_z; +inf for a constant
        difference of the claimed sign)."""
        if self.n < 2 or math.isnan(self.sd):
            return math.nan
        if self.sd == 0:
            return -math.copysign(math.inf, self.effect) if self.effect else 0.0
        return -self.effect / self.sd


def paired_test(differences: Sequence[float] | np.ndarray) -> PairedTest:
    """The test of a claimed decrease from the paired ``differences``. A constant difference (no spread beyond float
    rounding, e.g. a run that reproduces its baseline) is decided by its sign: p = 0 below zero, 1 at or above it, as
    the t statistic's limit (scipy's is undefined, or an artefact of the rounding); scipy's p everywhere else."""
    values = np.asarray(differences, dtype=float)
    n = len(values)
    if n == 0:
        return PairedTest(0, math.nan, math.nan, math.nan, math.nan, math.nan)
    mean = float(values.mean())
    if n == 1:
        return PairedTest(1, mean, math.nan, math.nan, math.nan, math.nan)
    if np.allclose(values, values[0], rtol=1e-9, atol=1e-12):  # equal up to the rounding of the subtraction
        if np.isclose(mean, 0.0, rtol=0.0, atol=1e-12):
            mean = 0.0  # a rounding error is no decrease
        return PairedTest(n, mean, mean, mean, 0.0, 0.0 if mean < 0 else 1.0)
    sd = float(values.std(ddof=1))
    low, high = stats.ttest_1samp(values, 0.0).confidence_interval(CONFIDENCE)
    p = float(stats.ttest_1samp(values, 0.0, alternative="less").pvalue)
    return PairedTest(n, mean, float(low), float(high), sd, p)


def intersection_union(tests: Sequence[PairedTest]) -> int:
    """The index of the test that decides a claim that *all* of ``tests`` point the claimed way (the
    intersection-union test: the claim holds at level alpha when every one-sided test does, so its p is the
    largest; a missing p counts as the largest)."""
    return max(range(len(tests)), key=lambda index: math.inf if math.isnan(tests[index].p) else tests[index].p)


def min_seeds(alpha: float) -> int:
    """The fewest seeds at which a claim can hold at level ``alpha``: the smallest n with 2^-n < alpha (a test
    rejects when p < alpha). Holm tests primary claims at alpha / m .. alpha, so at alpha this is the floor below
    which no claim of a study can hold at any of its steps (a necessary condition, not a sufficient one)."""
    return max(2, math.floor(math.log2(1 / alpha)) + 1)


def holm(p_values: Sequence[float], alpha: float) -> tuple[list[float], list[float]]:
    """Holm-adjusted p-values of one family, and the level at which each claim is tested (alpha / (m - rank), rank
    0 for the smallest p). A missing p (fewer than two seeds) enters as 1."""
    if not p_values:
        return [], []
    filled = np.nan_to_num(np.asarray(p_values, dtype=float), nan=1.0)
    adjusted = multipletests(filled, alpha=alpha, method="holm")[1]
    order = np.argsort(filled, kind="stable")
    levels = np.empty(len(filled))
    levels[order] = alpha / (len(filled) - np.arange(len(filled)))
    return [float(value) for value in adjusted], [float(value) for value in levels]


def minimum_detectable_effect(n: int, sd: float, level: float, power: float) -> float:
    """The smallest true decrease (in the metric's units) that a one-sided paired t-test of ``n`` seeds detects
    with probability ``power`` at ``level``, given differences of s.d. ``sd`` (statsmodels' ``TTestPower``); NaN
    below two seeds or without an s.d."""
    if n < 2 or math.isnan(sd):
        return math.nan
    d = TTestPower().solve_power(effect_size=None, nobs=n, alpha=level, power=power, alternative="larger")
    return float(d) * sd


def seeds_for_power(d_z: float, level: float, power: float, *, at_least: int = 2, at_most: int = 100) -> int | None:
    """The fewest seeds (``at_least`` .. ``at_most``) at which a one-sided paired t-test detects a standardised
    decrease ``d_z`` with ``power`` at ``level``; None when ``at_most`` seeds do not (e.g. an effect of the wrong
    sign)."""
    if not d_z > 0:
        return None
    if math.isinf(d_z):  # the same decrease in every seed: any test with a spread to estimate detects it
        return at_least
    analysis = TTestPower()
    for n in range(at_least, at_most + 1):
        if analysis.power(effect_size=d_z, nobs=n, alpha=level, alternative="larger") >= power:
            return n
    return None
