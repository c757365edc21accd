"""Fairness Indicators (Goyal et al., 2022) adapted to face identification: how strongly the embedding encodes the
protected group, and whether its mistakes stay inside a group.

Four indicators on the L2-normalised embeddings of one split (images of groups outside the group order are left
out; ``max_identities_per_group`` keeps a seeded subset of whole identities):

1. **Same-attribute retrieval** (Fairness Indicators Sec. 3.3). The split's identities are divided in two
   identity-disjoint halves, stratified by group (seeded): queries and database. P@K of a query is the share of
   its K nearest database images (cosine) of the query's own group; it is averaged per query group and per
   intersectional subgroup (group x a categorical column listed in ``subgroups``), beside the base rate (the
   group's share of the database: what an embedding blind to the group retrieves), the lift P@K / base rate and
   the gap (max - min over groups). K larger than the database is clipped to the database size (``k_used``,
   and a note); at K = database size every query retrieves the whole database, so P@K equals the base rate.
   ``se`` is the standard error of the mean over queries, treating them as independent (they share one
   database, so it is a lower bound).
2. **Identity retrieval.** Over the whole (kept) split, a query image's K nearest other images; precision is
   (images of the query's identity among them) / min(K, n_same), n_same = the identity's other images. It is
   the precision at K when K <= n_same and the recall of the identity's images within the K nearest otherwise,
   so a perfect embedding scores 1 for every K; images whose identity has no other image are left out.
3. **Label association** (Fairness Indicators Sec. 3.1, adapted). Identities play the labels: each probe is
   compared with the clean gallery templates (:func:`~fairnas.audits.gallery.enrol_gallery`); of its
   top-5 identities with cosine >= the threshold, the wrong ones are "same group" or "another group". Per
   group: the share of probes with at least one wrong same-group (other-group) identity (the paper's "% of
   images with a label of the type"), the pooled share of same-group identities among the wrong ones beside
   its chance level (the same-group share of the other templates), and the share with the true identity there.
   Reported at ``threshold`` (null: no threshold) and over a sweep of thresholds.
4. **Identity-averaged hit rates** (Fairness Indicators Sec. 3.2, adapted: identities play the households).
   Rank-1 and rank-5 hits of the probes are averaged per identity, then over the group's identities, so each
   identity counts once however many probes it has; 95% percentile CIs from resampling identities within each
   group (``n_bootstrap``, seeded), and one for the gap between groups. The image-averaged rate is shown beside.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd
import torch
import torch.nn.functional as F
from matplotlib.figure import Figure
from omegaconf import DictConfig

from fairnas.audits.base import Audit, AuditData, AuditResult, progress, register, settings_with_defaults
from fairnas.audits.gallery import PixelPipeline, embed_arrays, enrol_gallery
from fairnas.groups import by_group, difference, mean_se
from fairnas.validation import Settings, is_integer, is_number

TOP = 5  # predicted identities per probe in the label association (the paper's top-5)
RESERVED = ("path", "identity", "split")
MAX_SUBGROUP_VALUES = 20  # a subgroup column with more distinct values is not categorical
DEFAULTS = {
    "ks": [10, 50],
    "subgroups": [],
    "max_identities_per_group": None,
    "gallery_images": 1,
    "max_probes_per_group": None,
    "threshold": None,
    "sweep": 21,
    "n_bootstrap": 200,
}


# ---------------------------------------------------------------------------------------------------- settings


def check_config(config: DictConfig | dict | None) -> None:
    """Every setting, before any model is loaded (subgroup columns are checked against the data in :func:`audit`)."""
    checked_settings(config)


def checked_settings(config: DictConfig | dict | None) -> dict:
    """The settings with :data:`DEFAULTS` filled in, checked: a bad value is a one-line error naming
    ``fairness_indicators.<key>``."""
    settings = settings_with_defaults("fairness_indicators", config, DEFAULTS)
    check = Settings("fairness_indicators.")

    def fail(key: str, allowed: str):
        check.fail(key, settings[key], allowed)

    ks = settings["ks"]
    if not isinstance(ks, list | tuple) or not ks or not all(_positive_int(k) for k in ks):
        fail("ks", "a non-empty list of positive integers, e.g. [10, 50]")
    subgroups = settings["subgroups"]
    if not isinstance(subgroups, list | tuple) or not all(isinstance(c, str) and c not in RESERVED for c in subgroups):
        fail("subgroups", f"a list of categorical column names of the split (not {list(RESERVED)}), e.g. [occluder]")
    for key in ("gallery_images", "n_bootstrap"):
        check.integer(key, settings[key], minimum=1)
    for key in ("max_identities_per_group", "max_probes_per_group"):
        check.integer(key, settings[key], minimum=1, null="all")
    if settings["threshold"] is not None and not _cosine(settings["threshold"]):
        fail("threshold", "null (no threshold) or a cosine in [-1, 1]")
    sweep = settings["sweep"]
    if not (
        (_positive_int(sweep) and sweep >= 2)
        or (isinstance(sweep, list | tuple) and sweep and all(_cosine(t) for t in sweep))
    ):
        fail(
            "sweep",
            "an integer >= 2 (evenly spaced thresholds over the probes' top-5 cosines) or a non-empty "
            "list of cosines in [-1, 1]",
        )
    settings["ks"] = sorted({int(k) for k in ks})
    settings["subgroups"] = list(dict.fromkeys(subgroups))
    return settings


def _positive_int(value) -> bool:
    return is_integer(value) and value >= 1


def _cosine(value) -> bool:
    return is_number(value) and -1.0 <= value <= 1.0


# ------------------------------------------------------------------------------------------------ pure functions


def split_identities(
    identities: np.ndarray, groups: np.ndarray, seed: int = 0, group_order: Sequence[str] | None = None
) -> np.ndarray:
    """Boolean mask of the query rows: per group, a seeded random half (rounded down) of its identities are
    queries, the rest form the database, so the halves share no identity. An identity's group is the most
    frequent group of its images. Needs at least two identities per group (one on each side)."""
    identities, groups = np.asarray(identities), np.asarray(groups)
    names, inverse = np.unique(identities, return_inverse=True)
    identity_group = pd.Series(groups).groupby(inverse).agg(lambda g: g.value_counts().idxmax()).to_numpy()
    rng = np.random.default_rng(seed)
    is_query = np.zeros(len(names), dtype=bool)
    for group in np.unique(identity_group):
        members = np.flatnonzero(identity_group == group)
        if len(members) < 2:
            name = group_order[group] if group_order is not None else group
            raise ValueError(
                f"fairness_indicators: group {name} has {len(members)} identity; same-attribute "
                "retrieval needs at least two per group (one for the queries, one for the database)"
            )
        is_query[rng.choice(members, size=len(members) // 2, replace=False)] = True
    return is_query[inverse]


def nearest(
    queries: torch.Tensor, database: torch.Tensor, k: int, *, exclude_self: bool = False, chunk: int = 1024
) -> np.ndarray:
    """[Nq, k] indices of the k most cosine-similar database rows per query (most similar first), in chunks of
    queries. ``exclude_self``: queries are the database itself and a row never retrieves itself."""
    queries, database = F.normalize(queries.float(), dim=1), F.normalize(database.float(), dim=1)
    out = []
    for start in range(0, len(queries), chunk):
        scores = queries[start : start + chunk] @ database.T
        if exclude_self:
            rows = torch.arange(len(scores))
            scores[rows, rows + start] = -torch.inf
        out.append(scores.topk(k, dim=1).indices)
    return torch.cat(out).numpy() if out else np.zeros((0, k), dtype=np.int64)


def attribute_precision(
    query_embeddings: torch.Tensor,
    query_groups: np.ndarray,
    database_embeddings: torch.Tensor,
    database_groups: np.ndarray,
    k: int,
) -> np.ndarray:
    """P@K of each query (Fairness Indicators Sec. 3.3): the share of its k nearest database images of its group."""
    if not 1 <= k <= len(database_groups):
        raise ValueError(f"K={k} must lie in [1, database size {len(database_groups)}]")
    found = np.asarray(database_groups)[nearest(query_embeddings, database_embeddings, k)]
    return (found == np.asarray(query_groups)[:, None]).mean(axis=1)


def identity_precision(embeddings: torch.Tensor, identities: np.ndarray, k: int) -> np.ndarray:
    """Per image: (same-identity images among its k nearest other images) / min(k, n_same); NaN if n_same = 0."""
    identities = np.asarray(identities)
    if not 1 <= k <= len(identities) - 1:
        raise ValueError(f"K={k} must lie in [1, number of images - 1 = {len(identities) - 1}]")
    same = identities[nearest(embeddings, embeddings, k, exclude_self=True)] == identities[:, None]
    n_same = pd.Series(identities).map(pd.Series(identities).value_counts()).to_numpy() - 1
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(n_same > 0, same.sum(axis=1) / np.minimum(k, n_same), np.nan)


def top_predictions(scores: torch.Tensor, top: int = TOP) -> tuple[np.ndarray, np.ndarray]:
    """(cosines, template indices) [P, min(top, C)] of each probe's most similar templates, best first."""
    values, indices = scores.topk(min(top, scores.shape[1]), dim=1)
    return values.numpy(), indices.numpy()


