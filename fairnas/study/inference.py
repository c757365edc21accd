"""The statistics behind a study's verdicts: per claim a one-sided paired t-test *and* an exact sign-flip test,
Holm's correction over the primary claims (each test's family of p-values on its own), the level every claim is
planned at, the fewest seeds at which a claim can hold at that level, the minimum detectable effect, and a
noncentral-t interval of the standardised effect.

Every claim of a study is a paired comparison over training seeds: the differences ``model - baseline`` of one
metric, one per seed both ran, and the claim says the metric is *lower* (the mean difference is negative). It is
tested twice:

- scipy's one-sided one-sample t-test of the differences (df = n - 1), whose two-sided 95 % t-interval of the mean
  difference is the interval reported;
- the exact sign-flip (permutation) test of the same mean (scipy's ``permutation_test``, ``permutation_type=
  "samples"``: under H0 each difference is as likely to carry either sign, so all 2^n sign patterns are enumerated).
  It does not lean on the normal model, which matters at the few seeds a study affords: p = k / 2^n, so with all n
  differences pointing the claimed way it is 2^-n and never smaller.

A claim holds when both reject (each with Holm's adjusted p for the primary family, unadjusted for an exploratory
claim); requiring both keeps either test's error-rate guarantee, and the sign-flip test's holds without the normal
model.

**The plan level.** Detectable effects, powers and the seed floor are stated at a level fixed before the data:
:func:`plan_level`, ``alpha / m`` for a primary family of ``m`` claims (Bonferroni's level, which is Holm's first,
strictest step and the only one reached unconditionally) and ``alpha`` for an exploratory claim. It depends on the
plan (``alpha``, the family's size) and never on the p-values a study happens to observe (a claim's observed Holm
step would make its stated power depend on the data).

**The seed floor.** With ``n`` seeds the sign-flip test's smallest p is 2^-n, so it can reject at ``level`` only when
2^-n < level: :func:`min_seeds` gives n_min(level) = floor(log2(1 / level)) + 1, and for the primary family
n_min = floor(log2(m / alpha)) + 1 (:func:`family_min_seeds`: 5 seeds at alpha 0.05 for a single claim, 8 for a
family of 7 or 8). Below it no verdict is given (*too few seeds*): the t-test alone could reach any p there (two
seeds whose differences happen to agree), only by trusting the normal model.

**Zero variance.** A difference that is the same in every seed (a run that reproduces its baseline bit for bit) has
no spread: such a test is *degenerate* (:data:`ZERO_VARIANCE`): no interval, no standardised effect of finite size
and no detectable effect are reported, not an interval [c, c] of infinite precision. Its t-test p is the t
statistic's limit (0 for a decrease, 1 otherwise) and its sign-flip p is exact (2^-n for a decrease, 1 otherwise).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence

import numpy as np
from scipy import optimize, stats
from statsmodels.stats.multitest import multipletests
from statsmodels.stats.power import TTestPower

CONFIDENCE = 0.95
"""The coverage of the reported interval of an effect (two-sided)."""
EXACT_UP_TO = 16
"""The most seeds whose 2^n sign patterns :func:`sign_flip_p` enumerates; beyond, it draws
:data:`SIGN_FLIP_DRAWS` patterns with a fixed generator (random but repeatable)."""
SIGN_FLIP_DRAWS = 200_000
TESTED, ZERO_VARIANCE, ONE_SEED, NO_SEEDS = "tested", "degenerate: zero variance", "one seed", "no paired seeds"
"""The status of a :class:`PairedTest`: what its statistics can say."""


@dataclasses.dataclass(frozen=True)
class PairedTest:
    """The one-sided paired tests of ``differences`` (model - baseline per seed) for a claimed decrease."""

    n: int
    effect: float
    """The mean difference (negative: the claimed direction)."""
    ci_low: float
    ci_high: float
    """The two-sided 95 % t-interval of the mean difference; NaN below two seeds and for zero variance."""
    sd: float
    """The s.d. of the differences (ddof 1); the unit of the standardised effect d_z = effect / sd."""
    p: float
    """One-sided t-test p of H0: mean difference >= 0 against H1: < 0; NaN below two seeds."""
    p_exact: float = math.nan
    """The exact one-sided sign-flip p of the same hypotheses; NaN below two seeds."""

    @property
    def status(self) -> str:
        """:data:`TESTED`, or why the statistics say less: :data:`ZERO_VARIANCE`, :data:`ONE_SEED`, :data:`NO_SEEDS`."""
        if self.n == 0:
            return NO_SEEDS
        if self.n == 1:
            return ONE_SEED
        return ZERO_VARIANCE if self.sd == 0 else TESTED

    @property
    def d_z(self) -> float:
        """The effect in the claimed direction in units of the differences' s.d. (Cohen's d_z); for zero variance the
        limit, +inf (a decrease in every seed) or -inf, and NaN for no difference at all."""
        if self.n < 2 or math.isnan(self.sd):
            return math.nan
        if self.sd == 0:
            return -math.copysign(math.inf, self.effect) if self.effect else math.nan
        return -self.effect / self.sd


def sign_flip_p(values: np.ndarray) -> float:
    """The one-sided p of the sign-flip test of a decrease: the share of the 2^n sign patterns of ``values`` whose
    mean is at most the observed one (scipy's ``permutation_test`` with ``permutation_type="samples"``, which flips
    the signs of a single sample; exact up to :data:`EXACT_UP_TO` values)."""
    exact = len(values) <= EXACT_UP_TO
    result = stats.permutation_test(
        (values,),
        np.mean,
        permutation_type="samples",
        vectorized=True,
        n_resamples=np.inf if exact else SIGN_FLIP_DRAWS,
        batch=2**14,
        alternative="less",
        rng=None if exact else np.random.default_rng(0),
    )
    return float(result.pvalue)


def paired_test(differences: Sequence[float] | np.ndarray) -> PairedTest:
    """The tests of a claimed decrease from the paired ``differences``. A constant difference (no spread beyond float
    rounding, e.g. a run that reproduces its baseline) is :data:`ZERO_VARIANCE`: no interval, its t-test p the t
    statistic's limit (0 below zero, 1 at or above it; scipy's is undefined, or an artefact of the rounding), its
    sign-flip p exact; scipy's p everywhere else."""
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
        p = 0.0 if mean < 0 else 1.0
        return PairedTest(n, mean, math.nan, math.nan, 0.0, p, 2.0**-n if mean < 0 else 1.0)
    sd = float(values.std(ddof=1))
    low, high = stats.ttest_1samp(values, 0.0).confidence_interval(CONFIDENCE)
    p = float(stats.ttest_1samp(values, 0.0, alternative="less").pvalue)
    return PairedTest(n, mean, float(low), float(high), sd, p, sign_flip_p(values))


