"""Seeds from a power rule: how many seeds each stage of a study needs so that every primary claim whose effect is
as large as a finished study measured it holds with probability ``power`` at the level planned for it.

``python -m fairnas.study.power <claims.csv>`` reads the claims of a finished study (or a planning table with the
same ``id``, ``stage``, ``family`` and ``d_z`` columns) and prints, per claim and per stage, the seeds the rule asks
for and the power that many seeds give. Every claim is planned at a level fixed before the data
(:func:`~fairnas.study.inference.plan_level`): each of the ``m`` primary claims at ``alpha / m`` (Bonferroni's level,
Holm's first step: the one level a claim reaches whatever the others' p-values), each exploratory claim at
``alpha``. No claim is planned below the seed floor of its level (:func:`~fairnas.study.inference.min_seeds`,
floor(log2(1 / level)) + 1: the fewest seeds at which the exact sign-flip test, which a claim must pass too, can
reject; 8 for a primary family of 7 at alpha 0.05), and its power below that floor is 0. A claim whose effect points
the wrong way, or is too small for ``at_most`` seeds, cannot reach the power at all: it is reported as such and asks
for no more than its floor. ``--keep`` plans only the claims a cheaper design still tests (ids matching its
patterns: a smaller primary family, an easier ``alpha / m``), and ``--given`` adds the power each claim has at the
seeds a time budget affords its stage.

The power is the one-sided paired t-test's (statsmodels' ``TTestPower``) at or above the floor. It is optimistic
in two ways, and the plan says so rather than hides it: the sign-flip test must reject too, which at a few seeds
above the floor asks for more than the t-test does, and an effect measured on a few seeds is itself uncertain
(planning on its point estimate gives less than the planned power about half the time). The level is not: Holm's
later steps can only make a claim easier to hold than at ``alpha / m``.
"""

from __future__ import annotations

import argparse
import fnmatch
import math
from collections.abc import Mapping, Sequence
from pathlib import Path

import pandas as pd
from statsmodels.stats.power import TTestPower

from fairnas.study.claims import NOT_APPLICABLE, PRIMARY
from fairnas.study.inference import min_seeds, plan_level, seeds_for_power


def plan_seeds(claims: pd.DataFrame, *, alpha: float = 0.05, power: float = 0.8, at_most: int = 30) -> pd.DataFrame:
    """Per claim: its planned ``level`` (``alpha / m`` for the ``m`` primary claims, ``alpha`` for an exploratory
    one), the ``seeds`` the rule asks for (at least the floor of that level), whether the power is ``reachable``,
    and the power at those seeds (``power_at_seeds``)."""
    if "verdict" in claims:  # a finished study's: a mitigation it did not train is not tested
        claims = claims[claims["verdict"] != NOT_APPLICABLE]
    plan = claims[["id", "stage", "family", "d_z"]].copy().reset_index(drop=True)
    primary = plan["family"] == PRIMARY
    plan["level"] = [plan_level(alpha, int(primary.sum())) if is_primary else alpha for is_primary in primary]
    needed = [
        seeds_for_power(float(row.d_z), float(row.level), power, at_least=min_seeds(row.level), at_most=at_most)
        for row in plan.itertuples()
    ]
    plan["reachable"] = [n is not None for n in needed]
    plan["seeds"] = [min_seeds(level) if n is None else n for n, level in zip(needed, plan["level"], strict=True)]
    plan["power_at_seeds"] = [_power(float(row.d_z), int(row.seeds), float(row.level)) for row in plan.itertuples()]
    return plan


def stage_seeds(plan: pd.DataFrame) -> pd.Series:
    """The seeds per stage: the most any of its claims asks for."""
    return plan.groupby("stage", sort=False)["seeds"].max()


def power_at(plan: pd.DataFrame, given: Mapping[str, int]) -> pd.Series:
    """The power each claim of ``plan`` has at its planned level with the seeds ``given`` to its stage (stage ->
    seeds; 0 below the level's seed floor); NaN for a stage not given."""
    return pd.Series(
        [
            _power(float(row.d_z), given[row.stage], float(row.level)) if row.stage in given else math.nan
            for row in plan.itertuples()
        ],
        index=plan.index,
    )


def _given(text: str) -> tuple[str, int]:
    """``STAGE=SEEDS`` of ``--given``."""
    stage, _, seeds = text.partition("=")
    if not stage or not seeds.isdigit() or int(seeds) < 2:
        raise argparse.ArgumentTypeError(f"'{text}' is not STAGE=SEEDS with SEEDS >= 2, e.g. final=7")
    return stage, int(seeds)


def _power(d_z: float, n: int, level: float) -> float:
    """The probability that a one-sided paired t-test of ``n`` seeds rejects at ``level`` when the standardised
    decrease is ``d_z`` (NaN: unknown, 0), and 0 below the seed floor of ``level``, where the sign-flip test a claim
    must pass too cannot reject."""
    if math.isnan(d_z) or n < min_seeds(level):
        return 0.0
    if math.isinf(d_z):
        return 1.0 if d_z > 0 else 0.0
    return float(TTestPower().power(effect_size=d_z, nobs=n, alpha=level, alternative="larger"))


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m fairnas.study.power", description=__doc__.splitlines()[0])
    parser.add_argument("claims", type=Path, help="a study's claims.csv, or a table with id, stage, family, d_z")
    parser.add_argument("--alpha", type=float, default=0.05)
    parser.add_argument("--power", type=float, default=0.8)
    parser.add_argument("--at-most", type=int, default=30, help="the most seeds a claim may ask for")
    parser.add_argument("--keep", nargs="+", metavar="PATTERN", help="plan only the claims whose id matches one")
    parser.add_argument("--given", nargs="+", type=_given, default=[], metavar="STAGE=SEEDS", help="the power here")
    args = parser.parse_args(argv)
    if not args.claims.is_file():
        parser.error(f"claims: '{args.claims}' does not exist")
    claims = pd.read_csv(args.claims)
    if args.keep:
        claims = claims[[any(fnmatch.fnmatchcase(id_, pattern) for pattern in args.keep) for id_ in claims["id"]]]
        if claims.empty:
            parser.error(f"--keep {' '.join(args.keep)}: no claim id of {args.claims} matches")
    plan = plan_seeds(claims, alpha=args.alpha, power=args.power, at_most=args.at_most)
    unknown = sorted(set(dict(args.given)) - set(plan["stage"]))
    if unknown:
        parser.error(f"--given: stages {unknown} have no claims; allowed: {sorted(set(plan['stage']))}")
    if args.given:
        plan["power_at_given"] = power_at(plan, dict(args.given))
    print(plan.to_markdown(index=False, floatfmt=".4g"))
    print()
    print(stage_seeds(plan).rename("seeds").to_frame().to_markdown())


if __name__ == "__main__":
    main()
