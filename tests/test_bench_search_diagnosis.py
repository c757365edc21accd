"""bench/search_diagnosis.py's pure functions on a hand-made run (the columns of a search's ``consumed.csv``): where
the epochs went, repeats and near-duplicates, the regions of the configurations trained, promotions, the winner's
curse, and the operation features; every expected value worked out by hand in the comments."""

from __future__ import annotations

import io
import json

import numpy as np
import pandas as pd
import pytest

from bench import search_diagnosis as diagnosis
from fairnas.config import SPACES_DIR
from fairnas.search import load_space

ARCH = {
    "A": (0, 0, 0, "cosface", "adam"),
    "B": (0, 0, 0, "cosface", "adam"),  # A's operations, head and optimizer, another learning rate
    "C": (1, 2, 3, "arcface", "sgd"),
    "D": (5, 5, 5, "magface", "adamw"),
}
# trial_id, config, budget, seed, error, rank disparity, cost, stage
TRIALS = [
    (0, "A", 1, 7, 0.90, 20.0, 1, "search"),
    (1, "B", 1, 7, 0.95, 25.0, 1, "search"),  # near-duplicate of A
    (2, "A", 2, 7, 0.70, 10.0, 1, "search"),  # promoted: a repeat at another budget
    (3, "A", 4, 7, 0.39, 1.0, 2, "search"),  # promoted again
    (4, "C", 4, 7, 0.50, 5.0, 4, "search"),
    (5, "C", 4, 7, 0.50, 5.0, 4, "search"),  # a repeat at the same budget
    (6, "D", 4, 7, 0.60, 9.0, 4, "search"),
    (0, "A", 4, 0, 0.40, 2.0, 4, "final"),
    (1, "A", 4, 1, 0.44, 4.0, 4, "final"),
]
TRUTH = pd.DataFrame(
    {
        "error": [0.45, 0.70, 0.48, 0.62],
        "rank_disparity": [2.5, 10.0, 4.0, 9.5],
        "top25_error": [True, False, True, False],
    },
    index=["A", "B", "C", "D"],
)


def consumed() -> pd.DataFrame:
    """The run as ``consumed.csv`` holds it, read back through a CSV."""
    rows = []
    for trial_id, name, budget, seed, error, rank, cost, stage in TRIALS:
        op0, op1, op2, head, optimizer = ARCH[name]
        config = {"op0": op0, "op1": op1, "op2": op2, "head": head, "optimizer": optimizer, "tag": name}
        rows.append(
            {
                "trial_id": trial_id,
                "config_id": name,
                "budget": float(budget),
                "seed": seed,
                "status": "success",
                "error": error,
                "rank_disparity": rank,
                "config": json.dumps(config),
                "op0": op0,
                "op1": op1,
                "op2": op2,
                "head": head,
                "optimizer": optimizer,
                "cost": float(cost),
                "stage": stage,
            }
        )
    return pd.read_csv(io.StringIO(pd.DataFrame(rows).to_csv(index=False)))


def test_budget_use_counts_epochs_repeats_and_near_duplicates():
    use = diagnosis.budget_use(consumed())
    # 25 epochs: 17 in the search (1 + 1 + 1 + 2 + 4 + 4 + 4), 8 in the final stage
    assert use["epochs_at_1"] == pytest.approx(2 / 25)
    assert use["epochs_at_2"] == pytest.approx(1 / 25)
    assert use["epochs_at_3"] == 0.0
    assert use["epochs_at_4"] == pytest.approx(22 / 25)  # 2 + 4 + 4 + 4 of the search, 8 of the final stage
    assert use["final_share"] == pytest.approx(8 / 25)
    assert (use["trials"], use["configs"]) == (7, 4)
    assert use["repeat_share"] == pytest.approx(3 / 7)  # trials 2, 3 and 5
    assert use["same_budget_repeat_share"] == pytest.approx(1 / 7)  # trial 5
    assert use["near_duplicate_share"] == pytest.approx(1 / 7)  # trial 1
    assert use["repeat_epoch_share"] == pytest.approx((1 + 2 + 4) / 25)


def test_region_shares_over_the_run_and_its_halves():
    shares = diagnosis.region_shares(consumed(), TRUTH[["top25_error"]])
    # at the full budget, in the order first reached: A (trial 3), C (4), D (6); halves [A] and [D]
    assert shares["full_configs"] == 3
    assert shares["full_top25_error"] == pytest.approx(2 / 3)
    assert (shares["full_top25_error_first"], shares["full_top25_error_second"]) == (1.0, 0.0)
    assert shares["full_top25_error_shift"] == -1.0
    assert shares["full_top25_error_count"] == 2
    # every new configuration: A, B, C, D; halves [A, B] and [C, D]
    assert shares["new_top25_error"] == 0.5
    assert (shares["new_top25_error_first"], shares["new_top25_error_second"]) == (0.5, 0.5)
    assert diagnosis.halves([1, 2, 3, 4, 5]) == ([1, 2], [4, 5])


