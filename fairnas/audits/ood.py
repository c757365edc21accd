"""DistroFair adapted to closed-gallery face identification: do in- and out-of-distribution mutations of the
same face break identification more often for one group?

DistroFair (Sec. 3) learns the distribution of the reference images, mutates test images inside (ID) and beyond
(OOD) it, and counts, per class, the mutated images on which the system's output changes. Here the classes whose
fairness is tested are the protected groups, the system's output is the identity predicted for a probe against
clean gallery templates (:mod:`fairnas.audits.gallery`), the reference distribution is the *training
split's* metadata, and the mutations are those of :mod:`fairnas.data.synthetic.mutations`: synthetic probes are
re-rendered as the same person in the same photo with yaw, roll, scale, illumination or accessories changed;
any probe can be rotated, zoomed or cropped in image space. Each probe gets one ID and one OOD value per mutation.

Oracles, per mutated probe (Sec. 3, "Metamorphic (MT) Oracle" and "Ground Truth (GT) based Oracle"):

- ``metamorphic``: the prediction on the mutated image differs from the prediction on the original (a flip);
  split into the paper's two kinds, which for one predicted label per image read:
- ``exclusion``: the original was identified correctly and the mutation loses the true identity;
- ``inclusion``: the original was misidentified and the mutation makes the model name another identity
  (possibly the true one). metamorphic = exclusion + inclusion.
- ``ground_truth``: DistroFair Eq. 2, |mutated error| - |original error| for the true identity: +1 when the
  mutation breaks a correct identification, -1 when it repairs a wrong one (the paper's "negative errors"), so
  its count is breaks - repairs and can be negative. Its breaks are exactly the exclusions.

Per group, mutation, distribution (ID/OOD) and oracle the ``rates`` table gives the inputs, the violations, the
error rate (Eq. 4: violations / inputs) and the paper's violation rule, Eq. 5: a group violates fairness when its
error rate exceeds the mean error rate over the groups. With two groups Eq. 5 flags the worse group whenever the
rates differ at all, however little, so the ``tests`` table adds Fisher exact tests between groups (pairwise for
more than two) of the count oracles (metamorphic, exclusion, inclusion; the ground-truth oracle's breaks are the
exclusions and its net count is not a count) with Holm's correction over all of them. ``ratios`` gives each
group's OOD / ID error-rate ratio per mutation (DistroFair RQ2 compares OOD with ID generation the same way).

Deviations from the paper: no clustering of the reference images (Sec. 3.1; one distribution per data set, the
training split); the reference ranges come from the data's recorded nuisances, not from a detector run on the
system's outputs; errors are counted per probe image, not per detected object; and image-space mutations of
real data sets are labelled ID/OOD by configured magnitudes, since real metadata records no pose.
"""

from __future__ import annotations

import itertools
import math

import numpy as np
import pandas as pd
from matplotlib.figure import Figure
from omegaconf import DictConfig
from scipy.stats import fisher_exact
from statsmodels.stats.proportion import proportion_confint

from fairnas.audits.base import Audit, AuditData, AuditResult, progress, register
from fairnas.audits.gallery import PixelPipeline, embed_arrays, enrol_gallery
from fairnas.audits.statistics import holm
from fairnas.data.synthetic.mutations import (
    ID,
    IMAGE_MUTATIONS,
    MUTATIONS,
    OOD,
    SYNTHETIC_MUTATIONS,
    Mutation,
    MutationPlanner,
    SyntheticSource,
    TrainingRanges,
    is_synthetic,
    render_mutation,
    settings_from,
    transform_image,
)
from fairnas.groups import by_group
from fairnas.validation import Settings

ORACLES = ("metamorphic", "exclusion", "inclusion", "ground_truth")
TESTED_ORACLES = ("metamorphic", "exclusion", "inclusion")
DISTRIBUTIONS = (ID, OOD)
DEFAULTS = {"mutations": "all", "max_probes_per_group": 100, "gallery_images": 1, "alpha": 0.05}


def _get(config, key: str):
    """``config[key]``, or its default when missing (or null, except the probe cap, where null means all)."""
    if key not in config or (config[key] is None and key != "max_probes_per_group"):
        return DEFAULTS[key]
    return config[key]


