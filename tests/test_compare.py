"""The mitigation comparison: Table 4.6 cells, Pareto marks, search-front models, and compare.py end to end."""

from __future__ import annotations

import json
import logging
import math

import pandas as pd
import pytest

from fairnas.metrics import IDENTIFICATION_METRICS
from fairnas.mitigations.table import comparison_table, format_cell, markdown_tables, summarize
from fairnas.tasks.compare import front_models, seed_list
from fairnas.training import run as training
from fairnas.training.run import train_once

TITLES = {"none": "Baseline", "flipped": "Flipped"}


def runs_frame():
    """Two models x two mitigations x two seeds with known means and standard errors."""
    rows = [  # model, mitigation, seed, error, rank_disparity, disparity
        ("A", "none", 0, 0.10, 1.0, 0.1),
        ("A", "none", 1, 0.20, 3.0, 0.1),
        ("A", "flipped", 0, 0.30, 0.5, 0.1),
        ("A", "flipped", 1, 0.30, 0.5, 0.1),
        ("B", "none", 0, 0.40, 3.0, 0.1),
        ("B", "none", 1, 0.40, 3.0, 0.1),
        ("B", "flipped", 0, 0.10, 4.0, 0.05),
        ("B", "flipped", 1, 0.10, 4.0, 0.05),
    ]
    return pd.DataFrame(rows, columns=["model", "mitigation", "seed", "error", "rank_disparity", "disparity"])


def test_summary_has_means_standard_errors_and_pareto_flags():
    summary = summarize(runs_frame(), ["rank_disparity", "disparity"]).set_index(["metric", "model", "mitigation"])
    cell = summary.loc[("rank_disparity", "A", "none")]
    assert cell["n_seeds"] == 2
    assert cell["error_mean"] == pytest.approx(0.15) and cell["error_sem"] == pytest.approx(0.05)
    assert cell["value_mean"] == pytest.approx(2.0) and cell["value_sem"] == pytest.approx(1.0)
    pareto = summary["pareto_optimal"]
    assert set(pareto["rank_disparity"][pareto["rank_disparity"]].index) == {
        ("A", "none"),
        ("A", "flipped"),
        ("B", "flipped"),
    }
    assert set(pareto["disparity"][pareto["disparity"]].index) == {("B", "flipped")}


def test_table_has_one_row_per_model_one_column_per_mitigation_and_marks_the_front():
    table = comparison_table(summarize(runs_frame(), ["rank_disparity"]), "rank_disparity", TITLES)
    assert list(table.index) == ["A", "B"] and list(table.columns) == ["Baseline", "Flipped"]
    assert table.loc["A", "Baseline"] == "*(15.00 ± 5.00; 2.00 ± 1.00)"
    assert table.loc["A", "Flipped"] == "*(30.00 ± 0.00; 0.50 ± 0.00)"
    assert table.loc["B", "Baseline"] == "(40.00 ± 0.00; 3.00 ± 0.00)"


def test_markdown_bolds_pareto_cells_under_a_heading_per_metric():
    text = markdown_tables(
        summarize(runs_frame(), ["rank_disparity", "disparity"]), ["rank_disparity", "disparity"], TITLES, split="test"
    )
    assert "### (error in %; rank_disparity) on test" in text and "### (error in %; disparity) on test" in text
    assert "**(10.00 ± 0.00; 0.05 ± 0.00)**" in text
    assert "| B       | (40.00 ± 0.00; 3.00 ± 0.00)" in text


def test_single_seed_cells_have_no_standard_error_and_infinite_ratios_print():
    runs = runs_frame().query("seed == 0").assign(ratio=[math.inf, 1, 1, 1])
    summary = summarize(runs, ["ratio"]).set_index(["model", "mitigation"])
    assert math.isnan(summary.loc[("A", "none"), "error_sem"])
    assert not summary.loc[("A", "none"), "pareto_optimal"]
    assert format_cell(0.1, math.nan, math.inf, math.nan) == "(0.10; inf)"
    assert format_cell(12.345, 0.5, 0.2, 0.01) == "(12.35 ± 0.50; 0.20 ± 0.01)"


def test_summary_names_missing_metric_columns():
    with pytest.raises(ValueError, match=r"runs lack the columns \['ratio'\]"):
        summarize(runs_frame(), ["ratio"])


