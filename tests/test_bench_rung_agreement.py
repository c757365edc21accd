"""bench/rung_agreement.py: what a table's seeds say about its rungs, and what a search sees of them, on hand-made
tables and trials (every expected tau worked out in the comments) and on the embedded noisy table."""

from __future__ import annotations

import json

import pandas as pd
import pytest

from bench import rung_agreement


def hand_table() -> pd.DataFrame:
    """Five configurations, three seeds, two epochs of one objective: seeds 0 and 1 rank the configurations as i at
    both epochs; seed 2 reverses them at epoch 1 (-i) and ranks them as i at epoch 2."""
    rows = []
    for seed in range(3):
        for epoch in (1, 2):
            for i in range(5):
                value = -i if (seed == 2 and epoch == 1) else i
                rows.append({"config_id": f"c{i}", "seed": seed, "epoch": epoch, "val/error": float(value)})
    return pd.DataFrame(rows)


def test_a_tables_agreement_separates_the_same_seeds_view_from_the_truth_and_the_seed_noise():
    agreement = rung_agreement.table_agreement(hand_table(), ["error"]).set_index(["epoch", "quantity"])
    # epoch 1 against the same seed's epoch 2: +1, +1, -1
    assert agreement.loc[(1, "same_seed"), "mean"] == pytest.approx(1 / 3)
    # against the other seeds' epoch-2 mean (i for every seed): again +1, +1, -1
    assert agreement.loc[(1, "truth"), "mean"] == pytest.approx(1 / 3)
    # seed pairs at epoch 1: (0, 1) +1, (0, 2) -1, (1, 2) -1
    assert agreement.loc[(1, "other_seed"), "mean"] == pytest.approx(-1 / 3)
    assert agreement.loc[(1, "other_seed"), "n"] == 3 and agreement.loc[(1, "same_seed"), "n"] == 3
    assert agreement.xs(2, level="epoch")["mean"].tolist() == pytest.approx([1.0] * 3)  # all agree at the last epoch


def hand_trials() -> pd.DataFrame:
    """One search: four configurations at budget 1, three promoted to 2 (c3 first), a crashed trial at 2."""
    rows = [
        (0, "c0", 1, "success", 0.1, 5.0),
        (1, "c1", 1, "success", 0.2, 4.0),
        (2, "c2", 1, "success", 0.3, 3.0),
        (3, "c3", 1, "success", 0.4, 2.0),
        (4, "c3", 2, "success", 0.35, 1.0),
        (5, "c0", 2, "crashed", 1000.0, 1000.0),  # not a promotion a search learns from
        (6, "c1", 2, "success", 0.15, 3.0),
        (7, "c2", 2, "success", 0.25, 2.5),
    ]
    return pd.DataFrame(rows, columns=["trial_id", "config_id", "budget", "status", "error", "rank_disparity"])


def test_the_first_promotions_tau_uses_the_first_configurations_that_reached_the_next_rung():
    taus = rung_agreement.first_promotions(hand_trials(), ["error", "rank_disparity"], pairs=3)
    # c3, c1, c2: error 0.4, 0.2, 0.3 at budget 1 and 0.35, 0.15, 0.25 at 2 rank alike; rank disparity 2, 4, 3 and
    # 1, 3, 2.5 too
    assert taus == {"error": pytest.approx(1.0), "rank_disparity": pytest.approx(1.0)}
    two = rung_agreement.first_promotions(
        hand_trials().assign(error=[0.1, 0.2, 0.3, 0.4, 0.1, 0, 0.3, 0.2]), ["error"], 2
    )
    assert two == {"error": pytest.approx(-1.0)}  # c3 (0.4 -> 0.1) and c1 (0.2 -> 0.3) swap
    assert rung_agreement.first_promotions(hand_trials(), ["error"], pairs=4) is None  # only three promoted


def test_the_command_writes_both_views_and_names_a_bad_table_or_folder(tmp_path, capsys):
    run = tmp_path / "runs" / "smac" / "seed0" / "search"
    run.mkdir(parents=True)
    hand_trials().to_csv(run / "trials.csv", index=False)
    (run / "search.json").write_text(json.dumps({"objectives": ["error", "rank_disparity"]}))
    output = tmp_path / "agreement.csv"
    rung_agreement.main(
        ["--tables", "dpn_showcase_noisy", "--runs", f"hand={tmp_path / 'runs'}", "--pairs", "3"]
        + ["--output", str(output)]
    )
    written = pd.read_csv(output)
    searched = written[written["landscape"] == "hand"].set_index("objective")
    assert searched.loc["error", "view"] == "search, first 3 promotions" and searched.loc["error", "mean"] == 1.0
    noisy = written[written["landscape"] == "dpn_showcase_noisy"].set_index(["objective", "epoch", "quantity"])
    # the embedded table's error: three seeds agree little even after the last epoch (docs/search_strategies.md)
    assert noisy.loc[("error", 4, "other_seed"), "mean"] == pytest.approx(0.411, abs=0.001)
    assert noisy.loc[("error", 1, "truth"), "mean"] == pytest.approx(0.110, abs=0.001)
    for argv, message in (
        (["--tables", "nope"], "--tables nope: not a table of fairnas/benchmarks/tables/"),
        (["--runs", f"hand={tmp_path / 'runs'}", "--pairs", "4"], "promoted 4 configurations"),
        (["--runs", "hand"], "--runs hand: expected LABEL=FOLDER"),
    ):
        with pytest.raises(SystemExit):
            rung_agreement.main(argv)
        assert message in capsys.readouterr().err
