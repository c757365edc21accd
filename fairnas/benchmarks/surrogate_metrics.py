"""What a surrogate (:mod:`fairnas.benchmarks.surrogate`) models of a table's runs, and how each objective follows
from it, with the exact moments of the objective a simulated run reports (docs/search_benchmark.md,
"Version 2: runs that look like real runs").

A table's objectives are not independent numbers: in every run, error is the mean of the two groups' errors,
accuracy disparity their gap, and rank disparity the absolute gap between the groups' mean ranks (docs/metrics.md).
So where the table has the groups' columns, the surrogate models the *channels* those objectives are made of
(:func:`modelled`): the error m (the mean of the groups'), the signed gap between the groups' errors
d = ``error/g0 - error/g1``, and the signed rank gap g = ``rank/g0 - rank/g1``. A run's objectives are derived
from its channels, keeping the table's identities exactly:

- the groups' errors e0 = c(m + d/2) and e1 = c(m - d/2), clipped (c) to [0, 1]: ``error/g0``, ``error/g1``;
- ``error`` = (e0 + e1) / 2 and ``disparity`` = |e0 - e1|;
- ``rank_disparity`` = |g|.

An objective without its groups' columns (a table that lacks them) is its own channel, clipped to its bounds.

A channel's value is normal around its mean, so the objectives' expectations (:func:`expectations`) are exact:
a clipped normal's moments in closed form, the folded normal's for rank disparity (a fair configuration's gap
averages to 0, its rank disparity does not), and for the pair of group errors a quadrature over one group's error
of the other's closed-form conditional moments. So a surrogate's truth is what its runs report on average, clipping
included.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from scipy.special import ndtr

GROUPS = ("g0", "g1")
ERROR_GAP = "error_gap"
"""The channel of the signed gap between the groups' errors, ``error/g0 - error/g1`` (``<split>/error_gap``)."""
RANK_GAP = "rank_gap"
"""The channel of the signed gap between the groups' mean ranks, ``rank/g0 - rank/g1`` (``<split>/rank_gap``)."""
SHARE_METRICS = ("error", "disparity", "error/g0", "error/g1")
"""Metrics that are shares of probes, so a value lies in [0, 1]."""
QUADRATURE_NODES = 32
"""Gauss-Legendre nodes of each piece of the quadrature over one group's error (:func:`pair_moments`)."""
QUADRATURE_RANGE = 8.0
"""How many standard deviations either side of its mean the quadrature over one group's error covers (the mass
beyond is below 1e-15)."""
PAIRED = ("mean", "gap", "g0", "g1")
"""The derivations from the error m and the groups' error gap d."""


@dataclass(frozen=True)
class Derivation:
    """How one objective follows from the channels: ``value`` (the clipped channel), ``absolute`` (the absolute value
    of a channel), or, from the channels (m, d), ``g0`` or ``g1`` (a group's clipped error), ``mean`` or ``gap``
    (the mean or the absolute difference of the two)."""

    kind: str
    channels: tuple[int, ...]


@dataclass(frozen=True)
class Modelled:
    """The channels a surrogate models (names as the table's columns without the split, e.g. ``val/error`` or
    ``rank_gap``) and each objective's :class:`Derivation`."""

    objectives: tuple[str, ...]
    channels: tuple[str, ...]
    derivations: tuple[Derivation, ...]

    @property
    def absolute(self) -> list[int]:
        """The objectives that are the absolute value of a channel (rank disparity from the signed rank gap)."""
        return [index for index, derivation in enumerate(self.derivations) if derivation.kind == "absolute"]

    @property
    def bounds(self) -> np.ndarray:
        """[lower or upper, channel]: the range a ``value`` channel is clipped to."""
        return np.array([bounds(name) for name in self.channels]).T

    def error_level(self, means: np.ndarray) -> np.ndarray:
        """[..., epoch]: the error of channel means [..., epoch, channel] (the channel of the first objective named
        ``error``), or an empty last axis where no objective is an error."""
        for name, derivation in zip(self.objectives, self.derivations, strict=True):
            if _metric(name)[1] == "error":
                return means[..., derivation.channels[0]]
        return np.zeros(means.shape[:-2] + (0,))

    def derive(self, channels: np.ndarray) -> np.ndarray:
        """[..., objective]: the objectives of runs' channel values [..., channel] (the module docstring)."""
        low, high = self.bounds
        columns = []
        for derivation in self.derivations:
            values = channels[..., list(derivation.channels)]
            if derivation.kind in PAIRED:
                first = np.clip(values[..., 0] + values[..., 1] / 2, 0.0, 1.0)
                second = np.clip(values[..., 0] - values[..., 1] / 2, 0.0, 1.0)
                columns.append(
                    {"mean": (first + second) / 2, "gap": np.abs(first - second), "g0": first, "g1": second}[
                        derivation.kind
                    ]
                )
            elif derivation.kind == "absolute":
                columns.append(np.abs(values[..., 0]))
            else:
                (channel,) = derivation.channels
                columns.append(np.clip(values[..., 0], low[channel], high[channel]))
        return np.stack(columns, axis=-1)