def label_association(
    top_scores: np.ndarray,
    top_labels: np.ndarray,
    true_labels: np.ndarray,
    template_groups: np.ndarray,
    probe_groups: np.ndarray,
    threshold: float | None = None,
) -> pd.DataFrame:
    """Per probe, among its top predicted identities with cosine >= ``threshold`` (None: all of them): the number
    of wrong identities of its own group (``n_same``) and of another group (``n_other``), whether the true identity
    is there (``true``), and the chance share of same-group identities among the other templates (``chance``)."""
    true_labels, probe_groups = np.asarray(true_labels), np.asarray(probe_groups)
    template_groups = np.asarray(template_groups)
    kept = np.ones(top_scores.shape, dtype=bool) if threshold is None else top_scores >= threshold
    wrong = kept & (top_labels != true_labels[:, None])
    same = template_groups[top_labels] == probe_groups[:, None]
    templates_same = (template_groups[None, :] == probe_groups[:, None]).sum(axis=1)
    true_same = template_groups[true_labels] == probe_groups
    return pd.DataFrame(
        {
            "n_same": (wrong & same).sum(axis=1),
            "n_other": (wrong & ~same).sum(axis=1),
            "true": (kept & (top_labels == true_labels[:, None])).any(axis=1),
            "chance": (templates_same - true_same) / max(len(template_groups) - 1, 1),
        }
    )


