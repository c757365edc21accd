"""The statistics of a study's verdicts against scipy and statsmodels on hand-made paired data: the one-sided paired
t-test and its interval, the exact sign-flip test, Holm's correction of each, the plan level alpha / m, the minimum
detectable effect at it, the fewest seeds at which a claim can hold, the noncentral-t interval of d_z, and the
verdicts they give (2 seeds, ties, zero variance, a t-test the sign-flip test does not confirm, a crashed seed, an
untrained mitigation)."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pandas as pd
import pytest
from scipy import stats
from statsmodels.stats.multitest import multipletests
from statsmodels.stats.power import TTestPower

from fairnas.study import claims
from fairnas.study.inference import (
    ZERO_VARIANCE,
    d_z_interval,
    family_min_seeds,
    holm,
    intersection_union,
    min_seeds,
    minimum_detectable_effect,
    paired_test,
    plan_level,
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


def test_the_sign_flip_p_is_the_share_of_the_2_to_the_n_sign_patterns_as_scipy_enumerates_them():
    for differences in ([-0.10, -0.12], [-0.10, -0.11, -0.09, 0.02, -0.05], [-0.02, -0.02, 0.01, 0.01, -0.02, 0.0]):
        values = np.asarray(differences)
        means = [np.mean(values * signs) for signs in itertools.product((1, -1), repeat=len(values))]
        by_hand = np.mean([mean <= values.mean() + 1e-12 for mean in means])
        scipys = stats.permutation_test(
            (values,), np.mean, permutation_type="samples", n_resamples=np.inf, alternative="less"
        ).pvalue
        assert paired_test(differences).p_exact == pytest.approx(by_hand) == pytest.approx(scipys)
    assert paired_test([-1.0, -2.0, -0.5, -3.0, -1.5, -2.5, -1.2]).p_exact == 1 / 128  # the smallest p at 7 seeds
    drawn = np.random.default_rng(0).normal(-1.0, 1.0, 24)  # beyond exact enumeration: drawn, repeatably
    assert 0 < paired_test(drawn).p_exact < 1e-4 and paired_test(drawn).p_exact == paired_test(drawn.copy()).p_exact


def test_the_same_difference_in_every_seed_is_degenerate_with_no_interval_and_no_detectable_effect():
    assert math.isnan(stats.ttest_1samp([0.0, 0.0, 0.0], 0.0, alternative="less").pvalue)  # scipy: undefined
    same = paired_test([0.0] * 5)  # a run that reproduces its baseline: no decrease
    assert same.p == same.p_exact == 1.0 and same.status == ZERO_VARIANCE and math.isnan(same.d_z)
    lower = paired_test([-0.25] * 5)
    assert lower.p == 0.0 and lower.p_exact == 2.0**-5 and lower.sd == 0.0 and lower.d_z == math.inf
    assert math.isnan(lower.ci_low) and math.isnan(lower.ci_high)  # not [-0.25, -0.25]: no spread to measure
    assert math.isnan(minimum_detectable_effect(5, lower.sd, 0.05, 0.8))
    assert all(math.isnan(end) for end in d_z_interval(lower.d_z, 5))
    assert paired_test([0.5] * 5).p == 1.0
    assert math.isnan(paired_test([-0.1]).p) and paired_test([]).n == 0  # one seed: no test
    assert paired_test([-0.1]).status == "one seed" and paired_test([]).status == "no paired seeds"
    rounding = paired_test([-1e-13, -1e-13 + 1e-29, -1e-13])  # a subtraction's rounding error is no decrease
    assert rounding.p == 1.0 and rounding.effect == 0.0
    assert seeds_for_power(math.inf, 0.01, 0.8, at_least=5) == 5  # planned from a constant decrease


def test_holm_matches_statsmodels_and_the_plan_level_is_alpha_over_m():
    p = [0.01, 0.04, 0.03, 0.002]
    assert holm(p, 0.05) == pytest.approx(list(multipletests(p, alpha=0.05, method="holm")[1]))
    assert holm([float("nan"), 0.001], 0.05) == pytest.approx([1.0, 0.002])  # a missing p counts as 1
    assert holm([], 0.05) == []
    assert plan_level(0.05, 7) == 0.05 / 7 and plan_level(0.05, 0) == plan_level(0.05) == 0.05


def test_minimum_detectable_effect_and_seeds_for_power_invert_statsmodels_power():
    mde = minimum_detectable_effect(6, 0.03, 0.05, 0.8)
    power = TTestPower().power(effect_size=mde / 0.03, nobs=6, alpha=0.05, alternative="larger")
    assert power == pytest.approx(0.8, abs=1e-6)
    assert minimum_detectable_effect(5, 0.03, 0.05, 0.8) > mde  # fewer seeds: only larger effects
    assert math.isnan(minimum_detectable_effect(1, 0.03, 0.05, 0.8))
    # below the seed floor of its level the sign-flip test cannot reject: no effect is detectable
    assert minimum_detectable_effect(2, 0.03, 0.05, 0.8) == math.inf
    assert minimum_detectable_effect(7, 0.03, 0.05 / 7, 0.8) == math.inf
    n = seeds_for_power(1.8, 0.05 / 7, 0.8)
    analysis = TTestPower()
    assert analysis.power(effect_size=1.8, nobs=n, alpha=0.05 / 7, alternative="larger") >= 0.8
    assert analysis.power(effect_size=1.8, nobs=n - 1, alpha=0.05 / 7, alternative="larger") < 0.8
    assert seeds_for_power(-0.5, 0.05, 0.8) is None and seeds_for_power(0.05, 0.05, 0.8, at_most=20) is None


def test_no_claim_holds_on_fewer_seeds_than_a_sign_can_tell_apart_from_chance_at_its_plan_level():
    assert [min_seeds(alpha) for alpha in (0.05, 0.01, 0.25, 1 / 16, 0.9)] == [5, 7, 3, 5, 2]  # 2^-n < alpha
    for alpha, m in itertools.product((0.05, 0.01, 0.1), range(1, 12)):
        floor = family_min_seeds(alpha, m)  # floor(log2(m / alpha)) + 1: the first Holm step alpha / m reachable
        assert floor == math.floor(math.log2(m / alpha)) + 1
        assert 2.0**-floor < alpha / m <= 2.0 ** -(floor - 1)
    assert family_min_seeds(0.05, 7) == 8 and 2.0**-7 > 0.05 / 7  # 7 seeds: 1/128 = 0.0078 > 0.0071
    assert intersection_union([paired_test([-1, -2, -3]), paired_test([-1, 1, -2])]) == 1


@pytest.mark.parametrize(("d_z", "n"), [(1.0, 7), (0.4, 2), (-2.1, 3), (5.0, 5), (0.3, 30)])
def test_the_d_z_interval_inverts_the_noncentral_t_in_its_noncentrality(d_z, n):
    low, high = d_z_interval(d_z, n)
    t = d_z * math.sqrt(n)
    assert stats.nct.cdf(t, n - 1, low * math.sqrt(n)) == pytest.approx(0.975, abs=1e-8)
    assert stats.nct.cdf(t, n - 1, high * math.sqrt(n)) == pytest.approx(0.025, abs=1e-8)
    assert low < d_z < high


def test_the_d_z_interval_approaches_the_normal_approximation_at_many_seeds():
    """At large n, d_z is about normal with variance 1 / n + d_z^2 / (2 n) (Hedges & Olkin): the s.d.'s own
    uncertainty is the second term, which the mean's interval divided by the s.d. leaves out."""
    d_z, n = 0.8, 2000
    low, high = d_z_interval(d_z, n)
    half = stats.norm.ppf(0.975) * math.sqrt(1 / n + d_z**2 / (2 * n))
    assert (low, high) == pytest.approx((d_z - half, d_z + half), abs=0.002)
    assert high - low > 1.1 * 2 * stats.t.ppf(0.975, n - 1) / math.sqrt(n)  # (mean interval) / s.d.: too narrow


