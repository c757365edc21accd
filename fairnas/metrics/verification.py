"""Face-verification metrics, overall and per protected group.

A pair's score is the cosine similarity of its two L2-normalised embeddings (higher: more likely the same
person). For unit vectors d^2 = 2 - 2 cos, so every threshold on the score is a threshold on the Euclidean
distance of the identification metrics (README, "Metric definitions"); a pair is accepted as a match when its
score is >= the threshold.

- k-fold accuracy (the LFW protocol, also used by CFP-FF/FP, AgeDB-30, CALFW, CPLFW and RFW; thesis Tables 4.5
  and 4.7): for each fold, the threshold that maximises accuracy on the other folds (the highest such threshold
  when several tie) classifies the fold's pairs; the mean and standard deviation of the fold accuracies.
- TAR@FAR: the largest true-accept rate among thresholds whose false-accept rate is at most the target.
- The demographic view of NIST FRVT (Grother et al., NIST IR 8280): one global threshold, the lowest whose false
  match rate over all impostor pairs is at most ``target_fmr``, and each group's FMR and FNMR at it; a DET curve
  per group shows the whole trade-off.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch
from matplotlib.figure import Figure
from scipy.stats import norm
from sklearn.metrics import DetCurveDisplay, roc_curve

DEFAULT_FAR_TARGETS = (1e-3, 1e-4)
DET_TICKS = np.array([1e-5, 1e-4, 1e-3, 1e-2, 0.05, 0.2, 0.5, 0.8, 0.95, 0.99])


def pair_scores(embeddings: np.ndarray | torch.Tensor, left: np.ndarray, right: np.ndarray) -> np.ndarray:
    """Cosine similarity of the embeddings of each pair (``left[k]``, ``right[k]``), as float64."""
    if isinstance(embeddings, torch.Tensor):
        embeddings = embeddings.detach().cpu().numpy()
    unit = np.asarray(embeddings, dtype=np.float64)
    unit = unit / np.maximum(np.linalg.norm(unit, axis=1, keepdims=True), 1e-12)
    left, right = np.asarray(left, dtype=np.int64), np.asarray(right, dtype=np.int64)
    return np.einsum("ij,ij->i", unit[left], unit[right])


def best_threshold(scores: np.ndarray, same: np.ndarray) -> float:
    """The score threshold with the highest accuracy on these pairs (the highest threshold among ties)."""
    false_accept, true_accept, thresholds = _roc(scores, same)
    n_same = int(same.sum())
    correct = true_accept * n_same + (1.0 - false_accept) * (len(same) - n_same)
    return float(thresholds[np.argmax(correct)])


def kfold_accuracy(scores: np.ndarray, same: np.ndarray, folds: np.ndarray) -> tuple[float, float]:
    """Mean and standard deviation over folds of the accuracy at the threshold chosen on the other folds."""
    fold_ids = np.unique(folds)
    if len(fold_ids) < 2:
        raise ValueError(f"k-fold accuracy needs at least 2 folds, got {len(fold_ids)}")
    accuracies = []
    for fold in fold_ids:
        held_out = folds == fold
        threshold = best_threshold(scores[~held_out], same[~held_out])
        accuracies.append(np.mean((scores[held_out] >= threshold) == same[held_out]))
    return float(np.mean(accuracies)), float(np.std(accuracies))


def tar_at_far(scores: np.ndarray, same: np.ndarray, far: float) -> float:
    """True-accept rate at the lowest threshold whose false-accept rate is <= ``far``."""
    false_accept, true_accept, _ = _roc(scores, same)
    return float(true_accept[false_accept <= far].max())


def verification_metrics(
    scores: np.ndarray,
    same: np.ndarray,
    folds: np.ndarray,
    groups: np.ndarray | Sequence[str] | None = None,
    *,
    far_targets: Sequence[float] = DEFAULT_FAR_TARGETS,
) -> dict[str, float]:
    """k-fold accuracy (and its std), TAR at each FAR target and the pair count, overall and per group.

    Keys: ``accuracy``, ``accuracy_std``, ``tar_at_far_1e-03`` ..., ``n_pairs``; per group g the same keys with
    ``/g`` appended. Groups are evaluated on their own pairs with the same folds.
    """
    scores, same, folds = np.asarray(scores, dtype=float), np.asarray(same, dtype=bool), np.asarray(folds)
    metrics = _verification_summary(scores, same, folds, far_targets)
    if groups is not None:
        groups = np.asarray(groups).astype(str)
        for group in np.unique(groups):
            members = groups == group
            summary = _verification_summary(scores[members], same[members], folds[members], far_targets)
            metrics.update({f"{key}/{group}": value for key, value in summary.items()})
    return metrics


def frvt_error_rates(
    scores: np.ndarray,
    same: np.ndarray,
    groups: np.ndarray | Sequence[str] | None = None,
    *,
    target_fmr: float = 1e-3,
) -> dict[str, float]:
    """False match and false non-match rates per group at one global threshold (the FRVT demographic view).

    The threshold is the lowest at which the false match rate over all impostor pairs is <= ``target_fmr``.
    Keys: ``threshold``, ``fmr``, ``fnmr`` (all pairs) and, with ``groups``, ``fmr/g``, ``fnmr/g`` per group g.
    """
    if not 0.0 <= target_fmr <= 1.0:
        raise ValueError(f"target_fmr={target_fmr} must be a rate in [0, 1]")
    scores, same = np.asarray(scores, dtype=float), np.asarray(same, dtype=bool)
    false_accept, true_accept, thresholds = _roc(scores, same)
    index = np.flatnonzero(false_accept <= target_fmr)[-1]
    threshold = float(thresholds[index])
    rates = {"threshold": threshold, "fmr": float(false_accept[index]), "fnmr": float(1.0 - true_accept[index])}
    if groups is None:
        return rates
    groups = np.asarray(groups).astype(str)
    accepted = scores >= threshold
    for group in np.unique(groups):
        impostors, genuine = (groups == group) & ~same, (groups == group) & same
        if not impostors.any() or not genuine.any():
            raise ValueError(f"group {group!r} needs both genuine and impostor pairs for FMR and FNMR")
        rates[f"fmr/{group}"] = float(accepted[impostors].mean())
        rates[f"fnmr/{group}"] = float((~accepted[genuine]).mean())
    return rates


def det_figure(
    scores: np.ndarray,
    same: np.ndarray,
    groups: np.ndarray | Sequence[str],
    threshold: float | None = None,
    title: str | None = None,
) -> Figure:
    """DET curves (FNMR against FMR on normal-deviate axes), one per group, with each group's operating point
    at the global ``threshold`` marked when given."""
    scores, same, groups = np.asarray(scores, dtype=float), np.asarray(same, dtype=bool), np.asarray(groups).astype(str)
    figure = Figure(figsize=(5.5, 5), layout="tight")  # no pyplot: no display or global state
    axis = figure.subplots()
    n_impostors, n_genuine = [], []
    for group in np.unique(groups):
        members = groups == group
        group_same = same[members]
        n_impostors.append(int((~group_same).sum()))
        n_genuine.append(int(group_same.sum()))
        display = DetCurveDisplay.from_predictions(group_same, scores[members], name=group, ax=axis)
        if threshold is not None:
            accepted = scores[members] >= threshold
            fmr, fnmr = accepted[~group_same].mean(), (~accepted[group_same]).mean()
            axis.plot(norm.ppf(fmr), norm.ppf(fnmr), "o", color=display.line_.get_color())
    # Down to the smallest rate every group can resolve (half of one error in its smallest class).
    for set_limits, set_ticks, floor in (
        (axis.set_xlim, axis.set_xticks, 0.5 / min(n_impostors)),
        (axis.set_ylim, axis.set_yticks, 0.5 / min(n_genuine)),
    ):
        ticks = DET_TICKS[floor <= DET_TICKS]
        set_ticks(norm.ppf(ticks), [f"{100 * tick:g}%" for tick in ticks])
        set_limits(norm.ppf(floor), norm.ppf(DET_TICKS[-1]))
    axis.set_xlabel("false match rate")
    axis.set_ylabel("false non-match rate")
    axis.grid(alpha=0.3)
    if title:
        axis.set_title(title)
    return figure


def _verification_summary(
    scores: np.ndarray, same: np.ndarray, folds: np.ndarray, far_targets: Sequence[float]
) -> dict[str, float]:
    accuracy, accuracy_std = kfold_accuracy(scores, same, folds)
    summary = {"accuracy": accuracy, "accuracy_std": accuracy_std}
    summary.update({far_key(far): tar_at_far(scores, same, far) for far in far_targets})
    summary["n_pairs"] = float(len(scores))
    return summary


def far_key(far: float) -> str:
    """Metric name of TAR at ``far``, e.g. ``tar_at_far_1e-03``."""
    return f"tar_at_far_{far:.0e}"


def _roc(scores: np.ndarray, same: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(false-accept rates, true-accept rates, thresholds) at every distinct score, thresholds decreasing."""
    if same.all() or not same.any():
        raise ValueError("verification metrics need both matched and mismatched pairs")
    return roc_curve(same, scores, drop_intermediate=False)
