"""ICON² (Sudhakar et al.): which explanatory attribute explains the disparity across groups, and how much of it?

Per probe a performance M: correct identification at rank 1 (``metric: correct``, the default), the rank of the
true identity (``rank``, lower is better) or its reciprocal (``reciprocal_rank``), from clean gallery templates
(:mod:`fairnas.audits.gallery`). Group performance M_a is the mean of M over group a's probes and the
disparity is σ(M_A), their standard deviation across the groups (ICON² Eqs. 4-5; ``ddof: 1``, the sample
standard deviation, reproduces the paper's Table 1, Eq. 5 itself divides by |A|: ``ddof: 0``).

Explanatory attributes E are the split's metadata columns (every column but ``path``, ``identity``, ``split``, the
protected attribute, the ``mask`` file column and the landmark coordinates; or the list ``attributes``). A numeric
column with more than ``bins`` distinct values is cut into ``bins`` quantile bins of the audited probes (equal
counts where ties allow); any other column is used as categorical, one value per distinct entry (missing entries
form the value ``missing``). For each E:

- ranking (ICON² Eq. 6, Alg. 1): M_{e_j} is the mean of M over the probes with value e_j (all groups), the proxy
  performance Proxy_a^E = Σ_j P(e_j | a) M_{e_j} is what group a would score if only its mix of values of E
  mattered, and E is ranked by σ(Proxy_A^E), highest first;
- control (ICON² Sec. 3.2.2): M_{a,e_j} is the mean of M over group a's probes with value e_j; a cell (a, e_j) with
  fewer than ``min_cell`` probes is skipped, and a value enters the control only when no group's cell is skipped
  (so every σ compares the same groups as σ(M_A)). μ_E = mean_j σ(M_{A,e_j}) over those values,
  Δ = σ(M_A) - μ_E and the reduction is Δ / σ(M_A): the share of the disparity that holding E fixed removes.

95% confidence intervals are percentile bootstrap intervals over identities: ``n_bootstrap`` resamples (seeded by
the audit's seed) draw each group's identities with replacement (group sizes fixed), and every statistic is
recomputed on the resampled probes (bins fixed).
"""

from __future__ import annotations

import dataclasses
import warnings

import numpy as np
import pandas as pd
from matplotlib.figure import Figure
from omegaconf import DictConfig, OmegaConf
from scipy import sparse

from fairnas.audits.base import Audit, AuditData, AuditResult, progress, register, settings_with_defaults
from fairnas.audits.gallery import PixelPipeline, enrol_gallery
from fairnas.data.masks import LANDMARK_COLUMNS, MASK_COLUMN
from fairnas.validation import Settings, is_integer

METRICS = ("correct", "rank", "reciprocal_rank")
DEFAULTS = {
    "metric": "correct",
    "attributes": None,
    "bins": 4,
    "min_cell": 5,
    "ddof": 1,
    "n_bootstrap": 200,
    "max_probes_per_group": None,
    "gallery_images": 1,
}
RESERVED_COLUMNS = ("path", "identity", "split")
NOT_ATTRIBUTES = (MASK_COLUMN, *LANDMARK_COLUMNS)  # left out by default: file references and face geometry
MISSING = "missing"
MAX_PANELS = 12  # the ``controlled`` figure shows the top-ranked attributes


def check_config(config: DictConfig) -> None:
    """Every setting's type and range (attribute names are checked against the data in :func:`audit`)."""
    checked_settings(config)


