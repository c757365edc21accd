"""bench.comparison.plan and bench/search_plan.py: a strategy comparison sized from a pilot before it
runs, and its verdicts, on generated answer-quality rows (the columns ``bench/search_efficiency.py
--quality-output`` writes)."""

from __future__ import annotations

import json
import re

import numpy as np
import pandas as pd
import pytest
from scipy import stats
from statsmodels.stats.multitest import multipletests

from bench import search_plan
from bench.comparison.plan import detectable_lead, make_plan, planned_seeds, required_seeds, verdicts
from bench.evidence.results import write_manifest

MAX_BUDGET = 4
PLAN = {
    "problem": "generated",
    "reference_point": (1.0, 8.0),
    "max_hypervolume": 5.0,
    "methods": ["random", "cheap", "costly"],
    "budgets": [30, 60],
    "max_budget": MAX_BUDGET,
    "min_lead": 0.02,
    "core_hours": 1.0,
    "first_seed": 1000,
}


def quality_rows(seeds, leads: dict[str, float], sds: dict[str, float], seconds: dict[str, float], budgets=(30, 60)):
    """Answer-quality rows: random search's true share per seed, and each method's = random's + lead + noise."""
    rng = np.random.default_rng(0)
    rows = []
    for budget in budgets:
        base = rng.uniform(0.4, 0.6, len(seeds))
        for method in ["random", *leads]:
            shift = 0.0 if method == "random" else leads[method] + sds[method] * rng.standard_normal(len(seeds))
            for seed, share in zip(seeds, base + shift, strict=True):
                rows.append(
                    {
                        "method": method,
                        "seed": seed,
                        "true_share": share,
                        "run_wall_time_s": seconds[method],
                        "budget": budget * MAX_BUDGET,
                    }
                )
    return pd.DataFrame(rows)


def test_the_seeds_a_paired_t_test_needs_match_statsmodels_and_the_normal_approximation():
    n = required_seeds(sd=0.1, lead=0.02, level=0.05 / 9, power=0.8)
    approximation = ((stats.norm.ppf(1 - 0.05 / 18) + stats.norm.ppf(0.8)) * 0.1 / 0.02) ** 2
    assert approximation < n < approximation * 1.05  # the t-distribution costs a few seeds more
    assert required_seeds(0.05, 0.02, 0.05 / 9, 0.8) < n < required_seeds(0.1, 0.01, 0.05 / 9, 0.8)
    assert detectable_lead(0.1, n, 0.05 / 9, 0.8) == pytest.approx(0.02, rel=0.01)  # the inverse
    assert required_seeds(0.0, 0.02, 0.05, 0.8) == 2 and np.isnan(detectable_lead(0.1, 1, 0.05, 0.8))


def pilot_runs(costly_seconds: float = 100.0) -> pd.DataFrame:
    """Twenty pilot seeds: neither method leads random search; their differences have s.d. 0.05 and 0.1."""
    return quality_rows(
        range(20),
        leads={"cheap": 0.0, "costly": 0.0},
        sds={"cheap": 0.05, "costly": 0.1},
        seconds={"random": 1.0, "cheap": 1.0, "costly": costly_seconds},
    )


@pytest.fixture(scope="module")
def plan():
    return make_plan(pilot_runs(), **PLAN)


def test_the_plan_sizes_every_comparison_at_holms_first_step_and_states_what_the_compute_affords(plan):
    cells = pd.DataFrame(plan["cells"]).set_index(["budget", "method"])
    assert plan["planning_level"] == pytest.approx(0.05 / 2)  # two comparisons with random search per budget
    assert plan["baseline"] == "random" and plan["methods"] == ["cheap", "costly"]
    for budget in (30, 60):
        cheap, costly, random = (cells.loc[(budget, method)] for method in ("cheap", "costly", "random"))
        assert cheap["seeds_needed"] == required_seeds(cheap["pilot_sd"], 0.02, 0.025, 0.8)
        assert cheap["seeds"] == cheap["seeds_needed"]  # affordable: all it needs
        assert cheap["detectable_lead"] <= 0.02 + 1e-9
        assert random["seeds"] == max(cheap["seeds_needed"], costly["seeds_needed"])  # the pairs need its seeds
        # 100 s a run: what the cheap methods leave of one core-hour buys fewer than it needs, and the plan says
        # what those detect
        assert costly["seeds"] < costly["seeds_needed"] and costly["detectable_lead"] > 0.02
    assert 0.9 < cells["core_hours"].sum() <= 1.0 and cells.xs("costly", level="method")["core_hours"].sum() > 0.8
    assert planned_seeds(plan, 30, "cheap") == list(range(1000, 1000 + int(cells.loc[(30, "cheap"), "seeds"])))
    json.dumps(plan)  # JSON-ready as written