def intersection_union(tests: Sequence[PairedTest]) -> int:
    """The index of the test that decides a claim that *all* of ``tests`` point the claimed way (the
    intersection-union test: the claim holds at level alpha when every one-sided test does, so its p is the
    largest; a missing p counts as the largest). Ranked by the t-test's p; the claim's sign-flip p is the largest
    of the tests' own (:func:`fairnas.study.claims.dominance`)."""
    return max(range(len(tests)), key=lambda index: math.inf if math.isnan(tests[index].p) else tests[index].p)


def plan_level(alpha: float, family_size: int = 1) -> float:
    """The level a claim is planned at, fixed before the data: ``alpha / m`` for a family of ``m`` claims whose
    family-wise error rate Holm's method holds at ``alpha`` (Bonferroni's level: Holm's first step, the strictest,
    and the only one a claim reaches whatever the other claims' p-values), ``alpha`` for a claim of its own."""
    return alpha / max(1, family_size)


def min_seeds(level: float) -> int:
    """The fewest seeds at which a claim can hold at ``level``: n_min = floor(log2(1 / level)) + 1, the smallest n
    with 2^-n < level (a test rejects when p < level), since the sign-flip test's smallest p is 2^-n. A necessary
    condition, not a sufficient one: 5 at 0.05, 7 at 0.01."""
    return max(2, math.floor(math.log2(1 / level)) + 1)