def test_front_configurations_become_named_models(tmp_path):
    configs = [
        {"op0": 3, "op1": 0, "op2": 1, "head": "arcface", "optimizer": "sgd", "lr_sgd": 0.1},
        {"op0": 3, "op1": 0, "op2": 1, "head": "arcface", "optimizer": "adam", "lr_adam": 0.001},
        {"op0": 0, "op1": 0, "op2": 0, "head": "cosface", "optimizer": "sgd", "lr_sgd": 0.2},
    ]
    front = tmp_path / "final_front.csv"
    pd.DataFrame({"config_id": ["a1", "b2", "c3"], "config": [json.dumps(c) for c in configs]}).to_csv(front)

    models = front_models(front, "searchspaces/dpn_paper.yaml")
    assert list(models) == ["SMAC_301_arcface", "SMAC_301_arcface_b2", "SMAC_000_cosface"]
    assert models["SMAC_301_arcface"] == ["backbone.ops=[3,0,1]", "head=arcface", "optimizer=sgd", "optimizer.lr=0.1"]


def test_front_file_without_configurations_is_named(tmp_path):
    pd.DataFrame({"error": [0.1]}).to_csv(tmp_path / "front.csv")
    with pytest.raises(ValueError, match="lacks the columns config and config_id"):
        front_models(tmp_path / "front.csv", "searchspaces/dpn_paper.yaml")


def fake_search(folder, trials=(0,), final=(1, 2)):
    """A search's output folder as compare.py reads it: a one-configuration final_front.csv, and the seeds of its
    trials (trials.csv) and final stage (final_trials.csv); None leaves that file out. Returns the front file."""
    folder.mkdir(parents=True)
    config = {"op0": 3, "op1": 0, "op2": 1, "head": "arcface", "optimizer": "sgd", "lr_sgd": 0.1}
    front = folder / "final_front.csv"
    pd.DataFrame({"config_id": ["a1"], "config": [json.dumps(config)]}).to_csv(front, index=False)
    for name, seeds in (("trials.csv", trials), ("final_trials.csv", final)):
        if seeds is not None:
            pd.DataFrame({"config_id": "a1", "seed": list(seeds), "status": "success"}).to_csv(folder / name)
    return front


def test_without_a_front_a_number_of_seeds_counts_from_zero():
    assert seed_list(2) == [0, 1]
    assert seed_list([3, 4]) == [3, 4]


def test_a_front_is_compared_on_seeds_its_search_never_trained_with(tmp_path):
    assert seed_list(3, fake_search(tmp_path / "search")) == [3, 4, 5]  # seed 0, then the final stage's 1 and 2
    assert seed_list(2, fake_search(tmp_path / "no_final", final=None)) == [1, 2]
    assert seed_list(2, fake_search(tmp_path / "only_final", trials=None, final=[0, 2])) == [1, 3]


def test_a_front_without_its_search_records_needs_explicit_seeds(tmp_path):
    front = fake_search(tmp_path / "copied", trials=None, final=None)
    message = r"front: '.*copied/final_front.csv' has no trials.csv or final_trials.csv .* e.g. seeds=\[3,4,5\]"
    with pytest.raises(ValueError, match=message):
        seed_list(3, front)
    assert seed_list([0, 1], front) == [0, 1]  # the user's seeds: nothing to check them against


def test_listed_seeds_the_search_trained_with_are_kept_with_a_warning(tmp_path, caplog):
    front = fake_search(tmp_path / "search")
    with caplog.at_level(logging.WARNING, logger="fairnas.tasks.compare"):
        assert seed_list([2, 3, 0], front) == [2, 3, 0]
    assert "trained with [0, 2] too" in caplog.text
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="fairnas.tasks.compare"):
        assert seed_list([3, 4], front) == [3, 4]
    assert not caplog.text


def compare_config(tmp_path, cache_dir, mitigations, seeds=2, **settings):
    from fairnas.config import compose_config
    from tests.conftest import TINY_DATA

    cfg = compose_config(
        "compare", [f"seeds={seeds}", f"mitigations=[{','.join(mitigations)}]"], output_dir=tmp_path / "compare"
    )
    cfg.models = {"SMAC_301": ["backbone.ops=[3,0,1]"]}
    cfg.train_overrides = [*TINY_DATA, f"paths.cache_dir={cache_dir}", "logger=none"]
    for key, value in settings.items():
        cfg[key] = value
    return cfg