def test_the_d_z_interval_covers_the_true_standardised_effect_95_percent_of_the_time():
    rng = np.random.default_rng(7)
    true, n, draws = 0.8, 6, 400
    covered = 0
    for _ in range(draws):
        differences = rng.normal(-true, 1.0, n)  # a decrease of 0.8 s.d.
        low, high = d_z_interval(paired_test(differences).d_z, n)
        covered += low <= true <= high
    assert abs(covered / draws - 0.95) < 3.5 * math.sqrt(0.95 * 0.05 / draws)  # binomial: within 3.5 s.e.


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


def test_verdicts_follow_both_adjusted_p_values_and_the_seed_floor():
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
        flips = stats.permutation_test(
            ((treated - baseline).to_numpy(),),
            np.mean,
            permutation_type="samples",
            n_resamples=np.inf,
            alternative="less",
        )
        assert table.loc[f"mitigations/{name}/default/test", "p_exact"] == pytest.approx(flips.pvalue)
    adjusted = multipletests(list(raw.values()), method="holm")[1]
    assert list(table["p_holm"]) == pytest.approx(list(adjusted))
    exact = multipletests(list(table["p_exact"]), method="holm")[1]  # each test's family adjusted on its own
    assert list(table["p_exact_holm"]) == pytest.approx(list(exact))
    assert table.loc["mitigations/strong/default/test", "p_exact_holm"] == pytest.approx(3 / 64)  # 1/64, 3 claims
    assert list(table["verdict"]) == ["holds", "does not hold", "too few seeds"]
    assert (table["level"] == 0.05 / 3).all()  # the plan level: floor(log2(3 / 0.05)) + 1 = 6 seeds
    assert set(table["family"]) == {"primary"} and (table["ci_low"] < table["effect"]).all()
    # the same claims, exploratory: unadjusted p decides
    exploratory = decide(runs, ["strong", "weak"], primary=())
    assert exploratory["p_holm"].isna().all() and exploratory["p_exact_holm"].isna().all()
    assert (exploratory["level"] == 0.05).all()
    assert list(exploratory["verdict"]) == ["holds", "does not hold"]