def association_rates(per_probe: pd.DataFrame, probe_groups: np.ndarray, group_order: Sequence[str]) -> pd.DataFrame:
    """Per group: probes with >= 1 wrong same-group / other-group identity (``rate_same`` / ``rate_other``), the
    pooled same-group share of the wrong identities (``share_same``; NaN without any) beside ``chance_same``, and
    the probes whose true identity is among the kept predictions (``rate_true``)."""
    rows = []
    for index, name in enumerate(group_order):
        part = per_probe[np.asarray(probe_groups) == index]
        wrong = part["n_same"].sum() + part["n_other"].sum()
        rows.append(
            {
                "group": name,
                "n_probes": len(part),
                "rate_same": (part["n_same"] > 0).mean(),
                "rate_other": (part["n_other"] > 0).mean(),
                "share_same": part["n_same"].sum() / wrong if wrong else np.nan,
                "chance_same": part["chance"].mean(),
                "rate_true": part["true"].mean(),
            }
        )
    return pd.DataFrame(rows)


def identity_hit_rates(
    hits: np.ndarray,
    identities: np.ndarray,
    groups: np.ndarray,
    group_order: Sequence[str],
    *,
    n_bootstrap: int = 200,
    seed: int = 0,
) -> tuple[pd.DataFrame, dict]:
    """Per group the identity-averaged hit rate (mean over identities of the mean hit of their probes) with a 95%
    percentile bootstrap CI over identities, and the image-averaged rate; plus the gap (max - min over groups)
    with its CI (identities resampled within every group at once)."""
    frame = pd.DataFrame(
        {"hit": np.asarray(hits, float), "identity": np.asarray(identities), "group": np.asarray(groups)}
    )
    per_identity = by_group(frame, ["hit"], ["group", "identity"], sort=True)["hit"]
    rng = np.random.default_rng(seed)
    rows, draws = [], []
    for index, name in enumerate(group_order):
        rates = per_identity.loc[index].to_numpy() if index in per_identity.index.get_level_values(0) else np.zeros(0)
        if len(rates):
            draws.append(rates[rng.integers(0, len(rates), size=(n_bootstrap, len(rates)))].mean(axis=1))
        low, high = np.percentile(draws[-1], [2.5, 97.5]) if len(rates) else (np.nan, np.nan)
        images = frame[frame["group"] == index]["hit"]
        rows.append(
            {
                "group": name,
                "n_identities": len(rates),
                "n_probes": len(images),
                "identity_averaged": rates.mean() if len(rates) else np.nan,
                "ci_low": low,
                "ci_high": high,
                "image_averaged": images.mean() if len(images) else np.nan,
            }
        )
    table = pd.DataFrame(rows)
    gap = {"value": float(difference(table["identity_averaged"])), "ci": [float("nan")] * 2}
    if len(draws) >= 2:
        spread = np.max(draws, axis=0) - np.min(draws, axis=0)
        gap["ci"] = [float(v) for v in np.percentile(spread, [2.5, 97.5])]
    return table, gap


