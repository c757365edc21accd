"""Robustness-bias scores of a partition from per-sample distances to the boundary (thesis Sec. 2.3-2.4).

For an element P of a partition (a protected group, or a class) and distances d (0 when misclassified, +inf when
an upper-bound estimator found no adversarial example):

    I_P(tau)   = |{x in P : d(x) > tau}| / |P|                  (eqs. 2.4-2.6)
    RB(P, tau) = |I_P(tau) - I_notP(tau)|                       (eq. 2.2)
    sigma(P)   = AUC(I_P) - AUC(I_notP)                         (eq. 2.3; > 0: P is more robust than the rest)

The AUC is taken over tau in [0, tau_max], where it equals the mean of min(d, tau_max) over the partition element
(the integral of a survival function), so it is computed exactly rather than on a grid. tau_max defaults to the
largest finite distance of the whole set: all elements share one range and an unbounded distance counts as
tau_max (every AUC is 0 when no distance is finite and positive). The scalar robustness bias of a partition is
max_P |sigma(P)|; for two groups it is |AUC_g0 - AUC_g1|.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd


def share_beyond(distances: np.ndarray, taus: np.ndarray) -> np.ndarray:
    """I(tau): the share of ``distances`` strictly greater than each tau."""
    ordered = np.sort(np.asarray(distances, dtype=float))
    return 1.0 - np.searchsorted(ordered, np.asarray(taus, dtype=float), side="right") / len(ordered)


def clipped_auc(distances: np.ndarray, tau_max: float) -> float:
    """Area under I(tau) over [0, tau_max] = mean of min(d, tau_max)."""
    return float(np.minimum(np.asarray(distances, dtype=float), tau_max).mean())


@dataclass(frozen=True)
class RobustnessBiasReport:
    """Per-member scores (one row each) and curves (one row per member and tau) of one partition."""

    scores: pd.DataFrame
    curves: pd.DataFrame
    tau_max: float

    @property
    def robustness_bias(self) -> float:
        """max over members of |sigma(P)|."""
        return float(self.scores["sigma"].abs().max())

    def metrics(self) -> dict[str, float]:
        """``robustness_bias`` and per member ``robustness_sigma/<member>``, ``robustness_auc/<member>``."""
        metrics = {"robustness_bias": self.robustness_bias}
        for row in self.scores.itertuples():
            metrics[f"robustness_sigma/{row.member}"] = float(row.sigma)
            metrics[f"robustness_auc/{row.member}"] = float(row.auc)
        return metrics


def robustness_bias_report(
    distances: np.ndarray,
    members: Sequence[Any] | np.ndarray,
    member_order: Sequence[Any] | None = None,
    *,
    n_points: int = 101,
    tau_max: float | None = None,
) -> RobustnessBiasReport:
    """Scores and I_P curves of every member of the partition given by ``members`` (one label per distance).

    Args:
        distances: [N] non-negative distances (+inf allowed).
        members: [N] partition labels, compared as strings.
        member_order: members to report, in order (default: all, sorted); needs at least two. Samples of members
            it does not list take no part (e.g. a group outside ``data.group_order``): P's rest is the others listed.
        n_points: tau values of the curves, evenly spaced over [0, tau_max].
        tau_max: upper end of the AUC range (default: the largest finite distance).
    """
    distances = np.asarray(distances, dtype=float)
    labels = np.asarray([str(m) for m in members], dtype=object)
    if distances.ndim != 1 or len(distances) != len(labels):
        raise ValueError(f"distances {distances.shape} and members ({len(labels)}) must be 1-d of equal length")
    if np.isnan(distances).any() or (distances < 0).any():
        raise ValueError("distances must be non-negative numbers (+inf allowed), got NaN or negative values")
    order = [str(m) for m in (sorted(set(labels)) if member_order is None else member_order)]
    missing = [m for m in order if m not in set(labels)]
    if missing or len(order) < 2:
        raise ValueError(
            f"robustness bias needs >= 2 partition members with samples; members {order}, without samples {missing}"
        )
    if n_points < 2:
        raise ValueError(f"n_points={n_points} must be >= 2")
    listed = np.isin(labels, order)
    distances, labels = distances[listed], labels[listed]
    if tau_max is None:
        finite = distances[np.isfinite(distances)]
        tau_max = float(finite.max()) if finite.size else 0.0
    taus = np.linspace(0.0, tau_max, n_points)

    scores, curves = [], []
    for member in order:
        in_member = labels == member
        inside, rest = distances[in_member], distances[~in_member]
        auc, auc_rest = clipped_auc(inside, tau_max), clipped_auc(rest, tau_max)
        scores.append(
            {
                "member": member,
                "n": int(in_member.sum()),
                "share_zero": float((inside == 0).mean()),
                "share_unbounded": float(np.isinf(inside).mean()),
                "median_distance": float(np.median(inside)),
                "auc": auc,
                "auc_rest": auc_rest,
                "sigma": auc - auc_rest,
            }
        )
        share, share_rest = share_beyond(inside, taus), share_beyond(rest, taus)
        curves.append(
            pd.DataFrame(
                {
                    "member": member,
                    "tau": taus,
                    "share": share,
                    "share_rest": share_rest,
                    "rb": np.abs(share - share_rest),
                }
            )
        )
    return RobustnessBiasReport(pd.DataFrame(scores), pd.concat(curves, ignore_index=True), tau_max)