def test_promotion_shares():
    shares = diagnosis.promotion_shares(consumed(), TRUTH["top25_error"])
    assert shares["reached_1_top25_error"] == 0.5  # A, B
    assert shares["reached_2_top25_error"] == 1.0  # A
    assert np.isnan(shares["reached_3_top25_error"])
    assert shares["reached_4_top25_error"] == pytest.approx(2 / 3)  # A, C, D
    assert shares["promoted_top25_error"] == 1.0  # A, from budget 1
    assert shares["direct_top25_error"] == 0.5  # C, D started at 4
    assert shares["promoted_count"] == 1


def test_winners_curse_of_the_final_stage_answer():
    curse = diagnosis.winners_curse(consumed(), TRUTH)
    # the answer is the final stage's: A at the mean of its two runs (0.42, 3.0), true (0.45, 2.5)
    assert curse["pick_error_gap"] == pytest.approx(0.03)
    assert curse["pick_rank_disparity_gap"] == pytest.approx(-0.5)
    # every configuration trained at the full budget, search and final stage: A (0.39, 0.40, 0.44) -> 0.41 against
    # 0.45, C 0.50 against 0.48, D 0.60 against 0.62
    assert curse["trained_error_gap"] == pytest.approx((0.04 - 0.02 + 0.02) / 3)
    assert curse["pick_top25_error"] == 1.0
    assert (curse["pick_error_excess"], curse["pick_is_best"]) == (0.0, 1.0)  # A has the lowest true error


def test_proposal_curve_in_windows():
    curve = diagnosis.proposal_curve(consumed(), TRUTH["top25_error"], window=3, windows=3)
    # new configurations A, B, C, D: windows [A, B, C] and [D]
    assert curve["curve_top25_error_0"] == pytest.approx(2 / 3)
    assert curve["curve_top25_error_1"] == 0.0
    assert np.isnan(curve["curve_top25_error_2"])


def test_regions_and_point_hypervolume():
    values = pd.DataFrame({"error": [0.4, 0.5, 1.2, 0.6], "rank_disparity": [6.0, 2.0, 3.0, 11.0]})
    values["hv"] = diagnosis.point_hypervolume(values.to_numpy(), (1.0, 10.0))
    assert values["hv"].tolist() == pytest.approx([0.6 * 4, 0.5 * 8, 0.0, 0.0])
    cuts = diagnosis.region_thresholds(values)
    assert cuts["top25_error"] == pytest.approx(0.475)  # pandas' linear quantile of 0.4, 0.5, 0.6, 1.2
    regions = diagnosis.in_regions(values, cuts, (1.0, 10.0))
    assert regions["top25_error"].tolist() == [True, False, False, False]
    assert cuts["top10_hv"] == pytest.approx(2.4 + 0.7 * 1.6)  # of 0, 0, 2.4, 4
    assert regions["top10_hv"].tolist() == [False, True, False, False]
    assert regions["in_box"].tolist() == [True, True, False, False]
    assert regions["outside_box"].tolist() == [False, False, True, True]
    assert regions["error_outside"].tolist() == [False, False, True, False]
    assert regions["rank_disparity_outside"].tolist() == [False, False, False, True]


def test_operation_features_read_kernel_size_and_norm():
    space = load_space(SPACES_DIR / "dpn_paper_group_sampling.yaml")
    config = {"op0": 4, "op1": 0, "op2": 8, "head": "arcface", "optimizer": "sgd", "lr_sgd": 0.2, "group_alpha": 1.0}
    features = diagnosis.OperationFeatures(space.configspace)([config])
    assert features.shape == (1, 3 * 4 + 3 + 3 + 3)  # 3 slots x (kernel, 3 norms), 2 one-hots, 3 numbers
    by_slot = {}
    for hyperparameter in ("op0", "op1", "op2"):
        start = diagnosis.OperationFeatures(space.configspace).slot(hyperparameter)
        by_slot[hyperparameter] = features[0, start : start + 4].tolist()
    assert by_slot["op0"] == [0.5, 0.0, 1.0, 0.0]  # Conv3x3Bn: kernel 3, batch norm after
    assert by_slot["op1"] == [0.0, 1.0, 0.0, 0.0]  # BnConv1x1: kernel 1, batch norm before
    assert by_slot["op2"] == [1.0, 0.0, 0.0, 1.0]  # Conv5x5: kernel 5, no batch norm


def test_promotion_rules_promote_the_observed_best():
    # 16 configurations whose observed error and rank disparity both rise with the index; the best 8 are inside
    observed = np.column_stack([np.linspace(0.4, 0.9, 16), np.linspace(1.0, 9.0, 16)])
    inside = np.arange(16) < 8
    rules = diagnosis.promotion_rules(observed, inside, np.random.default_rng(0), rung=16, repeats=5)
    assert rules["error"] == (1.0, 0.0)  # every rung holds all 16: the 8 lowest errors are the 8 inside
    assert rules["nondominated"] == (1.0, 0.0)  # one configuration per front, in the order of the index
    assert rules["parego"] == (1.0, 0.0)  # either weight ranks them in the same order
    assert 0.0 <= rules["random"][0] <= 1.0