def aggregate(
    values: np.ndarray, groups: np.ndarray, group_order: Sequence[str], subgroups: dict[str, np.ndarray] | None = None
) -> pd.DataFrame:
    """Mean, standard error and count of per-query ``values`` (NaN skipped): over all queries, per group and per
    group x value of each subgroup column; ``gap`` = max - min of the means within each partition."""
    values, groups = np.asarray(values, float), np.asarray(groups)
    partitions = [
        ("group", None),
        *((f"group x {column}", np.asarray(levels).astype(str)) for column, levels in (subgroups or {}).items()),
    ]
    rows = [_mean_row("all", "all", "", values)]
    for partition, levels in partitions:
        part = []
        for index, name in enumerate(group_order):
            for level in [""] if levels is None else np.unique(levels):
                mask = (groups == index) if levels is None else (groups == index) & (levels == level)
                if mask.any():
                    part.append(_mean_row(partition, name, level, values[mask]))
        gap = difference(pd.Series([row["precision"] for row in part], dtype=float))
        rows += [{**row, "gap": gap} for row in part]
    return pd.DataFrame(rows)


def _mean_row(partition: str, group: str, subgroup: str, values: np.ndarray) -> dict:
    values = values[~np.isnan(values)]
    precision, se = mean_se(values)
    return {
        "partition": partition,
        "group": group,
        "subgroup": subgroup,
        "n_queries": len(values),
        "precision": precision,
        "se": se,
        "gap": np.nan,
    }


# -------------------------------------------------------------------------------------------------------- audit