def test_the_detectable_effect_is_stated_at_alpha_over_m_whatever_step_the_observed_p_reaches():
    """Holm tests the claim of the smallest p at alpha / m and the largest at alpha; the plan's level is alpha / m
    for every one of them, so a claim's stated detectable effect does not move with the p-values."""
    base = [10.0, 12.0, 9.0, 11.0, 10.5, 9.5, 10.2, 11.1, 9.8]
    noise = [0.4, -0.5, 0.3, -0.2, 0.1, 0.6, -0.4, -0.3, 0.0]
    strong = [b - 3 + e for b, e in zip(base, noise, strict=True)]
    weak = [b - 0.2 + e for b, e in zip(base, noise[::-1], strict=True)]
    table = decide(runs_of({"none": base, "strong": strong, "weak": weak}), ["strong", "weak"])
    assert table.loc["mitigations/strong/default/test", "p"] < table.loc["mitigations/weak/default/test", "p"]
    d = TTestPower().solve_power(effect_size=None, nobs=9, alpha=0.05 / 2, power=0.8, alternative="larger")
    for claim_id in table.index:  # the weak claim is Holm's last step (alpha / 1), yet is planned at alpha / 2
        assert table.loc[claim_id, "level"] == 0.05 / 2
        assert table.loc[claim_id, "mde"] == pytest.approx(d * table.loc[claim_id, "sd"])
    # another claim of other p in the family: the weak claim's level and detectable effect stay the same
    other = decide(runs_of({"none": base, "weak": weak, "other": [b + 5 for b in base]}), ["weak", "other"])
    assert other.loc["mitigations/weak/default/test", "mde"] == table.loc["mitigations/weak/default/test", "mde"]


