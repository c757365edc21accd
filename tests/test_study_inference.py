"""The statistics of a study's verdicts against scipy and statsmodels on hand-made paired data: the one-sided paired
t-test and its interval, Holm's correction, the minimum detectable effect, the fewest seeds at which a claim can
hold, and the verdicts they give (2 seeds, ties, zero variance, a crashed seed, an untrained mitigation)."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from scipy import stats
from statsmodels.stats.multitest import multipletests
from statsmodels.stats.power import TTestPower

from fairnas.study import claims
from fairnas.study.inference import (
    holm,
    intersection_union,
    min_seeds,
    minimum_detectable_effect,
    paired_test,
    seeds_for_power,
)
from fairnas.study.power import main as plan_main
from fairnas.study.power import plan_seeds, power_at, stage_seeds


@pytest.mark.parametrize(
    "differences",
    [
        [-0.10, -0.12],  # two seeds: df 1
        [-0.10, -0.11, -0.09, 0.02, -0.05],
        [0.03, 0.01, 0.02, 0.05, 0.04, 0.00],  # the wrong way
        [-0.02, -0.02, 0.01, 0.01, -0.02],  # ties
    ],
)
def test_the_paired_test_is_scipys_one_sided_t_test_with_its_two_sided_interval(differences):
    test = paired_test(differences)
    one_sided = stats.ttest_1samp(differences, 0.0, alternative="less")
    low, high = stats.ttest_1samp(differences, 0.0).confidence_interval(0.95)
    assert test.n == len(differences) and test.p == pytest.approx(one_sided.pvalue, rel=1e-12)
    assert (test.ci_low, test.ci_high) == pytest.approx((low, high), rel=1e-12)
    assert test.effect == pytest.approx(np.mean(differences))
    assert test.d_z == pytest.approx(-np.mean(differences) / np.std(differences, ddof=1))


def test_the_same_difference_in_every_seed_is_decided_by_its_sign_where_scipy_has_no_p():
    assert math.isnan(stats.ttest_1samp([0.0, 0.0, 0.0], 0.0, alternative="less").pvalue)  # scipy: undefined
    assert paired_test([0.0] * 5).p == 1.0  # a run that reproduces its baseline: no decrease
    lower = paired_test([-0.25] * 5)
    assert lower.p == 0.0 and lower.sd == 0.0 and lower.ci_low == lower.ci_high == -0.25 and lower.d_z == math.inf
    assert paired_test([0.5] * 5).p == 1.0
    assert math.isnan(paired_test([-0.1]).p) and paired_test([]).n == 0  # one seed: no test
    rounding = paired_test([-1e-13, -1e-13 + 1e-29, -1e-13])  # a subtraction's rounding error is no decrease
    assert rounding.p == 1.0 and rounding.effect == 0.0
    assert seeds_for_power(math.inf, 0.01, 0.8, at_least=5) == 5  # planned from a constant decrease


def test_holm_matches_statsmodels_and_gives_each_claim_its_step_level():
    p = [0.01, 0.04, 0.03, 0.002]
    adjusted, levels = holm(p, 0.05)
    assert adjusted == pytest.approx(list(multipletests(p, alpha=0.05, method="holm")[1]))
    assert levels == pytest.approx([0.05 / 3, 0.05 / 1, 0.05 / 2, 0.05 / 4])
    assert holm([float("nan"), 0.001], 0.05)[0] == pytest.approx([1.0, 0.002])  # a missing p counts as 1
    assert holm([], 0.05) == ([], [])


def test_minimum_detectable_effect_and_seeds_for_power_invert_statsmodels_power():
    mde = minimum_detectable_effect(6, 0.03, 0.05, 0.8)
    power = TTestPower().power(effect_size=mde / 0.03, nobs=6, alpha=0.05, alternative="larger")
    assert power == pytest.approx(0.8, abs=1e-6)
    assert minimum_detectable_effect(2, 0.03, 0.05, 0.8) > 4 * mde  # one degree of freedom detects only huge effects
    assert math.isnan(minimum_detectable_effect(1, 0.03, 0.05, 0.8))
    n = seeds_for_power(1.8, 0.05 / 7, 0.8)
    analysis = TTestPower()
    assert analysis.power(effect_size=1.8, nobs=n, alpha=0.05 / 7, alternative="larger") >= 0.8
    assert analysis.power(effect_size=1.8, nobs=n - 1, alpha=0.05 / 7, alternative="larger") < 0.8
    assert seeds_for_power(-0.5, 0.05, 0.8) is None and seeds_for_power(0.05, 0.05, 0.8, at_most=20) is None


def test_no_claim_holds_on_fewer_seeds_than_a_sign_can_tell_apart_from_chance():
    assert [min_seeds(alpha) for alpha in (0.05, 0.01, 0.25, 1 / 16, 0.9)] == [5, 7, 3, 5, 2]  # 2^-n < alpha
    assert intersection_union([paired_test([-1, -2, -3]), paired_test([-1, 1, -2])]) == 1


def runs_of(seeds_values: dict[str, list[float]], column: str = "test/rank_disparity") -> pd.DataFrame:
    """A runs table: model ``M`` with mitigation ``none`` and each key of ``seeds_values`` (one value per seed)."""
    rows = [
        {"model": "M", "kind": "default", "mitigation": mitigation, "seed": seed, column: value, "test/error": 0.5}
        for mitigation, values in seeds_values.items()
        for seed, value in enumerate(values)
    ]
    return pd.DataFrame(rows).assign(stage="mitigations", data="main", status="success", error_message="")


def decide(runs: pd.DataFrame, mitigations: list[str], primary=("mitigations/*",), alpha=0.05) -> pd.DataFrame:
    found = [
        claims.lowers(runs, "M", name, "test/rank_disparity", claim_id=f"mitigations/{name}/default/test")
        for name in mitigations
    ]
    return claims.decide(found, claims.ClaimSettings(alpha=alpha, primary=tuple(primary))).set_index("id")


def test_verdicts_follow_the_adjusted_p_and_the_seed_floor():
    base = [10.0, 12.0, 9.0, 11.0, 10.5, 9.5]
    runs = runs_of(
        {
            "none": base,
            "strong": [b - 5 + e for b, e in zip(base, [0.1, -0.2, 0.3, 0.0, -0.1, 0.2], strict=True)],
            "weak": [b - 0.4 + e for b, e in zip(base, [1.0, -1.2, 0.8, -0.6, 0.4, 0.2], strict=True)],
            "two_seeds": [b - 5 + e for b, e in zip(base[:2], [0.1, -0.1], strict=True)],
        }
    )
    table = decide(runs, ["strong", "weak", "two_seeds"])
    raw = {name: table.loc[f"mitigations/{name}/default/test", "p"] for name in ("strong", "weak", "two_seeds")}
    for name in raw:
        seeds = 2 if name == "two_seeds" else 6
        treated = runs[runs["mitigation"] == name].set_index("seed")["test/rank_disparity"]
        baseline = runs[runs["mitigation"] == "none"].set_index("seed")["test/rank_disparity"].loc[treated.index]
        expected = stats.ttest_rel(treated, baseline, alternative="less").pvalue
        assert raw[name] == pytest.approx(expected) and table.loc[f"mitigations/{name}/default/test", "n"] == seeds
    adjusted = multipletests(list(raw.values()), method="holm")[1]
    assert list(table["p_holm"]) == pytest.approx(list(adjusted))
    assert list(table["verdict"]) == ["holds", "does not hold", "too few seeds"]
    assert set(table["family"]) == {"primary"} and (table["ci_low"] < table["effect"]).all()
    # the same claims, exploratory: unadjusted p decides
    exploratory = decide(runs, ["strong", "weak"], primary=())
    assert exploratory["p_holm"].isna().all() and (exploratory["level"] == 0.05).all()
    assert list(exploratory["verdict"]) == ["holds", "does not hold"]


def test_a_mitigation_reproducing_its_baseline_does_not_hold_and_one_not_trained_is_not_applicable():
    runs = runs_of({"none": [3.0, 4.0, 5.0, 6.0, 7.0], "same": [3.0, 4.0, 5.0, 6.0, 7.0]})
    skipped = runs[runs["mitigation"] == "none"].assign(
        mitigation="skipped", status=claims.NOT_APPLICABLE, error_message="it changes nothing"
    )
    table = decide(pd.concat([runs, skipped], ignore_index=True), ["same", "skipped"])
    same, skip = table.loc["mitigations/same/default/test"], table.loc["mitigations/skipped/default/test"]
    assert same["verdict"] == "does not hold" and same["p"] == 1.0 and "the same as its baseline" in same["evidence"]
    assert skip["verdict"] == claims.NOT_APPLICABLE and "it changes nothing" in skip["evidence"]
    assert math.isnan(skip["p_holm"])  # not in Holm's family: not tested
    assert same["p_holm"] == 1.0


def test_dominance_needs_both_objectives_and_the_larger_p_decides():
    rows = []
    errors = [(0.40, 0.50), (0.42, 0.53), (0.41, 0.50), (0.45, 0.52), (0.40, 0.49)]
    for seed, (a_error, b_error) in enumerate(errors):
        rows.append({"model": "A", "seed": seed, "val/error": a_error, "val/rank_disparity": 1.0 + 0.1 * seed})
        rows.append({"model": "B", "seed": seed, "val/error": b_error, "val/rank_disparity": 1.2 + 0.05 * seed})
    runs = pd.DataFrame(rows).assign(kind="x", stage="final", mitigation="none", data="main", status="success")
    claim = claims.dominance(runs, "A", "B", claim_id="final/dominates/default/val", split="val")
    error_p = stats.ttest_rel([e[0] for e in errors], [e[1] for e in errors], alternative="less").pvalue
    rank_p = stats.ttest_rel([1.0 + 0.1 * s for s in range(5)], [1.2 + 0.05 * s for s in range(5)], alternative="less")
    assert claim.test.p == pytest.approx(max(error_p, rank_p.pvalue))
    assert claim.metric == "val/rank_disparity" and claim.stage == "final"
    missing = runs.copy()
    missing.loc[(missing["model"] == "A") & (missing["seed"] == 4), "val/rank_disparity"] = float("nan")
    partial = claims.dominance(missing, "A", "B", claim_id="final/dominates/default/val", split="val")
    assert partial.test.n == 4  # both objectives must hold: the claim rests on the seeds both have
    crashed = runs.copy()
    crashed.loc[0, "status"] = "crashed"
    claim = claims.dominance(crashed, "A", "B", claim_id="final/dominates/default/val", split="val")
    assert claim.test.n == 4 and "1 runs crashed" in claim.evidence


@pytest.mark.parametrize(
    ("mapping", "message"),
    [
        ({"alpha": 1.5}, "study.claims.alpha=1.5"),
        ({"power": 0}, "study.claims.power=0"),
        ({"primary": "final/*"}, "study.claims.primary"),
        ({"level": 0.1}, "unknown keys ['level']"),
    ],
)
def test_bad_claim_settings_are_named(mapping, message):
    with pytest.raises(ValueError, match=message.replace("[", r"\[").replace("]", r"\]")):
        claims.ClaimSettings.from_mapping(mapping)


def test_primary_patterns_that_name_no_claim_are_found():
    settings = claims.ClaimSettings(primary=("final/dominates/*/test", "mitigation/*/default/test"))
    ids = ["final/dominates/default/test", "mitigations/flipped/default/test"]
    assert settings.unmatched(ids) == ["mitigation/*/default/test"]


def test_the_power_rule_plans_seeds_in_holms_order():
    planning = pd.DataFrame(
        {
            "id": ["a", "b", "c", "d"],
            "stage": ["final", "final", "mitigations", "robustness"],
            "family": ["primary", "primary", "primary", "exploratory"],
            "d_z": [1.8, -0.8, 4.6, 1.5],
        }
    )
    plan = plan_seeds(planning).set_index("id")
    assert plan.loc[["c", "a", "b"], "level"].tolist() == pytest.approx([0.05 / 3, 0.05 / 2, 0.05])
    assert plan.loc["a", "seeds"] == seeds_for_power(1.8, 0.025, 0.8, at_least=5)
    assert plan.loc["c", "seeds"] == 5 and plan.loc["d", "level"] == 0.05  # the seed floor; exploratory at alpha
    assert not plan.loc["b", "reachable"] and plan.loc["b", "seeds"] == 5 and plan.loc["b", "power_at_seeds"] < 0.01
    assert (plan.loc[["a", "c", "d"], "power_at_seeds"] >= 0.8).all()
    untrained = planning.assign(verdict=["holds", "does not hold", "not applicable", "holds"])
    assert list(plan_seeds(untrained)["id"]) == ["a", "b", "d"]  # a mitigation the study did not train: no test
    assert plan_seeds(untrained).set_index("id").loc["a", "level"] == pytest.approx(0.05 / 2)
    assert stage_seeds(plan.reset_index()).to_dict() == {
        "final": plan.loc["a", "seeds"],
        "mitigations": 5,
        "robustness": 5,
    }


def test_the_power_at_a_budgets_seeds_is_statsmodels_power_at_the_planned_level(tmp_path, capsys):
    """``--keep`` plans only the claims a cheaper design still tests (fewer primary claims: easier Holm levels) and
    ``--given`` reports the power each has at the seeds its stage is given."""
    planning = pd.DataFrame(
        {
            "id": ["final/a", "mitigations/b", "transfer/c"],
            "stage": ["final", "mitigations", "transfer"],
            "family": ["primary"] * 3,
            "d_z": [1.6, 1.5, 0.7],
        }
    )
    plan = plan_seeds(planning[planning["stage"] != "transfer"])
    given = power_at(plan, {"final": 7})
    expected = TTestPower().power(effect_size=1.6, nobs=7, alpha=0.05 / 2, alternative="larger")
    assert given.iloc[0] == pytest.approx(expected) and np.isnan(given.iloc[1])
    path = tmp_path / "claims.csv"
    planning.to_csv(path, index=False)
    plan_main([str(path), "--keep", "final/*", "mitigations/*", "--given", "final=7", "mitigations=7"])
    printed = capsys.readouterr().out
    assert "transfer/c" not in printed and f"{expected:.4g}" in printed
    for bad, message in ((["--given", "final=1"], "not STAGE=SEEDS"), (["--given", "sweep=5"], "have no claims")):
        with pytest.raises(SystemExit):
            plan_main([str(path), *bad])
        assert message in capsys.readouterr().err