def audit(model, data: AuditData, config: DictConfig) -> AuditResult:
    """The four indicators of ``data``'s split under ``model`` (anything with ``device`` and ``embed``)."""
    settings = checked_settings(config)
    frame, order = data.frame, data.group_order
    all_groups = data.datamodule.group_index(frame)
    missing = [c for c in settings["subgroups"] if c not in frame.columns]
    if missing:
        raise ValueError(
            f"fairness_indicators.subgroups: columns {missing} are not in the {data.split} split; "
            f"it has {[c for c in frame.columns if c not in RESERVED]}"
        )
    wide = [c for c in settings["subgroups"] if frame[c].nunique() > MAX_SUBGROUP_VALUES]
    if wide:
        raise ValueError(
            f"fairness_indicators.subgroups: columns {wide} have more than {MAX_SUBGROUP_VALUES} "
            "values; name categorical columns only"
        )
    rows = _keep_identities(frame["identity"].to_numpy(), all_groups, settings["max_identities_per_group"], data.seed)
    kept = frame.iloc[rows]
    identities, groups = kept["identity"].astype(str).to_numpy(), all_groups[rows]
    subgroups = {c: kept[c].astype(str).to_numpy() for c in settings["subgroups"]}
    pipeline = PixelPipeline(data.transforms)
    embeddings = _embed_rows(model, data, pipeline, kept["path"].tolist())

    notes: list[str] = []
    is_query = split_identities(identities, groups, data.seed, order)
    attribute = _attribute_table(embeddings, groups, is_query, subgroups, order, settings["ks"], notes)
    identity = _identity_table(embeddings, identities, groups, subgroups, order, settings["ks"], notes)

    gallery = enrol_gallery(
        model,
        data,
        pipeline,
        gallery_images=settings["gallery_images"],
        max_probes_per_group=settings["max_probes_per_group"],
    )
    probe_groups = all_groups[gallery.probe_rows]
    truth = gallery.labels[gallery.probe_rows]
    first = np.unique(gallery.labels, return_index=True)[1]
    template_groups = all_groups[first]
    top_scores, top_labels = top_predictions(gallery.clean_embeddings @ gallery.templates.T)
    if top_labels.shape[1] < TOP:
        notes.append(
            f"label association: only {top_labels.shape[1]} gallery identities, so the top-{TOP} "
            f"predictions are the top-{top_labels.shape[1]}"
        )
    association = _association_table(top_scores, top_labels, truth, template_groups, probe_groups, order, settings)
    _, rank = gallery.identify(gallery.clean_embeddings, gallery.probe_rows)
    hits, gaps = [], {}
    for r in (1, TOP):
        table, gaps[r] = identity_hit_rates(
            rank <= r, truth, probe_groups, order, n_bootstrap=settings["n_bootstrap"], seed=data.seed
        )
        hits.append(table.assign(rank=r)[["rank", *table.columns]])
    hit_rates = pd.concat(hits, ignore_index=True)

    summary = _summary(
        attribute,
        identity,
        association,
        hit_rates,
        gaps,
        settings,
        notes,
        n_images=len(rows),
        n_queries=int(is_query.sum()),
        n_probes=len(gallery.probe_rows),
    )
    figures = {
        "attribute_precision": _precision_figure(attribute, order),
        "association_sweep": _sweep_figure(association, order, settings["threshold"]),
    }
    tables = {
        "attribute_retrieval": attribute,
        "identity_retrieval": identity,
        "label_association": association,
        "hit_rates": hit_rates,
    }
    return AuditResult(tables, figures, summary, _finding(summary, order))


def _keep_identities(identities: np.ndarray, groups: np.ndarray, cap: int | None, seed: int) -> np.ndarray:
    """Rows of groups inside the order; with ``cap``, of a seeded random ``cap`` identities per group (sorted)."""
    rows = np.flatnonzero(groups >= 0)
    if cap is None:
        return rows
    rng = np.random.default_rng(seed)
    frame = pd.DataFrame({"identity": identities[rows], "group": groups[rows]})
    chosen = set()
    for _, part in frame.groupby("group"):
        names = np.unique(part["identity"].to_numpy())
        chosen.update(rng.choice(names, size=min(cap, len(names)), replace=False).tolist())
    return rows[frame["identity"].isin(chosen).to_numpy()]


