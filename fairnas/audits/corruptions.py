"""Corruption robustness disparity (thesis Ch. 3, Sec. 3.3): the 15 ImageNet-C corruptions applied to the probes.

Each probe of the split (at most ``max_probes_per_group`` per group) is corrupted with every chosen corruption at
every chosen severity (thesis Sec. 3.3.1.1: 15 corruptions x 5 severities), seeded per probe, corruption and
severity from the data seed, and identified against clean gallery templates (:mod:`.identification`). As in the
thesis, the reference is the model's own output on the clean image: a corrupted probe is ``consistent`` when its
prediction equals the clean probe's. Also recorded: ``correct`` (prediction is the true identity), ``cosine``
(clean vs corrupted embedding) and ``rank`` of the true identity. Severity 0 means clean (consistency 1); it is a
reference point of the curves only: tests, odds ratios and pooled means use severities 1..5.

Statistics (:mod:`.statistics`, thesis Sec. 3.3.1.1): Kruskal-Wallis across groups, then pairwise Wilcoxon
rank-sum tests, on per-probe means (pooled over all cells, per corruption, per severity), Holm-corrected over the
whole table; odds ratios of a consistent / correct outcome against the first group from a logistic regression with
corruption x severity fixed effects and standard errors clustered by probe image.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd
from matplotlib.figure import Figure
from matplotlib.ticker import ScalarFormatter
from omegaconf import DictConfig

from fairnas.audits.base import Audit, AuditData, AuditedModel, AuditResult, progress, register, settings_with_defaults
from fairnas.audits.corruption_compat import CORRUPTIONS, corrupt
from fairnas.audits.gallery import PixelPipeline, embed_arrays, enrol_gallery
from fairnas.audits.statistics import KRUSKAL, odds_ratios, scoped_tests, unit_means
from fairnas.groups import by_group, mean_se_by_group
from fairnas.validation import Settings, is_integer

METRICS = ("consistent", "correct", "cosine", "rank")
OUTCOMES = ("consistent", "correct")  # binary: odds ratios
LOWER_IS_BETTER = ("rank",)
DEFAULTS = {
    "corruptions": "all",
    "severities": [1, 2, 3, 4, 5],
    "max_probes_per_group": 100,
    "gallery_images": 1,
    "alpha": 0.05,
}


def check_config(config: DictConfig) -> None:
    """Every setting, before any model is loaded."""
    checked_settings(config)


def checked_settings(config: DictConfig | dict | None) -> dict:
    """The audit's settings (defaults filled in), checked: a bad value is a one-line error naming the key."""
    settings = settings_with_defaults("corruptions", config, DEFAULTS)
    check = Settings("corruptions.")
    names = settings["corruptions"]
    if names == "all":
        names = list(CORRUPTIONS)
    if (
        isinstance(names, str)
        or not isinstance(names, Sequence)
        or not names
        or set(names) - set(CORRUPTIONS)
        or len(set(names)) != len(names)
    ):
        check.fail("corruptions", names, f"'all' or a list of distinct names of {list(CORRUPTIONS)}")
    severities = settings["severities"]
    if (
        not isinstance(severities, Sequence)
        or not severities
        or len(set(severities)) != len(severities)
        or not all(is_integer(s) and 0 <= s <= 5 for s in severities)
    ):
        check.fail("severities", severities, "a list of distinct integers in 0..5 (0: clean)")
    check.integer("max_probes_per_group", settings["max_probes_per_group"], minimum=1, null="all probes")
    check.integer("gallery_images", settings["gallery_images"], minimum=1)
    check.probability("alpha", settings["alpha"])
    return {**settings, "corruptions": list(names), "severities": sorted(severities)}


def audit(model: AuditedModel, data: AuditData, config: DictConfig) -> AuditResult:
    """Thesis Sec. 3.3 for face identification: per-group robustness of the predictions to corruptions."""
    settings = checked_settings(config)
    order = data.group_order
    records = corruption_records(model, data, settings)
    corrupted = records[records["severity"] > 0]
    tests = scoped_tests(
        corrupted,
        METRICS,
        order,
        unit="row",
        scopes=("corruption", "severity"),
        alpha=settings["alpha"],
        lower_is_better=LOWER_IS_BETTER,
    )
    ratios = pd.concat(
        [
            odds_ratios(corrupted, outcome, order, cluster="row", fixed=("corruption", "severity"))
            for outcome in OUTCOMES
        ],
        ignore_index=True,
    )
    curves = group_curves(records)
    extremes = extreme_corruptions(corrupted, order)
    summary = summarise(records, corrupted, tests, ratios, order, settings)
    return AuditResult(
        tables={
            "records": records,
            "group_curves": curves,
            "tests": tests,
            "odds_ratios": ratios,
            "extremes": extremes,
        },
        figures={"severity_curves": plot_severity_curves(curves, order), "forest": plot_forest(ratios)},
        summary=summary,
        finding=finding(corrupted, tests, ratios, order, settings["alpha"]),
    )