def checked_settings(config: DictConfig | dict | None) -> DictConfig:
    """``config`` over :data:`DEFAULTS`, checked: a bad value is a one-line error naming ``icon2.<key>``."""
    settings = settings_with_defaults("icon2", config, DEFAULTS)
    check = Settings("icon2.")
    check.choice("metric", settings["metric"], METRICS)
    for key, minimum in (("bins", 2), ("min_cell", 1), ("gallery_images", 1), ("n_bootstrap", 0)):
        check.integer(key, settings[key], minimum=minimum)
    ddof = settings["ddof"]
    if not is_integer(ddof) or ddof not in (0, 1):
        check.fail(
            "ddof", ddof, "0 (divide by |A|, ICON² Eq. 5) or 1 (sample standard deviation, as the paper's tables)"
        )
    check.integer("max_probes_per_group", settings["max_probes_per_group"], minimum=1, null="all probes")
    names = settings["attributes"]
    if names is not None and (
        isinstance(names, str) or not isinstance(names, list) or not names or not all(isinstance(n, str) for n in names)
    ):
        check.fail("attributes", names, "null (every metadata column) or a non-empty list of column names")
    return OmegaConf.create(settings)


def explanatory_columns(frame: pd.DataFrame, protected: str, names: list[str] | None = None) -> list[str]:
    """The explanatory attributes: ``names`` (checked against the frame) or every column that is not reserved."""
    allowed = [c for c in frame.columns if c not in (*RESERVED_COLUMNS, protected)]
    if names is None:
        return [c for c in allowed if c not in NOT_ATTRIBUTES]
    unknown = [n for n in names if n not in allowed]
    if unknown:
        raise ValueError(f"icon2.attributes: {unknown} not among the split's columns; allowed: {allowed}")
    return list(dict.fromkeys(names))


def discretise(values: pd.Series, bins: int) -> tuple[pd.Categorical, str]:
    """(ordered values, kind) of one attribute: ``binned`` into ``bins`` quantile bins when numeric with more than
    ``bins`` distinct values (fewer bins where ties make quantiles coincide), else ``categorical``."""
    present = values.dropna()
    numeric = pd.api.types.is_numeric_dtype(values) and not pd.api.types.is_bool_dtype(values)
    if numeric and present.nunique() > bins:
        cut = pd.qcut(values.astype(float), q=bins, duplicates="drop")
        labels = [f"({i.left:.3g}, {i.right:.3g}]" for i in cut.cat.categories]
        codes = cut.cat.codes.to_numpy()
        kind = "binned"
    else:
        order = sorted(present.unique(), key=lambda v: (not numeric, v if numeric else str(v)))
        labels = [str(v) for v in order]
        codes = pd.Categorical(values, categories=order).codes
        kind = "categorical"
    if (codes < 0).any():
        labels, codes = [*labels, MISSING], np.where(codes < 0, len(labels), codes)
    return pd.Categorical.from_codes(codes, categories=labels, ordered=True), kind


def probe_performance(rank: np.ndarray, metric: str) -> np.ndarray:
    """Per-probe M from the rank of the true identity (1 = best)."""
    rank = np.asarray(rank, dtype=float)
    return {"correct": (rank == 1).astype(float), "rank": rank, "reciprocal_rank": 1.0 / rank}[metric]