def _embed_rows(model, data: AuditData, pipeline: PixelPipeline, paths: list[str]) -> torch.Tensor:
    """Embeddings of the images at ``paths``, loaded and embedded one batch at a time."""
    out = []
    for start in progress(
        range(0, len(paths), data.batch_size),
        total=-(-len(paths) // data.batch_size),
        desc="fairness_indicators: embedding",
    ):
        images = [pipeline.load(data.root / path) for path in paths[start : start + data.batch_size]]
        out.append(embed_arrays(model, pipeline, images, data.batch_size))
    return torch.cat(out)


def _attribute_table(embeddings, groups, is_query, subgroups, order, ks, notes) -> pd.DataFrame:
    database_groups = groups[~is_query]
    tables = []
    for k in ks:
        used = min(k, len(database_groups))
        if used < k:
            notes.append(
                f"same-attribute retrieval: K={k} exceeds the {len(database_groups)} database images; "
                f"clipped to {used} (P@K is then the base rate)"
            )
        precision = attribute_precision(
            embeddings[is_query], groups[is_query], embeddings[~is_query], database_groups, used
        )
        table = aggregate(precision, groups[is_query], order, {c: v[is_query] for c, v in subgroups.items()})
        share = {name: float((database_groups == index).mean()) for index, name in enumerate(order)}
        query_share = np.array([share[order[g]] for g in groups[is_query]])
        table["base_rate"] = [query_share.mean() if name == "all" else share[name] for name in table["group"]]
        table["lift"] = table["precision"] / table["base_rate"]
        tables.append(table.assign(k=k, k_used=used))
    columns = [
        "k",
        "k_used",
        "partition",
        "group",
        "subgroup",
        "n_queries",
        "precision",
        "se",
        "base_rate",
        "lift",
        "gap",
    ]
    return pd.concat(tables, ignore_index=True)[columns]


def _identity_table(embeddings, identities, groups, subgroups, order, ks, notes) -> pd.DataFrame:
    tables = []
    for k in ks:
        used = min(k, len(identities) - 1)
        if used < k:
            notes.append(f"identity retrieval: K={k} exceeds the {len(identities) - 1} other images; clipped to {used}")
        precision = identity_precision(embeddings, identities, used)
        tables.append(aggregate(precision, groups, order, subgroups).assign(k=k, k_used=used))
    columns = ["k", "k_used", "partition", "group", "subgroup", "n_queries", "precision", "se", "gap"]
    return pd.concat(tables, ignore_index=True)[columns]


def _association_table(top_scores, top_labels, truth, template_groups, probe_groups, order, settings) -> pd.DataFrame:
    sweep = settings["sweep"]
    if isinstance(sweep, int):
        sweep = np.linspace(top_scores.min(), top_scores.max(), sweep) if top_scores.size else []
    tables = []
    for setting, thresholds in (("configured", [settings["threshold"]]), ("sweep", sorted(map(float, sweep)))):
        for threshold in thresholds:
            per_probe = label_association(top_scores, top_labels, truth, template_groups, probe_groups, threshold)
            rates = association_rates(per_probe, probe_groups, order)
            tables.append(rates.assign(setting=setting, threshold=np.nan if threshold is None else threshold))
    table = pd.concat(tables, ignore_index=True)
    return table[["setting", "threshold", *[c for c in table.columns if c not in ("setting", "threshold")]]]


def _summary(attribute, identity, association, hit_rates, gaps, settings, notes, **counts) -> dict:
    def per_group(table: pd.DataFrame, column: str) -> dict:
        return {row["group"]: _number(row[column]) for _, row in table.iterrows()}

    summary: dict = {
        **counts,
        "ks": settings["ks"],
        "threshold": settings["threshold"],
        "attribute_retrieval": {},
        "identity_retrieval": {},
    }
    for k in settings["ks"]:
        rows = attribute[attribute["k"] == k]
        groups, overall = rows[rows["partition"] == "group"], rows[rows["partition"] == "all"].iloc[0]
        summary["attribute_retrieval"][f"p@{k}"] = {
            "k_used": int(overall["k_used"]),
            "all": _number(overall["precision"]),
            "base_rate": _number(overall["base_rate"]),
            "lift": _number(overall["lift"]),
            "per_group": per_group(groups, "precision"),
            "base_rate_per_group": per_group(groups, "base_rate"),
            "gap": _number(groups["gap"].iloc[0]) if len(groups) else None,
            "subgroup_gaps": {
                p: _number(part["gap"].iloc[0]) for p, part in rows.groupby("partition") if p.startswith("group x ")
            },
        }
        rows = identity[(identity["k"] == k) & (identity["partition"] == "group")]
        summary["identity_retrieval"][f"p@{k}"] = {
            "per_group": per_group(rows, "precision"),
            "gap": _number(rows["gap"].iloc[0]) if len(rows) else None,
        }
    configured = association[association["setting"] == "configured"]
    summary["label_association"] = {
        c: per_group(configured, c) for c in ("rate_same", "rate_other", "share_same", "chance_same", "rate_true")
    }
    summary["hit_rates"] = {}
    for r, gap in gaps.items():
        rows = hit_rates[hit_rates["rank"] == r]
        summary["hit_rates"][f"rank_{r}"] = {
            row["group"]: {
                "identity_averaged": _number(row["identity_averaged"]),
                "ci": [_number(row["ci_low"]), _number(row["ci_high"])],
                "image_averaged": _number(row["image_averaged"]),
            }
            for _, row in rows.iterrows()
        }
        summary["hit_rates"][f"rank_{r}"]["gap"] = {"value": _number(gap["value"]), "ci": list(map(_number, gap["ci"]))}
    summary["notes"] = notes
    return summary


def _number(value) -> float | None:
    """A JSON-ready float (None for NaN)."""
    value = float(value)
    return None if np.isnan(value) else value


def _finding(summary: dict, order: list[str]) -> str:
    k = summary["ks"][0]
    retrieval = summary["attribute_retrieval"][f"p@{k}"]
    sentences = [
        f"At K={retrieval['k_used']} the embedding retrieves an image of the query's own group "
        f"{_pct(retrieval['all'])} of the time against a base rate of {_pct(retrieval['base_rate'])} "
        f"(lift {retrieval['lift']:.2f}, gap between groups {_points(retrieval['gap'])}): the further above the base "
        "rate, the more strongly the embedding encodes the group (Fairness Indicators Sec. 3.3)."
    ]
    identity = summary["identity_retrieval"][f"p@{k}"]["per_group"]
    if identity and all(v is not None for v in identity.values()):
        low = min(identity, key=identity.get)
        sentences.append(
            f"Identity retrieval at K={k} is lowest for {low} ({_pct(identity[low])}, gap "
            f"{_points(summary['identity_retrieval'][f'p@{k}']['gap'])})."
        )
    share, chance = summary["label_association"]["share_same"], summary["label_association"]["chance_same"]
    known = [g for g in order if share.get(g) is not None]
    if known:
        parts = ", ".join(f"{g} {_pct(share[g])} (chance {_pct(chance[g])})" for g in known)
        kept = "" if summary["threshold"] is None else f" with cosine >= {summary['threshold']:g}"
        sentences.append(
            f"Of the wrong identities in a probe's top {TOP}{kept}, the share of the probe's own group "
            f"is {parts} (Sec. 3.1, identities as labels)."
        )
    hits = summary["hit_rates"]["rank_1"]
    rates = ", ".join(
        f"{g} {_pct(hits[g]['identity_averaged'])} [{_pct(hits[g]['ci'][0])}, {_pct(hits[g]['ci'][1])}]"
        for g in order
        if g in hits
    )
    sentences.append(
        f"Identity-averaged rank-1 hit rates (95% CI over identities, Sec. 3.2) are {rates}; gap "
        f"{_points(hits['gap']['value'])} (95% CI {_points(hits['gap']['ci'][0], unit='')} to "
        f"{_points(hits['gap']['ci'][1])})."
    )
    return " ".join(sentences)


def _pct(value: float | None) -> str:
    return "n/a" if value is None or np.isnan(value) else f"{value:.0%}"


def _points(value: float | None, unit: str = " points") -> str:
    """A difference of two shares in percentage points."""
    return ("n/a" if value is None or np.isnan(value) else f"{100 * value:.0f}") + unit


# ------------------------------------------------------------------------------------------------------ figures


def _precision_figure(attribute: pd.DataFrame, order: list[str]) -> Figure:
    """P@K per group (bars, +- 1 s.e.) with the group's base rate (black tick), one panel per K."""
    ks = sorted(attribute["k"].unique())
    figure = Figure(figsize=(3.2 * len(ks) + 0.8, 3.4), layout="constrained")
    axes = figure.subplots(1, len(ks), squeeze=False, sharey=True)[0]
    for axis, k in zip(axes, ks, strict=True):
        rows = attribute[(attribute["k"] == k) & (attribute["partition"] == "group")].set_index("group")
        rows = rows.reindex([g for g in order if g in rows.index])
        x = np.arange(len(rows))
        axis.bar(x, rows["precision"], yerr=rows["se"].fillna(0), color="tab:blue", alpha=0.8, capsize=3, label="P@K")
        axis.hlines(rows["base_rate"], x - 0.4, x + 0.4, colors="black", linewidth=2, label="base rate")
        used = int(rows["k_used"].iloc[0]) if len(rows) else k
        axis.set(
            title=f"K={k}" + (f" (clipped to {used})" if used < k else ""),
            xticks=x,
            xticklabels=rows.index,
            ylim=(0, 1.05),
            xlabel="query group",
        )
    axes[0].set_ylabel("same-group precision")
    axes[0].legend(loc="lower left", fontsize="small")
    return figure


def _sweep_figure(association: pd.DataFrame, order: list[str], threshold: float | None) -> Figure:
    """Over the threshold sweep: probes with a wrong same- / other-group identity kept (left), and the same-group
    share of the kept wrong identities against its chance level (right)."""
    sweep = association[association["setting"] == "sweep"]
    figure = Figure(figsize=(9, 3.4), layout="constrained")
    left, right = figure.subplots(1, 2)
    for index, group in enumerate(order):
        rows, colour = sweep[sweep["group"] == group], f"C{index}"
        left.plot(rows["threshold"], rows["rate_same"], color=colour, label=f"{group}: same group")
        left.plot(rows["threshold"], rows["rate_other"], color=colour, linestyle="--", label=f"{group}: other group")
        right.plot(rows["threshold"], rows["share_same"], color=colour, label=f"{group}")
        right.plot(rows["threshold"], rows["chance_same"], color=colour, linestyle=":", label=f"{group}: chance")
    left.set(xlabel="cosine threshold", ylabel=f"probes with a wrong identity in top {TOP}", ylim=(-0.02, 1.02))
    right.set(xlabel="cosine threshold", ylabel="same-group share of wrong identities", ylim=(-0.02, 1.02))
    for axis in (left, right):
        if threshold is not None:
            axis.axvline(threshold, color="grey", linewidth=1)
        axis.legend(fontsize="x-small")
    return figure


register(
    Audit(
        "fairness_indicators",
        "how strongly the embedding encodes the group: retrieval indicators (Fairness Indicators)",
        audit,
        check=check_config,
        title="Fairness Indicators",
    )
)