def bounds(channel: str) -> tuple[float, float]:
    """The range of a channel's value: [0, 1] for a share of probes, unbounded for a signed gap, [0, inf)
    otherwise (a rank disparity modelled as itself)."""
    metric = _metric(channel)[1]
    if metric in (RANK_GAP, ERROR_GAP):
        return -np.inf, np.inf
    return (0.0, 1.0) if metric in SHARE_METRICS else (0.0, np.inf)


def modelled(objectives: Sequence[str], columns: Sequence[str], split: str | None = "val") -> Modelled:
    """The channels of ``objectives`` (names without the split, or whole column names with ``split=None``) given a
    table's ``columns`` (the module docstring): the groups' columns where the table has them, else the objective."""
    prefix = f"{split}/" if split else ""
    available = set(columns)
    channels: list[str] = []
    derivations = []

    def channel(name: str) -> int:
        if name not in channels:
            channels.append(name)
        return channels.index(name)

    for name in objectives:
        head, metric = _metric(name)
        groups = {prefix + f"{head}{kind}/{group}" for kind in ("error",) for group in GROUPS} | {
            prefix + head + "error"
        }
        ranks = {prefix + f"{head}rank/{group}" for group in GROUPS}
        if metric in ("error", "disparity", "error/g0", "error/g1") and groups <= available:
            kind = {"error": "mean", "disparity": "gap"}.get(metric, metric.rpartition("/")[2])
            derivations.append(Derivation(kind, (channel(head + "error"), channel(head + ERROR_GAP))))
        elif metric == "rank_disparity" and ranks <= available:
            derivations.append(Derivation("absolute", (channel(head + RANK_GAP),)))
        else:
            derivations.append(Derivation("value", (channel(name),)))
    return Modelled(tuple(objectives), tuple(channels), tuple(derivations))


def channel_column(table_columns: Sequence[str], channel: str, split: str | None) -> str | tuple[str, str]:
    """The table column of a channel, or the two group columns whose difference is a signed gap."""
    prefix = f"{split}/" if split else ""
    head, metric = _metric(channel)
    if metric in (RANK_GAP, ERROR_GAP):
        kind = "rank" if metric == RANK_GAP else "error"
        return tuple(f"{prefix}{head}{kind}/{group}" for group in GROUPS)  # type: ignore[return-value]
    return prefix + channel


def _metric(name: str) -> tuple[str, str]:
    """A name's split part (``val/`` or empty) and its metric (``error/g0``, ``rank_disparity``, ...)."""
    for metric in ("error/g0", "error/g1", "rank_disparity", RANK_GAP, ERROR_GAP, "disparity", "error"):
        if name == metric or name.endswith("/" + metric):
            return name[: len(name) - len(metric)], metric
    head, _, metric = name.rpartition("/")
    return (head + "/" if head else ""), metric