def test_a_lead_is_found_and_a_tie_is_bounded_by_the_planned_detectable_lead(plan):
    seeds = range(1000, 1000 + max(cell["seeds"] for cell in plan["cells"]))
    runs = quality_rows(
        seeds,
        leads={"cheap": 0.05, "costly": 0.0},
        sds={"cheap": 0.05, "costly": 0.1},
        seconds={"random": 1.0, "cheap": 1.0, "costly": 100.0},
    )
    pilot_runs = runs.assign(seed=runs["seed"] - 1000)  # seeds outside the plan's are ignored
    table = verdicts(plan, pd.concat([runs, pilot_runs.assign(true_share=9.0)]))
    for budget, rows in table.groupby("budget"):
        rows = rows.set_index("method")
        expected = multipletests(rows["p"], method="holm")[1]
        assert np.allclose(rows["p_holm"], expected)
        assert rows.loc["cheap", "verdict"].startswith("leads by 0.0") and rows.loc["cheap", "p_holm"] < 0.05
        assert rows.loc["costly", "verdict"].startswith("no lead beyond the noise (power 0.8 to detect")
        assert rows.loc["costly", "seeds"] == len(planned_seeds(plan, budget, "costly"))
        planned = runs[
            (runs["budget"] == budget * MAX_BUDGET) & runs["seed"].isin(planned_seeds(plan, budget, "cheap"))
        ]
        mean_share = planned.groupby("method")["true_share"].mean()
        assert rows.loc["cheap", "share"] == pytest.approx(mean_share["cheap"])  # the scores the lead is paired from
        assert rows.loc["cheap", "baseline_share"] == pytest.approx(mean_share["random"])
        assert rows.loc["cheap", "share"] - rows.loc["cheap", "baseline_share"] == pytest.approx(
            rows.loc["cheap", "lead"]
        )
    unfinished = verdicts(plan, runs[runs["method"] != "costly"]).set_index(["budget", "method"])
    assert unfinished.loc[(30, "costly"), "verdict"] == "not run yet"
    assert unfinished.loc[(30, "cheap"), "verdict"].startswith("leads by")
    partial = runs[(runs["method"] != "costly") | (runs["seed"] < 1002)]  # two of its planned seeds
    assert verdicts(plan, partial)["verdict"].iloc[1].startswith("not finished: 2 of ")
    # a comparison not run counts as p = 1 in its family: running fewer never makes the others' p smaller
    cheap = unfinished.loc[(30, "cheap")]
    assert cheap["p_holm"] == pytest.approx(multipletests([cheap["p"], 1.0], method="holm")[1][0])


def test_a_plan_against_another_baseline_pairs_every_comparison_with_it_not_with_random_search():
    """E.g. a new default against today's: the s.d., the seeds and the verdicts are of the differences from it."""
    pilot = pilot_runs(costly_seconds=1.0)
    plan = make_plan(pilot, **PLAN | {"methods": ["cheap", "costly"]}, baseline="cheap")
    assert plan["baseline"] == "cheap" and plan["methods"] == ["costly"] and plan["planning_level"] == 0.05
    wide = pilot[pilot["budget"] == 30 * MAX_BUDGET].pivot_table(index="seed", columns="method", values="true_share")
    costly = next(cell for cell in plan["cells"] if cell["budget"] == 30 and cell["method"] == "costly")
    assert costly["pilot_sd"] == pytest.approx((wide["costly"] - wide["cheap"]).std(ddof=1))
    assert costly["pilot_sd"] != pytest.approx((wide["costly"] - wide["random"]).std(ddof=1))

    seeds = range(1000, 1000 + max(cell["seeds"] for cell in plan["cells"]))
    runs = quality_rows(
        seeds,
        leads={"cheap": 0.2, "costly": 0.1},
        sds={"cheap": 0.0, "costly": 0.01},
        seconds=dict.fromkeys(PLAN["methods"], 1.0),
    )
    table = verdicts(plan, runs)
    assert (table["method"] == "costly").all()
    assert np.allclose(table["lead"], -0.1, atol=0.005)  # behind cheap, though ahead of random search
    assert table["verdict"].str.startswith("trails by 0.1").all()