def corruption_records(model: AuditedModel, data: AuditData, settings: dict) -> pd.DataFrame:
    """One row per probe x corruption x severity: ``row, path, identity, group, corruption, severity`` and the
    metrics, against clean templates; the corruption of probe ``row`` is seeded by ``(data.seed, row)``."""
    pipeline = PixelPipeline(data.transforms)
    gallery = enrol_gallery(
        model,
        data,
        pipeline,
        gallery_images=settings["gallery_images"],
        max_probes_per_group=settings["max_probes_per_group"],
    )
    rows = gallery.probe_rows
    clean_prediction, _ = gallery.identify(gallery.clean_embeddings, rows)
    probes = data.frame.iloc[rows]
    base = pd.DataFrame(
        {
            "row": rows,
            "path": probes["path"].to_numpy(),
            "identity": probes["identity"].to_numpy(),
            "group": np.asarray(data.group_order)[data.datamodule.group_index(probes)],
        }
    )
    parts = []
    for name in progress(settings["corruptions"], desc="corruptions"):
        for severity in settings["severities"]:
            embeddings = (
                gallery.clean_embeddings
                if severity == 0
                else embed_arrays(
                    model,
                    pipeline,
                    [
                        corrupt(image, name, severity, (data.seed, int(row)))
                        for row, image in zip(rows, gallery.clean, strict=True)
                    ],
                    data.batch_size,
                )
            )
            prediction, rank = gallery.identify(embeddings, rows)
            parts.append(
                base.assign(
                    corruption=name,
                    severity=severity,
                    consistent=(prediction == clean_prediction).astype(int),
                    correct=(prediction == gallery.labels[rows]).astype(int),
                    cosine=(embeddings * gallery.clean_embeddings).sum(dim=1).numpy(),
                    rank=rank,
                )
            )
    return pd.concat(parts, ignore_index=True)


def group_curves(records: pd.DataFrame) -> pd.DataFrame:
    """Mean +- s.e. of every metric per group x corruption x severity, and per group x severity pooled over
    corruptions (``corruption = all``; s.e. over per-probe means)."""
    per_cell = mean_se_by_group(records, METRICS, ["group", "corruption", "severity"])
    pooled = mean_se_by_group(unit_means(records, METRICS, "row", ["severity"]), METRICS, ["group", "severity"])
    return pd.concat([pooled.assign(corruption="all"), per_cell], ignore_index=True)[per_cell.columns]


def extreme_corruptions(corrupted: pd.DataFrame, order: Sequence[str]) -> pd.DataFrame:
    """Per group, the corruption with the highest and the lowest mean consistency (over severities 1..5)."""
    means = by_group(corrupted, ["consistent"], ["group", "corruption"], sort=True)["consistent"]
    rows = []
    for group in order:
        if group in means.index.get_level_values(0):
            values = means[group]
            rows.append(
                {
                    "group": group,
                    "best": values.idxmax(),
                    "best_consistency": values.max(),
                    "worst": values.idxmin(),
                    "worst_consistency": values.min(),
                }
            )
    return pd.DataFrame(rows, columns=["group", "best", "best_consistency", "worst", "worst_consistency"])


def summarise(records, corrupted, tests, ratios, order, settings) -> dict:
    """JSON-ready numbers: probes per group, pooled means, pooled Kruskal-Wallis p-values, odds ratios."""
    pooled = tests[(tests["test"] == KRUSKAL) & (tests["scope"] == "pooled")].set_index("metric")
    means = by_group(unit_means(corrupted, METRICS, "row"), METRICS, ["group"])
    return {
        "n_probes": {g: int(records.loc[records["group"] == g, "row"].nunique()) for g in order},
        "corruptions": settings["corruptions"],
        "severities": settings["severities"],
        "alpha": settings["alpha"],
        "pooled_mean": {m: {g: _number(means[m].get(g)) for g in order} for m in METRICS},
        "pooled_kruskal_p": {m: _number(pooled["p"].get(m)) for m in METRICS},
        "pooled_kruskal_p_holm": {m: _number(pooled["p_holm"].get(m)) for m in METRICS},
        "odds_ratio": {f"{r.outcome}/{r.group}_vs_{r.reference}": _number(r.odds_ratio) for r in ratios.itertuples()},
        "n_significant_tests": int(tests["significant"].sum()),
    }