def expectations(
    modelled: Modelled, mean: np.ndarray, sd: np.ndarray, correlation: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """The mean and the s.d. [..., objective] of the objectives of a run whose channels [..., channel] are normal
    with ``mean`` and ``sd`` and, between channels, ``correlation`` [..., channel, channel] (the module docstring)."""
    low, high = modelled.bounds
    means, sds = [], []
    pairs: dict[tuple[int, ...], tuple[np.ndarray, ...]] = {}
    for derivation in modelled.derivations:
        channels = derivation.channels
        if derivation.kind in PAIRED:
            if channels not in pairs:
                pairs[channels] = _group_moments(mean, sd, correlation, *channels)
            first0, second0, first1, second1, product, gap = pairs[channels]
            expected, square = {
                "mean": ((first0 + first1) / 2, (second0 + second1 + 2 * product) / 4),
                "gap": (gap, second0 + second1 - 2 * product),
                "g0": (first0, second0),
                "g1": (first1, second1),
            }[derivation.kind]
        elif derivation.kind == "absolute":
            location, spread = mean[..., channels[0]], sd[..., channels[0]]
            expected, square = folded_mean(location, spread), location**2 + spread**2
        else:
            (channel,) = channels
            expected, square = clipped_moments(mean[..., channel], sd[..., channel], low[channel], high[channel])
        means.append(expected)
        sds.append(np.sqrt(np.maximum(square - expected**2, 0.0)))
    return np.stack(means, axis=-1), np.stack(sds, axis=-1)


def _group_moments(mean, sd, correlation, error: int, gap: int) -> tuple[np.ndarray, ...]:
    """E[e0], E[e0^2], E[e1], E[e1^2], E[e0 e1] and E|e0 - e1| of the clipped group errors e0, e1 = c(m +- d/2)
    from the normal channels m (``error``) and d (``gap``)."""
    mean_m, mean_d, sd_m, sd_d = mean[..., error], mean[..., gap], sd[..., error], sd[..., gap]
    covariance = correlation[..., error, gap] * sd_m * sd_d
    common, half = sd_m**2 + sd_d**2 / 4, sd_d**2 / 4
    sd0, sd1 = np.sqrt(np.maximum(common + covariance, 0.0)), np.sqrt(np.maximum(common - covariance, 0.0))
    rho = (sd_m**2 - half) / np.maximum(sd0 * sd1, 1e-300)
    mean0, mean1 = mean_m + mean_d / 2, mean_m - mean_d / 2
    first0, second0 = clipped_moments(mean0, sd0, 0.0, 1.0)
    first1, second1 = clipped_moments(mean1, sd1, 0.0, 1.0)
    product, absolute = pair_moments(mean0, sd0, mean1, sd1, rho, (0.0, 1.0))
    return first0, second0, first1, second1, product, absolute


def _phi(z: np.ndarray) -> np.ndarray:
    """The standard normal density, 0 at infinite ``z``."""
    return np.exp(-0.5 * np.square(np.clip(z, -40.0, 40.0))) / np.sqrt(2 * np.pi) * np.isfinite(z)


def _partial(mean: np.ndarray, sd: np.ndarray, lower, upper) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """P(l < X < u), E[X 1{l < X < u}] and E[X^2 1{l < X < u}] of X ~ N(mean, sd^2) (sd > 0)."""
    alpha, beta = (lower - mean) / sd, (upper - mean) / sd
    probability = ndtr(beta) - ndtr(alpha)
    density = _phi(alpha) - _phi(beta)
    tails = np.where(np.isfinite(alpha), alpha, 0.0) * _phi(alpha) - np.where(np.isfinite(beta), beta, 0.0) * _phi(beta)
    first = mean * probability + sd * density
    second = (mean**2 + sd**2) * probability + 2 * mean * sd * density + sd**2 * tails
    return probability, first, second


def clipped_moments(mean, sd, lower, upper) -> tuple[np.ndarray, np.ndarray]:
    """E[c(X)] and E[c(X)^2] of X ~ N(mean, sd^2) clipped to [lower, upper] (either may be infinite)."""
    mean, sd = np.asarray(mean, float), np.maximum(np.asarray(sd, float), 1e-300)
    lower, upper = np.broadcast_to(lower, mean.shape), np.broadcast_to(upper, mean.shape)
    _, first, second = _partial(mean, sd, lower, upper)
    below, above = ndtr((lower - mean) / sd), 1 - ndtr((upper - mean) / sd)
    finite_low, finite_high = np.where(np.isfinite(lower), lower, 0.0), np.where(np.isfinite(upper), upper, 0.0)
    return (
        first + finite_low * below + finite_high * above,
        second + finite_low**2 * below + finite_high**2 * above,
    )


def folded_mean(mean, sd) -> np.ndarray:
    """E|X| of X ~ N(mean, sd^2): the folded normal's mean."""
    mean, sd = np.asarray(mean, float), np.maximum(np.asarray(sd, float), 1e-300)
    return sd * np.sqrt(2 / np.pi) * np.exp(-0.5 * (mean / sd) ** 2) + mean * (1 - 2 * ndtr(-mean / sd))


def folded_location(expected, sd, steps: int = 30) -> np.ndarray:
    """The |mean| >= 0 of X ~ N(mean, sd^2) whose E|X| is ``expected``: Newton's method on the folded normal's mean,
    convex and increasing in |mean| (from the right, so it converges monotonically); 0 where ``expected`` is below
    E|X| at mean 0, sd sqrt(2 / pi), which no location reaches."""
    expected, sd = np.asarray(expected, float), np.maximum(np.asarray(sd, float), 1e-300)
    target = expected / sd
    x = np.maximum(target, 0.0)
    for _ in range(steps):
        x = np.maximum(x - (folded_mean(x, 1.0) - target) / np.maximum(1 - 2 * ndtr(-x), 1e-12), 0.0)
    return np.where(target > np.sqrt(2 / np.pi), x, 0.0) * sd


def pair_moments(mean0, sd0, mean1, sd1, correlation, bounds: tuple[float, float]) -> tuple[np.ndarray, np.ndarray]:
    """E[c(X0) c(X1)] and E|c(X0) - c(X1)| of a bivariate normal pair clipped to ``bounds`` (both finite): the
    closed-form moments of X0 given X1, integrated over X1 by Gauss-Legendre quadrature (:data:`QUADRATURE_NODES`
    nodes) on each piece of [-8, 8] standard deviations between the points where X1 meets a bound, so that every
    piece's integrand is smooth."""
    lower, upper = bounds
    mean0, sd0, mean1, sd1, rho = (
        np.asarray(value, float)[..., None] for value in (mean0, sd0, mean1, sd1, correlation)
    )
    rho = np.clip(rho, -1.0, 1.0)
    nodes, weights = _pieces(mean1, np.maximum(sd1, 1e-300), lower, upper)
    given = np.clip(mean1 + sd1 * nodes, lower, upper)  # c(X1) at each node
    conditional_mean = mean0 + rho * sd0 * nodes
    conditional_sd = np.maximum(sd0 * np.sqrt(1 - rho**2), 1e-300)
    first, _ = clipped_moments(conditional_mean, conditional_sd, lower, upper)
    # E|c(X0) - y| for y = c(X1) in [lower, upper]: the parts of X0 above and below y, clipping counted at the bounds
    above_probability, above_first, _ = _partial(conditional_mean, conditional_sd, given, upper)
    below_probability, below_first, _ = _partial(conditional_mean, conditional_sd, lower, given)
    beyond_upper = 1 - ndtr((upper - conditional_mean) / conditional_sd)
    beyond_lower = ndtr((lower - conditional_mean) / conditional_sd)
    absolute = (
        above_first
        - given * above_probability
        + (upper - given) * beyond_upper
        + given * below_probability
        - below_first
        + (given - lower) * beyond_lower
    )
    return (weights * given * first).sum(axis=-1), (weights * absolute).sum(axis=-1)


def _pieces(mean: np.ndarray, sd: np.ndarray, lower: float, upper: float) -> tuple[np.ndarray, np.ndarray]:
    """Standardised nodes and weights (density included, summing to 1) of the quadrature of :func:`pair_moments`:
    [-R, R] cut where X = mean + sd t meets ``lower`` and ``upper``, each piece with its own Gauss-Legendre nodes."""
    unit, unit_weights = np.polynomial.legendre.leggauss(QUADRATURE_NODES)
    cuts = np.clip(
        np.concatenate([(lower - mean) / sd, (upper - mean) / sd], axis=-1), -QUADRATURE_RANGE, QUADRATURE_RANGE
    )
    edges = np.sort(
        np.concatenate([np.full_like(mean, -QUADRATURE_RANGE), cuts, np.full_like(mean, QUADRATURE_RANGE)], axis=-1),
        axis=-1,
    )
    start, width = edges[..., :-1, None], np.diff(edges, axis=-1)[..., None]  # [..., piece, 1]
    nodes = start + width * (unit + 1) / 2
    weights = width / 2 * unit_weights * _phi(nodes)
    shape = nodes.shape[:-2] + (-1,)
    weights = weights.reshape(shape)
    return nodes.reshape(shape), weights / weights.sum(axis=-1, keepdims=True)
