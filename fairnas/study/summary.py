"""A study's summary, written when its stages are done: ``claims.csv`` (every claim decided together: Holm's
correction spans the primary ones, and their plan level is ``alpha / m``), ``runs.csv``, the forest plot, and the
pages ``report.md`` and ``report.html`` with each stage's claims leading its findings."""

from __future__ import annotations

import dataclasses
import logging
from pathlib import Path

import pandas as pd
from omegaconf import OmegaConf

from fairnas.study import claims
from fairnas.study.context import StudyContext
from fairnas.study.inference import family_min_seeds, min_seeds
from fairnas.study.report import StageReport, forest_figure, write_pages

log = logging.getLogger(__name__)


@dataclasses.dataclass
class Summary:
    """What the summary wrote: the report's ``stages`` (the claims' overview first), the HTML ``page``, the decided
    ``claims``, each stage's minutes and how many claims hold."""

    stages: list[StageReport]
    page: Path
    claims: pd.DataFrame
    minutes: dict[str, float]
    holding: int


def write_summary(context: StudyContext) -> Summary:
    """Decide every claim and write the tables, the forest plot and the pages."""
    settings = context.claim_settings
    decided = claims.decide(context.claims, settings)
    context.files.table("runs", context.runs)
    context.files.table("claims", decided)
    for stage in context.reports:  # each stage's claims lead its findings, with their verdicts
        stage.findings[:0] = [
            claims.finding(row, settings.power) for row in decided[decided["stage"] == stage.name].to_dict("records")
        ]
    times = {stage.name: stage.seconds for stage in context.reports}
    holding = int((decided["verdict"] == claims.HOLDS).sum())
    primary = decided[decided["family"] == claims.PRIMARY]
    tested = primary[primary["verdict"] != claims.NOT_APPLICABLE]
    rule = (
        f"a one-sided paired t-test and an exact sign-flip test, both required; the primary claims' family-wise error "
        f"rate held at {settings.alpha:g} by Holm's method on each test's p-values, exploratory claims unadjusted; "
        f"no primary claim holds on fewer than {family_min_seeds(settings.alpha, len(tested))} seeds (the family's "
        f"first step, {settings.alpha:g} / {max(1, len(tested))}), no exploratory claim on fewer than "
        f"{min_seeds(settings.alpha)}"
    )
    counts = decided.groupby(["family", "verdict"]).size()
    tally = "; ".join(
        f"{family}: " + ", ".join(f"{count} {verdict}" for verdict, count in counts[family].items())
        for family in (claims.PRIMARY, claims.EXPLORATORY)
        if family in counts.index.get_level_values(0)
    )
    header = {
        "training overrides": " ".join(context.base),
        "stages (minutes)": ", ".join(f"{name} {seconds / 60:.1f}" for name, seconds in times.items()),
        "primary claims holding": f"{(primary['verdict'] == claims.HOLDS).sum()} of {len(primary)} ({rule}); "
        f"all claims: {holding} of {len(decided)}",
    }
    floor = claims.below_floor(decided)
    if floor:  # a study too small for its claims: say so where the verdicts are read
        header["seed floor"] = floor
        log.warning("study: %s", floor)
    unmatched = settings.unmatched(list(decided["id"]))
    if unmatched:  # a typo would leave the paper's claims exploratory and unadjusted: say so where it is read
        header["study.claims.primary"] = f"patterns that name no claim of this study: {unmatched}"
        log.warning("study.claims.primary: %s name no claim of this study", unmatched)
    forest = context.files.figure("claims_forest", forest_figure(decided))
    overview = StageReport(
        "claims",
        "Claims",
        "The forest plot shows every claim's effect in the claimed direction in units of its paired s.d. (d_z; right "
        "of 0: the claimed way) with its 95 % noncentral-t interval, coloured by verdict (hollow: zero variance, no "
        "interval); the table has the numbers, each stage below its claims in words.",
        [f"Verdicts ({rule}): {tally}.", *([floor] if floor else [])],
        {"claims": context.output_dir / "claims.csv", "runs": context.output_dir / "runs.csv"},
        {"claims_forest": forest},
        sum(times.values()),
    )
    stages = [overview, *context.reports]
    _, page = write_pages(
        context.output_dir,
        title=f"fairnas study: {context.cfg.name}",
        header=header,
        stages=stages,
        config_yaml=OmegaConf.to_yaml(context.settings, resolve=True),
    )
    return Summary(stages, page, decided, {name: seconds / 60 for name, seconds in times.items()}, holding)