def finding(corrupted, tests, ratios, order, alpha) -> str:
    """2-4 plain sentences: who keeps their clean prediction least, which differences survive Holm, where."""
    if corrupted.empty:
        return "Only clean probes (severity 0) were audited, so there is no corruption disparity to report."
    means = by_group(unit_means(corrupted, ["consistent"], "row"), ["consistent"], ["group"])["consistent"]
    present = [g for g in order if g in means.index]
    worst, best = min(present, key=means.get), max(present, key=means.get)
    text = (
        f"Under corruption, {worst} keeps its clean prediction for {means[worst]:.0%} of corrupted probes "
        f"against {means[best]:.0%} for {best}."
    )
    significant = tests[tests["significant"] & (tests["test"] == KRUSKAL)]
    if significant.empty:
        text += f" No group difference in any metric is significant after Holm correction (alpha {alpha})."
    else:
        n_corruptions = corrupted["corruption"].nunique()
        claims = [
            f"{metric}: {_where(rows, n_corruptions)}" for metric, rows in significant.groupby("metric", sort=False)
        ]
        text += f" Significant after Holm correction (alpha {alpha}): " + "; ".join(claims) + "."
    ratio = ratios[(ratios["outcome"] == "consistent") & ratios["odds_ratio"].notna()]
    if len(ratio):
        parts = [
            f"{r.group} vs {r.reference} {r.odds_ratio:.2f} (95% CI {r.ci_low:.2f}-{r.ci_high:.2f})"
            for r in ratio.itertuples()
        ]
        text += f" Odds ratio of a consistent prediction (corruption x severity fixed effects): {'; '.join(parts)}."
    return text


def _where(rows: pd.DataFrame, n_corruptions: int) -> str:
    """'g1 worse pooled, under contrast, fog; g0 worse at severity 5' from significant test rows (long lists of
    corruptions are cut to a count and the three smallest p-values; severities only when nothing else is)."""
    phrases = []
    for worse, part in rows.sort_values("p").groupby("worse", sort=False):
        scopes = part.groupby("scope", sort=False)["scope_value"].apply(list)
        names = scopes.get("corruption", [])
        where = (["pooled"] if "pooled" in scopes else []) + (
            [f"under {', '.join(names)}"]
            if 0 < len(names) <= 3
            else [f"under {len(names)} of {n_corruptions} corruptions (most clearly {', '.join(names[:3])})"]
            if names
            else []
        )
        if not where:
            where = [f"at severity {', '.join(sorted(scopes['severity']))}"]
        phrases.append(f"{worse} worse " + ", ".join(where))
    return " and ".join(phrases)


def plot_severity_curves(curves: pd.DataFrame, order: Sequence[str]) -> Figure:
    """Per metric, each group's mean vs severity, pooled over corruptions, with +-1 s.e. error bars."""
    pooled = curves[curves["corruption"] == "all"]
    figure = Figure(figsize=(4 * len(METRICS), 3.4), layout="constrained")
    for axis, metric in zip(figure.subplots(1, len(METRICS)), METRICS, strict=True):
        for group in order:
            curve = pooled[pooled["group"] == group].sort_values("severity")
            axis.errorbar(
                curve["severity"],
                curve[f"{metric}_mean"],
                yerr=curve[f"{metric}_se"],
                marker="o",
                capsize=3,
                label=group,
            )
        axis.set(title=metric, xlabel="severity (0 = clean)", ylabel=f"mean {metric}")
        axis.legend(title="group", fontsize="small")
    return figure


def plot_forest(ratios: pd.DataFrame) -> Figure:
    """Odds ratios with 95% CIs (log scale); left of 1: the group is served worse than the reference."""
    shown = ratios[ratios["odds_ratio"].notna()].reset_index(drop=True)
    figure = Figure(figsize=(6, 1.2 + 0.5 * max(len(shown), 1)), layout="constrained")
    axis = figure.subplots()
    y = np.arange(len(shown))[::-1]
    axis.errorbar(
        shown["odds_ratio"],
        y,
        xerr=[shown["odds_ratio"] - shown["ci_low"], shown["ci_high"] - shown["odds_ratio"]],
        fmt="o",
        capsize=3,
    )
    axis.axvline(1.0, color="grey", linestyle="--")
    axis.xaxis.set_major_formatter(ScalarFormatter())
    axis.xaxis.set_minor_formatter(ScalarFormatter())
    axis.set_yticks(y, [f"{r.outcome}: {r.group} vs {r.reference}" for r in shown.itertuples()])
    axis.set(
        xscale="log",
        xlabel="odds ratio (95% CI, clustered by probe image)",
        title="odds of a consistent / correct prediction" if len(shown) else "no odds ratio could be estimated",
    )
    return figure


def _number(value) -> float | None:
    """A JSON-ready float (None for missing / NaN)."""
    return None if value is None or not np.isfinite(value) else float(value)


register(
    Audit(
        "corruptions",
        "ImageNet-C corruption robustness disparity (thesis Ch. 3)",
        audit,
        check=check_config,
    )
)