def test_the_command_plans_then_judges_and_refuses_a_pilot_that_overlaps_the_plan(tmp_path, capsys):
    pilot = quality_rows(
        range(10),
        leads={"smac": 0.0},
        sds={"smac": 0.1},
        seconds={"random": 1.0, "smac": 2.0},
        budgets=(1, 2),
    ).assign(budget=lambda frame: frame["budget"] // MAX_BUDGET * 8)  # the analytic problem: 8 epochs a trial
    pilot.to_csv(tmp_path / "pilot.csv", index=False)
    common = ["--pilot", str(tmp_path / "pilot.csv"), "--problem", "analytic", "--methods", "random", "smac"]
    common += ["--budgets", "1", "2", "--core-hours", "1", "--output", str(tmp_path / "plan.json")]
    with pytest.raises(SystemExit):
        search_plan.main(["plan", *common, "--first-seed", "5"])
    assert "--first-seed 5 overlaps the pilot's seeds (up to 9)" in capsys.readouterr().err
    search_plan.main(["plan", *common, "--work-dir", "outputs/default_check"])
    plan = json.loads((tmp_path / "plan.json").read_text())
    assert plan["problem"] == "analytic" and plan["reference_point"] == [1.1, 11.0] and plan["first_seed"] == 1000
    assert len(plan["commands"]) == 4 and "--methods smac --total-budget 16 --first-seed 1000" in plan["commands"][3]
    assert "--work-dir outputs/default_check/smac_16 --quality-output outputs/default_check/" in plan["commands"][3]
    with pytest.raises(SystemExit):
        search_plan.main(["plan", *common, "--baseline", "nsga2"])
    assert "--methods must include the baseline nsga2" in capsys.readouterr().err

    confirmatory = pilot.assign(seed=pilot["seed"] + 1000)
    confirmatory.to_csv(tmp_path / "quality.csv", index=False)
    output = tmp_path / "verdicts.csv"
    figure = tmp_path / "leads.png"
    search_plan.main(
        ["verdicts", "--plan", str(tmp_path / "plan.json"), "--quality", str(tmp_path / "quality.csv")]
        + ["--output", str(output), "--figure", str(figure)]
    )
    table = pd.read_csv(output)
    assert list(table["budget"]) == [1, 2] and (table["method"] == "smac").all()
    assert output.with_suffix(".md").read_text().startswith("| strategy | 1 full trials | 2 full trials |\n")
    assert figure.stat().st_size > 10_000


def test_a_real_table_plan_on_the_flattering_score_is_refused_and_decided_again_on_held_out_seeds(tmp_path, capsys):
    """A plan committed with ``true_share`` on a real table: ``verdicts`` refuses it in one line; ``redecide`` sizes
    it again on the held-out score from the same pilot and seeds, judges the committed runs by it and records in the
    folder's manifest what moved; a missing plan or a quality file without the score's column is one line too."""
    pilot = quality_rows(range(20), leads={"smac": 0.0}, sds={"smac": 0.1}, seconds={"random": 1.0, "smac": 1.0})
    pilot = pilot.assign(heldout_true_share=pilot["true_share"] - 0.05 * (pilot["method"] == "smac"))
    settings = {**PLAN, "methods": ["random", "smac"], "budgets": [30], "problem": "table:dpn_showcase_noisy"}
    plan = make_plan(pilot, **settings, score="true_share")
    (tmp_path / "plan.json").write_text(json.dumps(plan))
    confirmatory = pilot.assign(seed=pilot["seed"] + 1000)
    confirmatory = pd.concat([confirmatory.assign(seed=confirmatory["seed"] + 20 * k) for k in range(40)])
    confirmatory.to_csv(tmp_path / "quality.csv", index=False)
    pilot.to_csv(tmp_path / "pilot.csv", index=False)
    write_manifest(tmp_path, commands=["the plan's commands"], commit="abc1234")
    files = ["--plan", str(tmp_path / "plan.json"), "--quality", str(tmp_path / "quality.csv")]
    files += ["--output", str(tmp_path / "verdicts.csv")]
    with pytest.raises(SystemExit):
        search_plan.main(["verdicts", *files])
    assert "which flatters a search on a real table; decide it on heldout_true_share" in capsys.readouterr().err
    search_plan.main(["redecide", *files, "--pilot", str(tmp_path / "pilot.csv")])
    table = pd.read_csv(tmp_path / "verdicts.csv")
    assert list(table["score"]) == ["heldout_true_share"] and table["lead"].iloc[0] == pytest.approx(-0.05, abs=0.02)
    assert table["all_seeds_lead"].iloc[0] == pytest.approx(0.0, abs=0.02) and table["verdict"][0].startswith("trails")
    record = json.loads((tmp_path / "manifest.json").read_text())["redecided"][-1]
    assert record["score"] == "heldout_true_share" and record["sized_on"] == "true_share"
    assert record["pilot"] == str(tmp_path / "pilot.csv") and record["command"].startswith("python bench/search_plan")
    for bad, message in (
        (["--plan", str(tmp_path / "nosuch.json")], "--plan .*nosuch.json: not a readable plan.json"),
        (["--quality", str(tmp_path / "pilot.csv").replace("pilot", "nosuch")], "--quality .*nosuch.csv is not a file"),
    ):
        with pytest.raises(SystemExit):
            search_plan.main(["verdicts", *files, *bad])
        assert re.search(message, capsys.readouterr().err)
    pilot.drop(columns="heldout_true_share").to_csv(tmp_path / "old.csv", index=False)
    with pytest.raises(SystemExit):
        search_plan.main(["redecide", *files, "--pilot", str(tmp_path / "old.csv")])
    assert "--pilot " in (err := capsys.readouterr().err) and "lacks the columns ['heldout_true_share']" in err