@pytest.mark.parametrize("primary", [("mitigations/*",), ()])
def test_a_t_test_the_exact_sign_flip_test_does_not_confirm_does_not_hold(primary):
    """Six seeds, four large decreases and two small increases: the t-test's p is 0.026, but 4 of the 64 sign
    patterns (the increases flipped or not) give a mean as low, so the sign-flip p is 0.0625."""
    base = [10.0, 12.0, 9.0, 11.0, 10.5, 9.5]
    treated = [b + d for b, d in zip(base, [-10, -9, -11, -10, 1, 2], strict=True)]
    row = decide(runs_of({"none": base, "mixed": treated}), ["mixed"], primary=primary).iloc[0]
    assert row["p"] == pytest.approx(stats.ttest_rel(treated, base, alternative="less").pvalue) and row["p"] < 0.05
    assert row["p_exact"] == pytest.approx(4 / 64) and row["n"] >= min_seeds(row["level"])
    assert row["verdict"] == "does not hold"


def test_a_primary_claim_below_its_familys_floor_has_too_few_seeds_as_the_showcases_balanced_claim():
    """Seven seeds in a family of seven (the showcase's Balanced claim): 1/128 is not below 0.05 / 7."""
    base = [10.0, 12.0, 9.0, 11.0, 10.5, 9.5, 10.2]
    names = [f"m{i}" for i in range(7)]
    lowered = {name: [b - 4 + 0.3 * ((i + k) % 3) for k, b in enumerate(base)] for i, name in enumerate(names)}
    table = decide(runs_of({"none": base, **lowered}), names)
    assert (table["level"] == 0.05 / 7).all() and (table["p_holm"] < 0.05).all()  # the t-test alone would hold
    assert (table["p_exact"] == 1 / 128).all() and (table["verdict"] == "too few seeds").all()
    assert (table["mde"] == math.inf).all()
    assert "the sign-flip test needs 8 seeds" in claims.finding(table.reset_index().iloc[0].to_dict())
    # the report says plainly that no claim can hold, and names the floor
    note = claims.below_floor(table.reset_index())
    assert note is not None and note.startswith("No claim of this study can hold: every tested claim rests on 7 seeds")
    assert "8 seeds at level 0.00714" in note
    # with an exploratory claim that reaches its floor (5 at 0.05), only the primary ones are named
    extra = {"m7": lowered["m0"]}
    both = decide(
        runs_of({"none": base, **lowered, **extra}), [*names, "m7"], primary=[f"mitigations/{n}/*" for n in names]
    )
    assert both.loc["mitigations/m7/default/test", "verdict"] == "holds"
    note = claims.below_floor(both.reset_index())
    assert note is not None and note.startswith("7 of 8 tested claims rest on fewer seeds than the floor")
    assert "mitigations/m7/default/test" not in note and "mitigations/m0/default/test" in note
    held = decide(runs_of({"none": base, **lowered}), names, primary=())
    assert claims.below_floor(held.reset_index()) is None and (held["verdict"] == "holds").all()