def family_min_seeds(alpha: float, family_size: int) -> int:
    """The seed floor of a claim in a Holm family of ``family_size`` (m) claims held at ``alpha``: the fewest seeds
    at which it can hold at the family's first step, n_min = floor(log2(m / alpha)) + 1 (:func:`min_seeds` at
    :func:`plan_level`): 8 for m = 7 at alpha 0.05, where 2^-7 = 0.0078 is not below 0.05 / 7 = 0.0071."""
    return min_seeds(plan_level(alpha, family_size))


def holm(p_values: Sequence[float], alpha: float) -> list[float]:
    """Holm-adjusted p-values of one family (statsmodels' ``multipletests(method="holm")``); a missing p (fewer than
    two seeds) enters as 1."""
    if not p_values:
        return []
    filled = np.nan_to_num(np.asarray(p_values, dtype=float), nan=1.0)
    return [float(value) for value in multipletests(filled, alpha=alpha, method="holm")[1]]


def minimum_detectable_effect(n: int, sd: float, level: float, power: float) -> float:
    """The smallest true decrease (in the metric's units) that a one-sided paired t-test of ``n`` seeds detects
    with probability ``power`` at ``level``, given differences of s.d. ``sd`` (statsmodels' ``TTestPower``). NaN
    below two seeds, without an s.d. or with zero variance (no spread to scale by); +inf below :func:`min_seeds`
    at ``level``, where the sign-flip test cannot reject whatever the effect. Above it this is the t-test's, a lower
    bound for the pair of tests (the sign-flip test must reject too)."""
    if n < 2 or math.isnan(sd) or sd == 0:
        return math.nan
    if n < min_seeds(level):
        return math.inf
    d = TTestPower().solve_power(effect_size=None, nobs=n, alpha=level, alternative="larger", power=power)
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


def d_z_interval(d_z: float, n: int, confidence: float = CONFIDENCE) -> tuple[float, float]:
    """The two-sided ``confidence`` interval of a standardised paired effect d_z (in the claimed direction), from the
    noncentral t distribution: the observed t = d_z sqrt(n) has df = n - 1 and noncentrality delta = d_z_true
    sqrt(n), so the interval's ends are the deltas at which the observed t is the upper and the lower
    (1 - confidence) / 2 quantile (``scipy.stats.nct``'s CDF inverted in delta with ``scipy.optimize.brentq``),
    divided by sqrt(n). Unlike (mean interval) / s.d., it carries the uncertainty of the s.d. as well. Steiger &
    Fouladi (1997), "Noncentrality interval estimation and the evaluation of statistical models", in *What if there
    were no significance tests?*; Cumming & Finch (2001), "A primer on the understanding, use, and calculation of
    confidence intervals that are based on central and noncentral distributions", Educ. Psychol. Meas. 61(4).
    (NaN, NaN) below two seeds and for an infinite or missing d_z (zero variance)."""
    if n < 2 or not math.isfinite(d_z):
        return math.nan, math.nan
    t, df, tail = d_z * math.sqrt(n), n - 1, (1 - confidence) / 2

    def delta(quantile: float) -> float:
        def excess(value: float) -> float:
            cdf = float(stats.nct.cdf(t, df, value))
            if math.isnan(cdf):  # far in a tail, where scipy's series can fail: its limit
                cdf = 0.0 if value > t else 1.0
            return cdf - quantile

        # the CDF falls with delta: bracket the root by widening around t, by about two s.d. of t at first
        width = 2 * math.sqrt(1 + t * t / (2 * df))
        low, high = t - width, t + width
        while excess(low) < 0:
            low -= width
            width *= 2
        while excess(high) > 0:
            high += width
            width *= 2
        return float(optimize.brentq(excess, low, high, xtol=1e-10))

    root_n = math.sqrt(n)
    return delta(1 - tail) / root_n, delta(tail) / root_n