def requested_mutations(config) -> list[str]:
    """The names in ``config.mutations`` (``all`` or a list), checked against :data:`MUTATIONS`."""
    names = _get(config, "mutations")
    if isinstance(names, str):
        names = list(MUTATIONS) if names == "all" else [names]
    names = list(names)
    unknown = [name for name in names if name not in MUTATIONS]
    if unknown or not names:
        raise ValueError(
            f"ood.mutations: unknown mutation(s) {unknown or names}; allowed: 'all' or a list of {list(MUTATIONS)}"
        )
    return list(dict.fromkeys(names))


def resolve_mutations(config, synthetic: bool) -> list[str]:
    """The mutations to run on a data set: ``all`` is every mutation that applies (image-space ones only on real
    images); a synthetic-only mutation named for real images is an error."""
    names = requested_mutations(config)
    if synthetic:
        return names
    if _get(config, "mutations") == "all":
        return list(IMAGE_MUTATIONS)
    rerendered = [name for name in names if name in SYNTHETIC_MUTATIONS]
    if rerendered:
        raise ValueError(
            f"ood.mutations: {rerendered} re-render a synthetic face and need a synthetic data set "
            f"(spec.json); on real images only {list(IMAGE_MUTATIONS)} apply"
        )
    return names


def check_config(config: DictConfig) -> None:
    """The mutations, probe counts, significance level and mutation settings, before any model is loaded."""
    requested_mutations(config)
    check = Settings("ood.")
    check.integer("gallery_images", _get(config, "gallery_images"), minimum=1)
    check.integer("max_probes_per_group", _get(config, "max_probes_per_group"), minimum=1, null="all")
    check.probability("alpha", _get(config, "alpha"))
    settings_from(config)


def audit(model, data: AuditData, config: DictConfig) -> AuditResult:
    """Metamorphic and ground-truth oracles of ``data``'s probes under ID and OOD mutations, per group."""
    check_config(config)
    synthetic = is_synthetic(data.root)
    names = resolve_mutations(config, synthetic)
    source = SyntheticSource.load(data.root) if synthetic else None
    ranges = TrainingRanges.from_frame(data.datamodule.splits["train"]) if synthetic else TrainingRanges({}, {})
    planner = MutationPlanner(ranges, settings_from(config))
    pipeline = PixelPipeline(data.transforms)
    gallery = enrol_gallery(
        model,
        data,
        pipeline,
        gallery_images=_get(config, "gallery_images"),
        max_probes_per_group=_get(config, "max_probes_per_group"),
    )
    frame = data.frame.iloc[gallery.probe_rows].reset_index(drop=True)
    if source is not None and len(frame):
        source.check_reproduces(frame["path"].iloc[0])
    truth = gallery.labels[gallery.probe_rows]
    original, _ = gallery.identify(gallery.clean_embeddings, gallery.probe_rows)
    plans: list[tuple[int, Mutation]] = []
    images: list[np.ndarray] = []
    predictions: list[np.ndarray] = []
    pending: list[np.ndarray] = []
    pending_rows: list[int] = []
    chunk = max(1, data.batch_size) * 4
    for position in progress(range(len(frame)), desc="ood: mutating probes"):
        row = frame.iloc[position]
        for name in names:
            rng = np.random.default_rng([data.seed, int(gallery.probe_rows[position]), MUTATIONS.index(name)])
            for mutation in planner.draw(name, row, rng):
                if mutation.name in IMAGE_MUTATIONS:
                    image = transform_image(gallery.clean[position], mutation)
                else:
                    image = pipeline.geometry(render_mutation(source, row["path"], mutation))
                plans.append((position, mutation))
                pending.append(image)
                pending_rows.append(int(gallery.probe_rows[position]))
                if position == 0:
                    images.append(image)
        if len(pending) >= chunk or position == len(frame) - 1:
            embeddings = embed_arrays(model, pipeline, pending, data.batch_size)
            predictions.append(gallery.identify(embeddings, np.asarray(pending_rows))[0])
            pending, pending_rows = [], []
    predicted = np.concatenate(predictions) if predictions else np.zeros(0, int)

    groups = np.asarray(data.group_order)[data.datamodule.group_index(frame)]
    classes = np.unique(data.frame["identity"].astype(str).to_numpy())
    records = _records(frame, groups, classes, truth, original, plans, predicted)
    rates = rate_table(records, data.group_order, names)
    tests = fisher_tests(rates, data.group_order, float(_get(config, "alpha")))
    ratios = ratio_table(rates)
    figures = {
        "error_rates": _rate_figure(rates, data.group_order, names),
        "examples": _example_figure(gallery.clean[0] if len(frame) else None, images, records),
    }
    summary = _summary(records, rates, tests, ratios, ranges, planner, names, synthetic, float(_get(config, "alpha")))
    return AuditResult(
        {"records": records, "rates": rates, "tests": tests, "ratios": ratios},
        figures,
        summary,
        _finding(summary, rates, tests, data.group_order),
    )


