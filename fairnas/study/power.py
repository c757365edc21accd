"""Seeds from a power rule: how many seeds each stage of a study needs so that every primary claim whose effect is
as large as a finished study measured it holds with probability ``power`` at its Holm level.

``python -m fairnas.study.power <claims.csv>`` reads the claims of a finished study (or a planning table with the
same ``id``, ``stage``, ``family`` and ``d_z`` columns) and prints, per claim and per stage, the seeds the rule asks
for and the power that many seeds give. The primary claims are tested in Holm's order: the claim of the largest
expected effect first at ``alpha / m``, the next at ``alpha / (m - 1)``, and so on (each level assumes the claims
before it hold, as they do with the planned power). A claim whose effect points the wrong way, or is too small for
``at_most`` seeds, cannot reach the power at all: it is reported as such and asks for no more than the fewest seeds
at which it could hold (:func:`~fairnas.study.inference.min_seeds`). Exploratory claims are planned at ``alpha``.

Two reasons make the planned power an optimistic one, and the plan says so rather than hides it: a Holm step's level
is reached only when the claims before it hold (the first step's alpha / m is the unconditional one), and an effect
measured on a few seeds is itself uncertain (planning on its point estimate gives less than the planned power about
half the time).
"""

from __future__ import annotations

import argparse
import math
from collections.abc import Sequence
from pathlib import Path

import pandas as pd
from statsmodels.stats.power import TTestPower

from fairnas.study.claims import NOT_APPLICABLE, PRIMARY
from fairnas.study.inference import min_seeds, seeds_for_power


def plan_seeds(claims: pd.DataFrame, *, alpha: float = 0.05, power: float = 0.8, at_most: int = 30) -> pd.DataFrame:
    """Per claim: its planned ``level``, the ``seeds`` the rule asks for, whether the power is ``reachable``, and the
    power at those seeds (``power_at_seeds``)."""
    if "verdict" in claims:  # a finished study's: a mitigation it did not train is not tested
        claims = claims[claims["verdict"] != NOT_APPLICABLE]
    plan = claims[["id", "stage", "family", "d_z"]].copy().reset_index(drop=True)
    plan["level"] = alpha
    primary = plan.index[plan["family"] == PRIMARY]
    order = plan.loc[primary, "d_z"].fillna(-math.inf).sort_values(ascending=False, kind="stable").index
    for rank, index in enumerate(order):
        plan.loc[index, "level"] = alpha / (len(order) - rank)
    floor = min_seeds(alpha)
    needed = [
        seeds_for_power(float(row.d_z), float(row.level), power, at_least=floor, at_most=at_most)
        for row in plan.itertuples()
    ]
    plan["reachable"] = [n is not None for n in needed]
    plan["seeds"] = [floor if n is None else n for n in needed]
    plan["power_at_seeds"] = [_power(float(row.d_z), int(row.seeds), float(row.level)) for row in plan.itertuples()]
    return plan


def stage_seeds(plan: pd.DataFrame) -> pd.Series:
    """The seeds per stage: the most any of its claims asks for."""
    return plan.groupby("stage", sort=False)["seeds"].max()


def _power(d_z: float, n: int, level: float) -> float:
    """The probability that a one-sided paired t-test of ``n`` seeds rejects at ``level`` when the standardised
    decrease is ``d_z`` (NaN: unknown, 0)."""
    if math.isnan(d_z):
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
    args = parser.parse_args(argv)
    if not args.claims.is_file():
        parser.error(f"claims: '{args.claims}' does not exist")
    plan = plan_seeds(pd.read_csv(args.claims), alpha=args.alpha, power=args.power, at_most=args.at_most)
    print(plan.to_markdown(index=False, floatfmt=".4g"))
    print()
    print(stage_seeds(plan).rename("seeds").to_frame().to_markdown())


if __name__ == "__main__":
    main()