def test_compare_trains_every_pair_over_seeds_writes_the_tables_and_resumes(tmp_path, cache_dir, monkeypatch):
    from fairnas.tasks import compare

    cfg = compare_config(tmp_path, cache_dir, ["none", "angular"])
    summary = compare.run_comparison(cfg)

    out = tmp_path / "compare"
    runs = pd.read_csv(out / "runs.csv")
    assert len(runs) == 4 and set(runs["mitigation"]) == {"none", "angular"} and set(runs["seed"]) == {0, 1}
    for seed in (0, 1):  # Angular measured its disadvantaged group on the baseline of the same seed
        record = json.loads((out / f"runs/SMAC_301/angular/seed{seed}/compare_run.json").read_text())
        assert f"mitigation.reference_metrics='{out}/runs/SMAC_301/none/seed{seed}/metrics.json'" in record["overrides"]
    assert set(summary["metric"]) == set(cfg.metrics) and (summary["n_seeds"] == 2).all()
    tables = pd.read_csv(out / "tables.csv")
    assert list(tables.columns) == ["metric", "model", "Baseline", "Angular"] and len(tables) == 5
    assert tables["Baseline"].str.match(r"^\*?\(\d+\.\d\d ± \d+\.\d\d; \d+\.\d\d ± \d+\.\d\d\)$").all()
    assert "**(" in (out / "tables.md").read_text()
    assert (out / "comparison.png").stat().st_size > 0
    assert list((out / "wandb").glob("offline-run-*"))

    monkeypatch.setattr(training, "train", lambda cfg: pytest.fail("a finished run was trained again"))
    again = compare.run_comparison(cfg)
    pd.testing.assert_frame_equal(again, summary)


@pytest.mark.integration
def test_compare_trains_on_two_dask_workers_baselines_first_and_resumes_without_them(tmp_path, cache_dir, monkeypatch):
    from fairnas.tasks import compare

    cfg = compare_config(tmp_path, cache_dir, ["none", "angular"], n_workers=2, logger=None)
    compare.run_comparison(cfg)
    out = tmp_path / "compare"
    runs = pd.read_csv(out / "runs.csv")
    assert len(runs) == 4 and runs[list(IDENTIFICATION_METRICS)].notna().all().all()
    for seed in (0, 1):  # the mitigation wave read the baselines the first wave wrote
        record = json.loads((out / f"runs/SMAC_301/angular/seed{seed}/compare_run.json").read_text())
        assert f"mitigation.reference_metrics='{out}/runs/SMAC_301/none/seed{seed}/metrics.json'" in record["overrides"]
    monkeypatch.setattr(
        compare, "open_pool_for", lambda *args, **kwargs: pytest.fail("a finished comparison opened a pool")
    )
    pd.testing.assert_frame_equal(pd.read_csv(out / "runs.csv"), runs)
    compare.run_comparison(cfg)  # every run read back: no pool, no Dask cluster


def test_a_failed_run_stops_the_comparison_in_one_line_after_its_wave(tmp_path, cache_dir):
    from fairnas.tasks.compare import run_comparison

    cfg = compare_config(tmp_path, cache_dir, ["none"], seeds=2, logger=None)
    cfg.train_overrides = [*cfg.train_overrides, "optimizer.lr=0"]  # refused by each run as it starts
    message = r"^compare: 2 run\(s\) failed, the first SMAC_301/none/seed0: SettingError: optimizer.lr=0 must be a"
    with pytest.raises(ValueError, match=message):
        run_comparison(cfg)


def test_data_with_one_group_to_compare_stops_the_comparison_before_any_run(tmp_path, cache_dir):
    """A disparity over one group is undefined: each model's data is read before the first run trains."""
    from fairnas.tasks.compare import run_comparison

    cfg = compare_config(tmp_path, cache_dir, ["none"], seeds=1, logger=None)
    cfg.train_overrides = [*cfg.train_overrides, "data.group_order=[g0]"]
    with pytest.raises(ValueError, match=r"^data.group_order=\['g0'\] names fewer than two of the groups"):
        run_comparison(cfg)
    assert not (tmp_path / "compare" / "runs").exists()


def test_compare_refuses_to_reuse_runs_made_with_other_overrides(tmp_path, cache_dir):
    from fairnas.tasks.compare import run_comparison

    run_comparison(compare_config(tmp_path, cache_dir, ["none"], seeds=1, logger=None))
    changed = compare_config(tmp_path, cache_dir, ["none"], seeds=1, logger=None)
    changed.train_overrides = [*changed.train_overrides, "embedding_dim=32"]
    with pytest.raises(ValueError, match="holds a run with other overrides"):
        run_comparison(changed)