def icon2_statistics(counts: np.ndarray, sums: np.ndarray, *, ddof: int = 1, min_cell: int = 5) -> dict:
    """ICON² statistics from per-cell probe counts and sums of M, arrays [..., groups, values] (leading axes are
    bootstrap resamples). Returns arrays over the leading axes:

    ``group`` M_a [..., A]; ``sigma_groups`` σ(M_A) (Eqs. 4-5); ``value`` M_{e_j} [..., V]; ``share``
    P(e_j | a) [..., A, V]; ``proxy`` Proxy_a^E [..., A] (Eq. 6); ``sigma_proxy``; ``cell`` M_{a,e_j} (NaN where
    skipped); ``controlled`` σ(M_{A,e_j}) [..., V] (NaN for values with a skipped cell); ``mu`` μ_E; ``delta``
    Δ = σ(M_A) - μ_E; ``reduction`` Δ / σ(M_A); ``skipped_cells`` and ``skipped_values`` (counts).
    """
    counts, sums = np.asarray(counts, float), np.asarray(sums, float)
    with np.errstate(invalid="ignore", divide="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # means and σ of empty slices are NaN
        group_n = counts.sum(axis=-1)
        group = sums.sum(axis=-1) / group_n
        sigma_groups = np.std(group, axis=-1, ddof=ddof)
        value_n = counts.sum(axis=-2)
        value = np.where(value_n > 0, sums.sum(axis=-2) / value_n, np.nan)
        share = counts / group_n[..., None]
        proxy = (share * np.nan_to_num(value)[..., None, :]).sum(axis=-1)
        kept = counts >= min_cell
        cell = np.where(kept, sums / counts, np.nan)
        complete = kept.all(axis=-2)
        controlled = np.where(complete, np.std(np.where(kept, cell, 0.0), axis=-2, ddof=ddof), np.nan)
        mu = np.nanmean(controlled, axis=-1)
        delta = sigma_groups - mu
        reduction = np.where(sigma_groups > 0, delta / sigma_groups, np.nan)
    return {
        "group": group,
        "sigma_groups": sigma_groups,
        "value": value,
        "share": share,
        "proxy": proxy,
        "sigma_proxy": np.std(proxy, axis=-1, ddof=ddof),
        "cell": cell,
        "counts": counts,
        "controlled": controlled,
        "mu": mu,
        "delta": delta,
        "reduction": reduction,
        "skipped_cells": (~kept).sum(axis=(-2, -1)),
        "skipped_values": (~complete).sum(axis=-1),
    }


def cell_sums(
    performance: np.ndarray,
    groups: np.ndarray,
    values: np.ndarray,
    n_groups: int,
    n_values: int,
    weights: np.ndarray | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """(counts, sums of M) per cell [..., groups, values]; ``weights`` [B, n] (bootstrap multiplicities) add a
    leading axis."""
    n = len(groups)
    cells = sparse.csr_matrix((np.ones(n), (np.arange(n), groups * n_values + values)), shape=(n, n_groups * n_values))
    weights = np.ones((1, n)) if weights is None else np.asarray(weights, float)
    counts, sums = (cells.T @ weights.T).T, (cells.T @ (weights * performance).T).T
    shape = (len(weights), n_groups, n_values)
    return counts.reshape(shape), sums.reshape(shape)


def identity_bootstrap(identities: np.ndarray, groups: np.ndarray, n_bootstrap: int, seed: int) -> np.ndarray:
    """[n_bootstrap, n] multiplicity of every probe: each group's identities drawn with replacement."""
    codes = np.unique(identities, return_inverse=True)[1]
    identity_group = np.zeros(codes.max() + 1, dtype=int)
    identity_group[codes] = groups
    rng = np.random.default_rng(seed)
    draws = np.zeros((n_bootstrap, len(identity_group)))
    members = [np.flatnonzero(identity_group == g) for g in np.unique(groups)]
    for resample in draws:
        for ids in members:
            resample += np.bincount(rng.choice(ids, size=len(ids)), minlength=len(identity_group))
    return draws[:, codes]


@dataclasses.dataclass
class Analysis:
    """The ICON² tables of one set of probes: ``ranking``, ``cells`` and the group performance."""

    ranking: pd.DataFrame
    cells: pd.DataFrame
    group: dict[str, float]
    sigma_groups: float
    sigma_groups_ci: tuple[float, float]


def analyse(
    probes: pd.DataFrame,
    attributes: pd.DataFrame,
    group_order: list[str],
    *,
    bins: int = 4,
    ddof: int = 1,
    min_cell: int = 5,
    n_bootstrap: int = 200,
    seed: int = 0,
) -> Analysis:
    """ICON² ranking and control of ``probes`` (columns ``identity``, ``group``, ``performance``) over every
    column of ``attributes`` (one row per probe, same order), with bootstrap CIs over identities."""
    groups = pd.Categorical(probes["group"], categories=group_order).codes
    if (groups < 0).any():
        raise ValueError(f"probes of groups outside the group order {group_order}")
    performance = probes["performance"].to_numpy(float)
    weights = identity_bootstrap(probes["identity"].to_numpy(), groups, n_bootstrap, seed) if n_bootstrap else None
    whole = (performance, groups, np.zeros_like(groups), len(group_order), 1)  # one value: no attribute
    overall = icon2_statistics(*cell_sums(*whole), ddof=ddof)
    sigma_ci = _ci(
        icon2_statistics(*cell_sums(*whole, weights), ddof=ddof)["sigma_groups"] if weights is not None else None
    )
    rows, cells = [], []
    for name in progress(list(attributes.columns), desc="icon2: attributes"):
        values, kind = discretise(attributes[name].reset_index(drop=True), bins)
        args = (performance, groups, values.codes, len(group_order), len(values.categories))
        point = {k: v[0] for k, v in icon2_statistics(*cell_sums(*args), ddof=ddof, min_cell=min_cell).items()}
        boot = icon2_statistics(*cell_sums(*args, weights), ddof=ddof, min_cell=min_cell) if weights is not None else {}
        rows.append(
            {
                "attribute": name,
                "kind": kind,
                "n_values": len(values.categories),
                "sigma_proxy": point["sigma_proxy"],
                **_ci_columns("sigma_proxy", boot),
                "mu_controlled": point["mu"],
                **_ci_columns("mu", boot, "mu_controlled"),
                "delta": point["delta"],
                **_ci_columns("delta", boot),
                "reduction_pct": 100 * point["reduction"],
                "skipped_cells": int(point["skipped_cells"]),
                "skipped_values": int(point["skipped_values"]),
                **{f"proxy_{g}": point["proxy"][a] for a, g in enumerate(group_order)},
            }
        )
        cells += [
            {
                "attribute": name,
                "value": value,
                "group": group,
                "n": int(point["counts"][a, j]),
                "performance": point["cell"][a, j],
                "kept": bool(point["counts"][a, j] >= min_cell),
                "share": point["share"][a, j],
                "value_performance": point["value"][j],
            }
            for j, value in enumerate(values.categories)
            for a, group in enumerate(group_order)
        ]
    ranking = pd.DataFrame(rows, columns=_ranking_columns(group_order))
    ranking = ranking.sort_values("sigma_proxy", ascending=False, na_position="last", kind="stable")
    ranking.insert(0, "rank", np.arange(1, len(ranking) + 1))
    ranking.insert(3, "sigma_groups", float(overall["sigma_groups"][0]))
    return Analysis(
        ranking.reset_index(drop=True),
        pd.DataFrame(
            cells, columns=["attribute", "value", "group", "n", "performance", "kept", "share", "value_performance"]
        ),
        dict(zip(group_order, map(float, overall["group"][0]), strict=True)),
        float(overall["sigma_groups"][0]),
        sigma_ci,
    )


def _ranking_columns(group_order: list[str]) -> list[str]:
    return [
        "attribute",
        "kind",
        "n_values",
        "sigma_proxy",
        "sigma_proxy_ci_low",
        "sigma_proxy_ci_high",
        "mu_controlled",
        "mu_controlled_ci_low",
        "mu_controlled_ci_high",
        "delta",
        "delta_ci_low",
        "delta_ci_high",
        "reduction_pct",
        "skipped_cells",
        "skipped_values",
        *(f"proxy_{g}" for g in group_order),
    ]


def _ci(samples: np.ndarray | None) -> tuple[float, float]:
    """Percentile 95% interval of the finite bootstrap samples (NaN without any)."""
    if samples is None:
        return (np.nan, np.nan)
    finite = np.asarray(samples, float)[np.isfinite(samples)]
    return tuple(map(float, np.percentile(finite, [2.5, 97.5]))) if len(finite) else (np.nan, np.nan)


def _ci_columns(key: str, boot: dict, column: str | None = None) -> dict:
    low, high = _ci(boot.get(key))
    return {f"{column or key}_ci_low": low, f"{column or key}_ci_high": high}


def audit(model, data: AuditData, config: DictConfig) -> AuditResult:
    """ICON² ranking and controlled disparity of ``data``'s probes identified by ``model``."""
    settings = checked_settings(config)
    protected = data.datamodule.table.attribute
    attributes = explanatory_columns(
        data.frame, protected, None if settings.attributes is None else list(settings.attributes)
    )
    pipeline = PixelPipeline(data.transforms)
    gallery = enrol_gallery(
        model,
        data,
        pipeline,
        gallery_images=settings.gallery_images,
        max_probes_per_group=settings.max_probes_per_group,
    )
    _, rank = gallery.identify(gallery.clean_embeddings, gallery.probe_rows)
    frame = data.frame.iloc[gallery.probe_rows].reset_index(drop=True)
    groups = np.asarray(data.group_order)[data.datamodule.group_index(frame)]
    probes = pd.DataFrame(
        {
            "path": frame["path"].to_numpy(),
            "identity": frame["identity"].astype(str).to_numpy(),
            "group": groups,
            "rank": rank.astype(int),
            "performance": probe_performance(rank, settings.metric),
        }
    )
    analysis = analyse(
        probes,
        frame[attributes],
        data.group_order,
        bins=settings.bins,
        ddof=settings.ddof,
        min_cell=settings.min_cell,
        n_bootstrap=settings.n_bootstrap,
        seed=data.seed,
    )
    probes = probes.join(frame[attributes], rsuffix=" (attribute)")  # a column named like a probe column
    summary = _summary(analysis, settings, len(probes))
    figures = (
        {
            "delta": _delta_figure(analysis, settings.metric),
            "controlled": _controlled_figure(analysis, data.group_order, settings.metric),
        }
        if len(analysis.ranking)
        else {}
    )
    return AuditResult(
        {"ranking": analysis.ranking, "cells": analysis.cells, "probes": probes},
        figures,
        summary,
        _finding(summary, data.group_order),
    )


def _summary(analysis: Analysis, settings: DictConfig, n_probes: int) -> dict:
    summary = {
        "n_probes": n_probes,
        "metric": settings.metric,
        "ddof": settings.ddof,
        "group_performance": analysis.group,
        "sigma_groups": analysis.sigma_groups,
        "sigma_groups_ci": list(analysis.sigma_groups_ci),
        "n_attributes": len(analysis.ranking),
        "skipped_cells": int(analysis.ranking["skipped_cells"].sum()) if len(analysis.ranking) else 0,
        "sigma_proxy": dict(
            zip(analysis.ranking["attribute"], map(float, analysis.ranking["sigma_proxy"]), strict=True)
        ),
        "top_attribute": None,
    }
    if len(analysis.ranking):
        top = analysis.ranking.iloc[0]
        summary.update(
            top_attribute=str(top["attribute"]),
            top_sigma_proxy=float(top["sigma_proxy"]),
            top_mu_controlled=float(top["mu_controlled"]),
            top_delta=float(top["delta"]),
            top_delta_ci=[float(top["delta_ci_low"]), float(top["delta_ci_high"])],
            top_reduction_pct=float(top["reduction_pct"]),
        )
    return summary


METRIC_NAMES = {
    "correct": "rank-1 identification rate",
    "rank": "rank of the true identity (lower is better)",
    "reciprocal_rank": "reciprocal rank",
}
AXIS_LABELS = {"correct": "rank-1 rate", "rank": "rank (lower is better)", "reciprocal_rank": "reciprocal rank"}


def _finding(summary: dict, group_order: list[str]) -> str:
    """2-4 sentences: the disparity, the top-ranked attribute, how much controlling for it removes."""
    groups = ", ".join(f"{g} {summary['group_performance'][g]:.3g}" for g in group_order)
    text = (
        f"The {METRIC_NAMES[summary['metric']]} per group is {groups} (σ across groups {summary['sigma_groups']:.3g})."
    )
    if summary["top_attribute"] is None:
        return text + " The split has no explanatory attributes (metadata columns) to rank."
    top, delta, low, high = (summary["top_attribute"], summary["top_delta"], *summary["top_delta_ci"])
    text += (
        f" ICON² ranks {top} first (σ of the proxy performance {summary['top_sigma_proxy']:.3g}): of the "
        "attributes, its distribution across the groups together with its effect on performance predicts the "
        "largest gap."
    )
    if not summary["sigma_groups"] > 0:
        return text + " There is no disparity across the groups to explain."
    if not np.isfinite(delta):
        return text + (
            " No value of it has at least min_cell probes in every group, so it could not be controlled for."
        )
    reduction, mu = summary["top_reduction_pct"], summary["top_mu_controlled"]
    interval = f" (95% CI {low:.3g} to {high:.3g})" if np.isfinite(low) and np.isfinite(high) else ""
    text += (
        f" Comparing the groups within each value of {top} leaves a σ of {mu:.3g} on average: Δ = {delta:.3g}"
        f"{interval}, {reduction:.0f}% of the disparity."
    )
    if not interval:
        return text
    if low > 0 and reduction >= 50:
        text += (
            f" Most of the gap comes from how often each group's probes show each value of {top}, not from "
            "the groups being served differently under the same conditions."
        )
    elif low > 0:
        text += f" {top} explains part of the gap; the groups still differ under the same conditions."
    elif high < 0:
        text += f" Controlling for {top} widens the gap: it hides part of the disparity rather than explaining it."
    else:
        text += f" The reduction is not distinguishable from zero: {top} does not explain the gap."
    return text


def _delta_figure(analysis: Analysis, metric: str) -> Figure:
    """Δ per attribute (ranking order, top first) with its bootstrap 95% CI; the dashed line is σ(M_A)."""
    ranking = analysis.ranking.iloc[::-1]
    figure = Figure(figsize=(6.4, 1.2 + 0.32 * len(ranking)), layout="constrained")
    axis = figure.subplots()
    y = np.arange(len(ranking))
    error = np.abs(np.vstack([ranking["delta"] - ranking["delta_ci_low"], ranking["delta_ci_high"] - ranking["delta"]]))
    axis.barh(y, ranking["delta"].fillna(0.0), xerr=np.nan_to_num(error), capsize=2, color="tab:blue")
    axis.axvline(analysis.sigma_groups, color="k", linestyle="--", linewidth=1, label="σ across groups")
    axis.axvline(0.0, color="grey", linewidth=0.8)
    axis.set_yticks(y, ranking["attribute"])
    axis.set(
        xlabel=f"Δ = σ across groups - mean σ within values ({AXIS_LABELS[metric]})",
        title="Disparity removed by controlling for each attribute",
    )
    axis.legend(loc="lower right")
    return figure


def _controlled_figure(analysis: Analysis, group_order: list[str], metric: str) -> Figure:
    """Per attribute (top-ranked first, at most :data:`MAX_PANELS`): M per value and group; skipped cells absent."""
    names = list(analysis.ranking["attribute"][:MAX_PANELS])
    columns = min(4, len(names))
    rows = -(-len(names) // columns)
    figure = Figure(figsize=(3.2 * columns, 2.8 * rows), layout="constrained")
    axes = figure.subplots(rows, columns, squeeze=False).ravel()
    width = 0.8 / len(group_order)
    for axis, name in zip(axes, names, strict=False):
        cells = analysis.cells[analysis.cells["attribute"] == name]
        values = list(dict.fromkeys(cells["value"]))
        for offset, group in enumerate(group_order):
            rows_g = cells[cells["group"] == group].set_index("value").reindex(values)
            axis.bar(np.arange(len(values)) + offset * width, rows_g["performance"], width, label=group)
        axis.set_xticks(np.arange(len(values)) + 0.4 - width / 2, values, rotation=30, ha="right", fontsize=7)
        axis.set_title(name, fontsize=9)
        axis.set_ylabel(AXIS_LABELS[metric], fontsize=8)
    for axis in axes[len(names) :]:
        axis.set_visible(False)
    axes[0].legend(title="group", fontsize=7)
    figure.suptitle("Performance per value and group (controlled)")
    return figure


register(
    Audit(
        "icon2",
        "which attribute explains the disparity: confounder ranking and controlled disparity (ICON²)",
        audit,
        check=check_config,
        title="ICON²",
    )
)