def _records(frame, groups, classes, truth, original, plans, predicted) -> pd.DataFrame:
    """One row per probe and mutation: the predictions before and after and what each oracle says."""
    positions = np.array([position for position, _ in plans], dtype=int)
    before, after, true = original[positions], predicted, truth[positions]
    correct_before, correct_after = before == true, after == true
    flip = before != after
    return pd.DataFrame(
        {
            "path": frame["path"].to_numpy()[positions],
            "identity": frame["identity"].astype(str).to_numpy()[positions],
            "group": groups[positions],
            "mutation": [m.name for _, m in plans],
            "value": [m.value if isinstance(m.value, str) else round(float(m.value), 4) for _, m in plans],
            "distribution": [m.distribution for _, m in plans],
            "original_prediction": classes[before] if len(classes) else before,
            "mutated_prediction": classes[after] if len(classes) else after,
            "correct_original": correct_before,
            "correct_mutated": correct_after,
            "metamorphic": flip,
            "exclusion": flip & correct_before,
            "inclusion": flip & ~correct_before,
            "ground_truth": correct_before.astype(int) - correct_after.astype(int),
        }
    )


def rate_table(records: pd.DataFrame, group_order, mutations) -> pd.DataFrame:
    """Per group x mutation x distribution x oracle: inputs, violations, error rate (Eq. 4), the mean error rate
    over the groups and Eq. 5 (error rate > that mean). Combinations without inputs are left out."""
    rows = []
    for mutation, distribution in itertools.product(mutations, DISTRIBUTIONS):
        subset = records[(records["mutation"] == mutation) & (records["distribution"] == distribution)]
        if subset.empty:
            continue
        for oracle in ORACLES:
            block = []
            for group in group_order:
                values = subset.loc[subset["group"] == group, oracle]
                if len(values):
                    block.append(
                        {
                            "mutation": mutation,
                            "distribution": distribution,
                            "oracle": oracle,
                            "group": group,
                            "inputs": len(values),
                            "violations": int(values.sum()),
                            "error_rate": float(values.sum()) / len(values),
                        }
                    )
            mean = float(np.mean([row["error_rate"] for row in block]))
            for row in block:
                rows.append({**row, "mean_error_rate": mean, "eq5_violation": bool(row["error_rate"] > mean)})
    columns = [
        "mutation",
        "distribution",
        "oracle",
        "group",
        "inputs",
        "violations",
        "error_rate",
        "mean_error_rate",
        "eq5_violation",
    ]
    return pd.DataFrame(rows, columns=columns)


def fisher_tests(rates: pd.DataFrame, group_order, alpha: float) -> pd.DataFrame:
    """Two-sided Fisher exact tests of the violation counts of every pair of groups, per mutation, distribution and
    count oracle, Holm-corrected over the whole table at family-wise error rate ``alpha``."""
    rows = []
    counted = rates[rates["oracle"].isin(TESTED_ORACLES)]
    for (mutation, distribution, oracle), block in counted.groupby(["mutation", "distribution", "oracle"], sort=False):
        block = block.set_index("group")
        for first, second in itertools.combinations([g for g in group_order if g in block.index], 2):
            a, b = block.loc[first], block.loc[second]
            table = [[int(row.violations), int(row.inputs - row.violations)] for row in (a, b)]
            odds, p_value = fisher_exact(table)
            rows.append(
                {
                    "mutation": mutation,
                    "distribution": distribution,
                    "oracle": oracle,
                    "group_a": first,
                    "group_b": second,
                    "violations_a": table[0][0],
                    "inputs_a": int(a.inputs),
                    "violations_b": table[1][0],
                    "inputs_b": int(b.inputs),
                    "error_rate_a": float(a.error_rate),
                    "error_rate_b": float(b.error_rate),
                    "odds_ratio": float(odds),
                    "p_value": float(p_value),
                }
            )
    tests = pd.DataFrame(
        rows,
        columns=[
            "mutation",
            "distribution",
            "oracle",
            "group_a",
            "group_b",
            "violations_a",
            "inputs_a",
            "violations_b",
            "inputs_b",
            "error_rate_a",
            "error_rate_b",
            "odds_ratio",
            "p_value",
        ],
    )
    if len(tests):
        tests["p_holm"], tests["significant"] = holm(tests["p_value"].to_numpy(float), alpha)
    else:
        tests["p_holm"], tests["significant"] = pd.Series(dtype=float), pd.Series(dtype=bool)
    return tests