def test_compare_reads_back_a_finished_run_with_the_same_training_config_from_reuse_runs(
    tmp_path, cache_dir, monkeypatch
):
    from fairnas.tasks import compare

    cfg = compare_config(tmp_path, cache_dir, ["none", "angular"], logger=None, seeds=[3])
    stage = tmp_path / "stage" / "seed3"  # trained elsewhere: the same config in another override order
    train_once(stage, [*cfg.train_overrides, "seed=3", "backbone.ops=[3,0,1]"])
    trained = []
    real_train = training.train
    monkeypatch.setattr(training, "train", lambda run: trained.append(run.output_dir) or real_train(run))
    cfg.reuse_runs = [str(tmp_path / "stage")]
    compare.run_comparison(cfg)

    out = tmp_path / "compare"
    assert trained == [str(out / "runs/SMAC_301/angular/seed3")]  # the baseline was read back, not trained
    assert not (out / "runs/SMAC_301/none").exists()
    runs = pd.read_csv(out / "runs.csv")
    assert list(runs["mitigation"]) == ["none", "angular"] and list(runs["seed"]) == [3, 3]
    record = json.loads((out / "runs/SMAC_301/angular/seed3/compare_run.json").read_text())
    assert f"mitigation.reference_metrics='{stage}/metrics.json'" in record["overrides"]
    monkeypatch.setattr(training, "train", lambda run: pytest.fail("a finished run was trained again"))
    compare.run_comparison(cfg)  # resumes: the same reused baseline, the same mitigation run


def test_reuse_runs_must_be_folders(tmp_path, cache_dir):
    from fairnas.tasks.compare import run_comparison

    cfg = compare_config(tmp_path, cache_dir, ["none"], reuse_runs=[str(tmp_path / "missing")])
    with pytest.raises(FileNotFoundError, match="reuse_runs: '.*missing' is not a folder"):
        run_comparison(cfg)


def test_compare_runs_all_four_mitigations(tmp_path, cache_dir):
    from fairnas.tasks.compare import run_comparison

    cfg = compare_config(tmp_path, cache_dir, ["none", "flipped", "angular", "sensitivenets"], seeds=1, logger=None)
    summary = run_comparison(cfg)
    assert set(summary["mitigation"]) == {"none", "flipped", "angular", "sensitivenets"}
    record = json.loads((tmp_path / "compare/runs/SMAC_301/sensitivenets/seed0/compare_run.json").read_text())
    assert any(
        o.startswith("mitigation.checkpoint=") and o.endswith("none/seed0/checkpoints/last.ckpt'")
        for o in record["overrides"]
    )


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        ({"metrics": ["rank_disparity", "unfairness"]}, r"metrics: \['unfairness'\]; allowed:"),
        ({"split": "train"}, r"split='train'; allowed: \['val', 'test'\]"),
        ({"mitigations": ["none", "flipped", "flipped"]}, "must name each mitigation once"),
        ({"seeds": 0}, "seeds=0 must be a positive number of seeds"),
        ({"seeds": [3, 3]}, r"seeds=\[3, 3\] must be .* a list of distinct seeds >= 0"),
        ({"seeds": [-1]}, r"seeds=\[-1\] must be"),
        ({"models": {"A": ["head=sphereface"]}}, r"compare: .*head/sphereface.* \(in the overrides of mitigation"),
        ({"models": {"a/b": [], "a b": []}}, "collide as folder names"),
    ],
)
def test_bad_settings_are_named_before_training(tmp_path, cache_dir, settings, message):
    from fairnas.tasks.compare import run_comparison

    cfg = compare_config(tmp_path, cache_dir, ["none"])
    for key, value in settings.items():
        cfg[key] = value
    with pytest.raises(ValueError, match=message):
        run_comparison(cfg)
    assert not (tmp_path / "compare" / "runs").exists()


def test_compare_trains_every_model_with_a_front_on_the_fresh_seeds(tmp_path, cache_dir, monkeypatch):
    from fairnas.tasks import compare
    from fairnas.training import run_pool

    trained = []

    def fake_train_once(run_dir, overrides, same_config=False):
        trained.append((run_dir.relative_to(tmp_path / "compare").parts[1], overrides[-1]))
        return {"test": dict.fromkeys(IDENTIFICATION_METRICS, 0.5)}

    monkeypatch.setattr(run_pool, "train_once", fake_train_once)
    cfg = compare_config(tmp_path, cache_dir, ["none"], seeds=3, logger=None, front=str(fake_search(tmp_path / "s")))
    compare.run_comparison(cfg)
    assert trained == [(model, f"seed={seed}") for model in ("SMAC_301", "SMAC_301_arcface") for seed in (3, 4, 5)]

    cfg.front = str(fake_search(tmp_path / "copied", trials=None, final=None))
    trained.clear()
    with pytest.raises(ValueError, match="has no trials.csv or final_trials.csv"):
        compare.run_comparison(cfg)
    assert not trained
