"""Verification metrics against hand-computed values, and the FRVT view's consistency with its global threshold."""

from __future__ import annotations

import numpy as np
import pytest

from fairnas.metrics import det_figure, frvt_error_rates, kfold_accuracy, pair_scores, tar_at_far, verification_metrics

# Two folds of (genuine, genuine, impostor, impostor); pairs alternate between groups a and b.
SCORES = np.array([0.9, 0.8, 0.3, 0.6, 0.7, 0.4, 0.5, 0.2])
SAME = np.array([True, True, False, False, True, True, False, False])
FOLDS = np.array([0, 0, 0, 0, 1, 1, 1, 1])
GROUPS = np.array(["a", "b", "a", "b", "a", "b", "a", "b"])


def test_pair_scores_are_cosine_similarities():
    embeddings = np.array([[1.0, 0.0], [0.0, 2.0], [3.0, 4.0]])
    np.testing.assert_allclose(pair_scores(embeddings, np.array([0, 0, 2]), np.array([1, 2, 2])), [0.0, 0.6, 1.0])


def test_kfold_accuracy_by_hand():
    # Fold 0 held out: on fold 1, thresholds 0.7 and 0.4 both reach 3/4; the higher, 0.7, gets fold 0 all right.
    # Fold 1 held out: on fold 0, 0.8 separates perfectly; on fold 1 it rejects both genuine pairs -> 1/2.
    assert kfold_accuracy(SCORES, SAME, FOLDS) == pytest.approx((0.75, 0.25))


def test_tar_at_far_by_hand():
    # Impostor scores 0.6, 0.5, 0.3, 0.2: FAR 0 needs a threshold above 0.6 (TAR 3/4); FAR 1/2 admits 0.4.
    assert tar_at_far(SCORES, SAME, 0.1) == 0.75
    assert tar_at_far(SCORES, SAME, 0.25) == 0.75
    assert tar_at_far(SCORES, SAME, 0.5) == 1.0


def test_per_group_metrics_by_hand():
    metrics = verification_metrics(SCORES, SAME, FOLDS, GROUPS, far_targets=(0.1,))
    assert metrics["accuracy"] == pytest.approx(0.75)
    assert metrics["accuracy/a"] == pytest.approx(0.75)  # thresholds 0.7 then 0.9: 1 and 1/2
    assert metrics["accuracy/b"] == pytest.approx(0.5)  # thresholds 0.4 then 0.8: 1/2 and 1/2
    assert metrics["tar_at_far_1e-01"] == 0.75 and metrics["tar_at_far_1e-01/b"] == 0.5
    assert metrics["n_pairs"] == 8 and metrics["n_pairs/a"] == 4


def brute_force_kfold_accuracy(scores, same, folds):
    """Every distinct score (and +inf) tried as threshold; the highest of the most accurate is used."""
    accuracies = []
    for fold in np.unique(folds):
        train, test = folds != fold, folds == fold
        candidates = np.r_[np.inf, np.unique(scores[train])[::-1]]
        train_accuracy = [np.mean((scores[train] >= t) == same[train]) for t in candidates]
        threshold = candidates[int(np.argmax(train_accuracy))]
        accuracies.append(np.mean((scores[test] >= threshold) == same[test]))
    return np.mean(accuracies), np.std(accuracies)


def test_kfold_accuracy_matches_brute_force_with_ties():
    rng = np.random.default_rng(0)
    same = rng.random(300) < 0.5
    scores = np.round(np.where(same, rng.normal(0.5, 0.2, 300), rng.normal(0.2, 0.2, 300)), 1)  # many ties
    folds = np.arange(300) // 30
    assert kfold_accuracy(scores, same, folds) == pytest.approx(brute_force_kfold_accuracy(scores, same, folds))


def test_frvt_rates_at_the_global_threshold_by_hand():
    rates = frvt_error_rates(SCORES, SAME, GROUPS, target_fmr=0.25)
    # Lowest threshold with at most 1 of 4 impostors accepted: 0.6. Rejected genuine: 0.4 (group b).
    assert rates == pytest.approx(
        {"threshold": 0.6, "fmr": 0.25, "fnmr": 0.25, "fmr/a": 0.0, "fnmr/a": 0.0, "fmr/b": 0.5, "fnmr/b": 0.5}
    )
    assert set(frvt_error_rates(SCORES, SAME, target_fmr=0.25)) == {"threshold", "fmr", "fnmr"}


def test_frvt_group_rates_are_consistent_with_the_global_threshold():
    rng = np.random.default_rng(1)
    n = 4000
    groups = rng.choice(["w", "x", "y"], size=n)
    same = rng.random(n) < 0.3
    scores = np.where(same, rng.normal(0.6, 0.2, n), rng.normal(0.1, 0.2, n)) + (groups == "y") * 0.1
    rates = frvt_error_rates(scores, same, groups, target_fmr=1e-2)
    accepted = scores >= rates["threshold"]
    assert rates["fmr"] <= 1e-2 and np.mean(accepted[~same]) == pytest.approx(rates["fmr"])
    assert np.mean(scores[~same] >= np.max(scores[~same][~accepted[~same]])) > 1e-2  # the lowest such threshold
    impostor_counts = {g: np.sum((groups == g) & ~same) for g in "wxy"}
    weighted = sum(rates[f"fmr/{g}"] * impostor_counts[g] for g in "wxy") / sum(impostor_counts.values())
    assert weighted == pytest.approx(rates["fmr"])
    for g in "wxy":
        genuine = (groups == g) & same
        assert rates[f"fnmr/{g}"] == pytest.approx(np.mean(scores[genuine] < rates["threshold"]))
    assert rates["fmr/y"] > rates["fmr/w"]  # the shifted group matches falsely more often


def test_det_plot_is_written(tmp_path):
    figure = det_figure(SCORES, SAME, GROUPS, threshold=0.6, title="fixture")
    axis = figure.axes[0]
    assert [text.get_text() for text in axis.get_legend().get_texts()] == ["a", "b"]
    figure.savefig(tmp_path / "det.png")
    assert (tmp_path / "det.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_bad_inputs():
    with pytest.raises(ValueError, match="at least 2 folds"):
        kfold_accuracy(SCORES, SAME, np.zeros(8))
    with pytest.raises(ValueError, match="both matched and mismatched"):
        tar_at_far(SCORES, np.ones(8, dtype=bool), 1e-3)
    with pytest.raises(ValueError, match="target_fmr=2"):
        frvt_error_rates(SCORES, SAME, target_fmr=2)