def ratio_table(rates: pd.DataFrame) -> pd.DataFrame:
    """Per group, mutation and count oracle: ID and OOD error rates and OOD / ID (inf when only OOD errs, NaN when
    neither does or one distribution has no inputs)."""
    counted = rates[rates["oracle"].isin(TESTED_ORACLES)]
    wide = counted.pivot_table(
        index=["mutation", "oracle", "group"], columns="distribution", values="error_rate", sort=False
    )
    for distribution in DISTRIBUTIONS:
        if distribution not in wide.columns:
            wide[distribution] = np.nan
    wide = wide.reset_index().rename(columns={ID: "id_error_rate", OOD: "ood_error_rate"})
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = wide["ood_error_rate"].to_numpy(float) / wide["id_error_rate"].to_numpy(float)
    wide["ood_id_ratio"] = ratio
    wide.columns.name = None
    return wide[["mutation", "oracle", "group", "id_error_rate", "ood_error_rate", "ood_id_ratio"]]


def _json_number(value) -> float | None:
    value = float(value)
    return value if math.isfinite(value) else None


def _summary(records, rates, tests, ratios, ranges, planner, names, synthetic, alpha) -> dict:
    flips = rates[rates["oracle"] == "metamorphic"]
    overall = by_group(records, ["metamorphic"], ["distribution"])["metamorphic"]
    summary = {
        "n_probes": int(records[["path"]].drop_duplicates().shape[0]) if len(records) else 0,
        "n_inputs": len(records),
        "mutations": list(names),
        "synthetic": synthetic,
        "id_ranges": ranges.as_dict() if synthetic else {},
        "image_thresholds": {key: list(planner.settings[key]) for key in ("rotation_deg", "zoom", "crop")},
        "flip_rate": {d: _json_number(overall.get(d, np.nan)) for d in DISTRIBUTIONS},
        "flip_rate_by_group": {
            f"{r.mutation}/{r.distribution}/{r.group}": _json_number(r.error_rate) for r in flips.itertuples()
        },
        "ood_id_ratio": {
            f"{r.mutation}/{r.group}": _json_number(r.ood_id_ratio)
            for r in ratios[ratios["oracle"] == "metamorphic"].itertuples()
        },
        "eq5_violations": {
            f"{r.mutation}/{r.distribution}/{r.group}": bool(r.eq5_violation) for r in flips.itertuples()
        },
        "n_tests": len(tests),
        "n_significant": int(tests["significant"].sum()) if len(tests) else 0,
        "alpha": alpha,
    }
    if len(flips):
        worst = flips.loc[flips["error_rate"].idxmax()]
        summary["worst"] = {
            "mutation": worst.mutation,
            "distribution": worst.distribution,
            "group": worst.group,
            "flip_rate": float(worst.error_rate),
        }
    return summary