def test_a_mitigation_reproducing_its_baseline_is_degenerate_and_one_not_trained_is_not_applicable():
    runs = runs_of({"none": [3.0, 4.0, 5.0, 6.0, 7.0], "same": [3.0, 4.0, 5.0, 6.0, 7.0]})
    skipped = runs[runs["mitigation"] == "none"].assign(
        mitigation="skipped", status=claims.NOT_APPLICABLE, error_message="it changes nothing"
    )
    table = decide(pd.concat([runs, skipped], ignore_index=True), ["same", "skipped"])
    same, skip = table.loc["mitigations/same/default/test"], table.loc["mitigations/skipped/default/test"]
    assert same["verdict"] == "does not hold" and same["p"] == same["p_exact"] == 1.0
    assert "the same as its baseline" in same["evidence"] and "zero variance: no interval" in same["evidence"]
    assert same["status"] == ZERO_VARIANCE and same["sd"] == 0.0 and math.isnan(same["d_z"])
    assert math.isnan(same["ci_low"]) and math.isnan(same["ci_high"]) and math.isnan(same["mde"])
    found = claims.finding(same.to_dict() | {"claim": "same", "family": "primary", "n": 5})
    assert "degenerate: zero variance, so no interval and no detectable effect" in found
    assert skip["verdict"] == claims.NOT_APPLICABLE and "it changes nothing" in skip["evidence"]
    assert skip["status"] == claims.NOT_TRAINED and math.isnan(skip["p_holm"])  # not in Holm's family: not tested
    assert same["p_holm"] == same["p_exact_holm"] == 1.0 and same["level"] == 0.05  # a family of one


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
    rank = np.array([1.0 + 0.1 * s for s in range(5)]) - np.array([1.2 + 0.05 * s for s in range(5)])
    error = np.array([a - b for a, b in errors])
    exact = [
        stats.permutation_test((d,), np.mean, permutation_type="samples", n_resamples=np.inf, alternative="less").pvalue
        for d in (error, rank)
    ]
    assert claim.test.p_exact == pytest.approx(max(exact))  # each test's p: the larger of the two objectives'
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


def test_the_power_rule_plans_every_primary_claim_at_alpha_over_m_and_its_seed_floor():
    planning = pd.DataFrame(
        {
            "id": ["a", "b", "c", "d"],
            "stage": ["final", "final", "mitigations", "robustness"],
            "family": ["primary", "primary", "primary", "exploratory"],
            "d_z": [1.8, -0.8, 4.6, 1.5],
        }
    )
    plan = plan_seeds(planning).set_index("id")
    assert plan.loc[["c", "a", "b"], "level"].tolist() == pytest.approx([0.05 / 3] * 3)  # not Holm's later steps
    floor = family_min_seeds(0.05, 3)
    assert floor == 6 and plan.loc["a", "seeds"] == seeds_for_power(1.8, 0.05 / 3, 0.8, at_least=floor)
    assert plan.loc["c", "seeds"] == floor and plan.loc["d", "level"] == 0.05  # the seed floor; exploratory at alpha
    assert plan.loc["d", "seeds"] == min_seeds(0.05) == 5
    assert not plan.loc["b", "reachable"] and plan.loc["b", "seeds"] == 6 and plan.loc["b", "power_at_seeds"] < 0.01
    assert (plan.loc[["a", "c", "d"], "power_at_seeds"] >= 0.8).all()
    untrained = planning.assign(verdict=["holds", "does not hold", "not applicable", "holds"])
    assert list(plan_seeds(untrained)["id"]) == ["a", "b", "d"]  # a mitigation the study did not train: no test
    assert plan_seeds(untrained).set_index("id").loc["a", "level"] == pytest.approx(0.05 / 2)
    assert stage_seeds(plan.reset_index()).to_dict() == {
        "final": plan.loc["a", "seeds"],
        "mitigations": 6,
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
    assert power_at(plan, {"final": 5}).iloc[0] == 0.0  # below the floor of 0.025 (6 seeds): the sign-flip test
    whole = power_at(plan_seeds(planning), {"transfer": 7}).iloc[2]  # three primary claims: 0.05 / 3, 6 seeds
    assert whole == pytest.approx(TTestPower().power(effect_size=0.7, nobs=7, alpha=0.05 / 3, alternative="larger"))
    path = tmp_path / "claims.csv"
    planning.to_csv(path, index=False)
    plan_main([str(path), "--keep", "final/*", "mitigations/*", "--given", "final=7", "mitigations=7"])
    printed = capsys.readouterr().out
    assert "transfer/c" not in printed and f"{expected:.4g}" in printed
    for bad, message in ((["--given", "final=1"], "not STAGE=SEEDS"), (["--given", "sweep=5"], "have no claims")):
        with pytest.raises(SystemExit):
            plan_main([str(path), *bad])
        assert message in capsys.readouterr().err