def _finding(summary: dict, rates: pd.DataFrame, tests: pd.DataFrame, group_order) -> str:
    if not summary["n_inputs"]:
        return "No probe could be mutated, so nothing was tested."
    rate = summary["flip_rate"]
    text = [
        f"Mutating each probe once in and once out of the training distribution changed the predicted "
        f"identity for {100 * (rate[ID] or 0):.1f}% of in-distribution and {100 * (rate[OOD] or 0):.1f}% of "
        f"out-of-distribution mutations (metamorphic oracle, all groups)."
    ]
    flips = rates[rates["oracle"] == "metamorphic"]
    if "worst" in summary and len(group_order) > 1:
        worst = summary["worst"]
        block = flips[(flips["mutation"] == worst["mutation"]) & (flips["distribution"] == worst["distribution"])]
        others = ", ".join(f"{r.group} {100 * r.error_rate:.0f}%" for r in block.itertuples())
        text.append(f"The most disruptive was {worst['mutation']} ({worst['distribution']}): {others}.")
    significant = tests[tests["significant"]] if len(tests) else tests
    if len(significant):
        top = significant.sort_values("p_holm").iloc[0]
        text.append(
            f"{len(significant)} of {len(tests)} Holm-corrected Fisher tests between groups are significant "
            f"at {summary['alpha']:g}, the strongest for {top.mutation} ({top.distribution}, {top.oracle}: "
            f"{top.group_a} {100 * top.error_rate_a:.0f}% vs {top.group_b} {100 * top.error_rate_b:.0f}%)."
        )
    else:
        text.append(
            f"None of the {len(tests)} Holm-corrected Fisher tests between groups is significant at "
            f"{summary['alpha']:g}."
        )
    if len(group_order) == 2:
        text.append(
            "DistroFair's Eq. 5 flags the worse of two groups whenever the rates differ at all, so read "
            "its flags only together with these tests."
        )
    return " ".join(text)


def _rate_figure(rates: pd.DataFrame, group_order, mutations) -> Figure:
    """Flip rate (metamorphic oracle) per mutation: one bar per group and distribution, Wilson 95% intervals."""
    flips = rates[rates["oracle"] == "metamorphic"].set_index(["mutation", "distribution", "group"])
    figure_width = min(14.0, max(6.0, 0.7 * len(mutations) * len(group_order) + 2))
    figure = Figure(figsize=(figure_width, 3.6), layout="constrained")
    axis = figure.subplots()
    bars = [(group, distribution) for group in group_order for distribution in DISTRIBUTIONS]
    width = 0.8 / len(bars)
    colours = {group: f"C{i}" for i, group in enumerate(group_order)}
    for offset, (group, distribution) in enumerate(bars):
        heights, low, high = [], [], []
        for mutation in mutations:
            key = (mutation, distribution, group)
            if key in flips.index:
                row = flips.loc[key]
                lo, hi = proportion_confint(int(row.violations), int(row.inputs), method="wilson")
                heights.append(row.error_rate)
                low.append(row.error_rate - lo)
                high.append(hi - row.error_rate)
            else:
                heights.append(np.nan)
                low.append(0.0)
                high.append(0.0)
        x = np.arange(len(mutations)) + offset * width
        axis.bar(
            x,
            heights,
            width,
            yerr=[low, high],
            capsize=2,
            color=colours[group],
            alpha=0.55 if distribution == ID else 1.0,
            hatch="" if distribution == ID else "//",
            label=f"{group} {distribution}",
        )
    axis.set_xticks(np.arange(len(mutations)) + 0.4 - width / 2, mutations)
    axis.set(ylabel="flip rate (metamorphic oracle)", title="Identity flips under ID vs OOD mutations", ylim=(0, None))
    axis.legend(ncols=len(group_order), fontsize="small")
    return figure


def _example_figure(original: np.ndarray | None, images: list[np.ndarray], records: pd.DataFrame) -> Figure:
    """The first probe and each of its mutations, titled with the value, ID/OOD and whether the prediction flipped."""
    count = len(images)
    columns = min(8, count + 1)
    rows = max(1, math.ceil((count + 1) / columns))
    figure = Figure(figsize=(1.5 * columns, 1.75 * rows), layout="constrained")
    axes = np.atleast_1d(figure.subplots(rows, columns, squeeze=False)).ravel()
    for axis in axes:
        axis.set_axis_off()
    if original is None:
        return figure
    axes[0].imshow(original)
    axes[0].set_title("original", fontsize=8)
    for axis, image, record in zip(axes[1:], images, records.head(count).itertuples(), strict=False):
        axis.imshow(image)
        mutation = Mutation(record.mutation, record.value, record.distribution)
        axis.set_title(
            f"{mutation.label}\n{record.distribution}{' flip' if record.metamorphic else ''}",
            fontsize=7,
            color="C3" if record.metamorphic else "black",
        )
    return figure


register(
    Audit(
        "ood",
        "in- vs out-of-distribution metamorphic tests (DistroFair)",
        audit,
        check=check_config,
        title="out-of-distribution metamorphic tests",
    )
)
