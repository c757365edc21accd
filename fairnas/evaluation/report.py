"""Tables of a transfer evaluation, as in thesis Tables 4.5/4.7 (accuracy), 4.8 (RFW fairness) and 4.9 (probes)."""

from __future__ import annotations

from collections.abc import Mapping

import pandas as pd

from fairnas.evaluation.all_metrics import BenchmarkResult
from fairnas.metrics.fairness import DISPARITY_METRICS

OVERALL = "all"  # the group of a metric computed over all pairs or images
LONG_COLUMNS = ("model", "benchmark", "protocol", "group", "metric", "value")
# Table 4.8: the error and the five fairness metrics it is traded off against.
FAIRNESS_COLUMNS = ("error", *DISPARITY_METRICS)
GROUP_COLUMNS = (
    ("identification", "error"),
    ("identification", "rank"),
    ("verification", "accuracy"),
    ("verification", "fmr"),
    ("verification", "fnmr"),
)


def long_table(results: Mapping[tuple[str, str], BenchmarkResult]) -> pd.DataFrame:
    """Every metric as one row (model, benchmark, protocol, group, metric, value); ``group`` is ``all`` for
    metrics over the whole benchmark."""
    rows = []
    for (model, benchmark), result in results.items():
        for protocol, metrics in (("verification", result.verification), ("identification", result.identification)):
            for key, value in metrics.items():
                metric, _, group = key.partition("/")
                rows.append((model, benchmark, protocol, group or OVERALL, metric, value))
    return pd.DataFrame(rows, columns=list(LONG_COLUMNS))


def accuracy_table(long: pd.DataFrame) -> pd.DataFrame:
    """Model x benchmark 10-fold verification accuracy in percent (Tables 4.5, 4.7), benchmarks in run order."""
    rows = long[(long["protocol"] == "verification") & (long["metric"] == "accuracy") & (long["group"] == OVERALL)]
    table = rows.pivot(index="model", columns="benchmark", values="value") * 100.0
    return table.reindex(index=pd.unique(rows["model"]), columns=pd.unique(rows["benchmark"]))


def fairness_table(long: pd.DataFrame) -> pd.DataFrame:
    """Per model and benchmark with groups: identification error and the Table 4.8 fairness metrics, then per
    group the identification error and rank and the verification accuracy, FMR and FNMR."""
    identification = long[long["protocol"] == "identification"]
    if identification.empty:
        return pd.DataFrame(columns=["model", "benchmark", *FAIRNESS_COLUMNS])
    keys = identification[["model", "benchmark"]].drop_duplicates()
    overall = identification[identification["group"] == OVERALL]
    table = overall.pivot(index=["model", "benchmark"], columns="metric", values="value")[list(FAIRNESS_COLUMNS)]
    grouped = long[long["group"] != OVERALL].merge(keys)
    for protocol, metric in GROUP_COLUMNS:
        rows = grouped[(grouped["protocol"] == protocol) & (grouped["metric"] == metric)]
        prefix = "verification_accuracy" if (protocol, metric) == ("verification", "accuracy") else metric
        wide = rows.pivot(index=["model", "benchmark"], columns="group", values="value")
        wide.columns = [f"{prefix}/{group}" for group in wide.columns]
        table = table.join(wide)
    return table.reset_index()


def probe_table(probes: Mapping[str, Mapping[str, float]]) -> pd.DataFrame:
    """Model x layer held-out probe accuracy in percent with the chance level (Table 4.9) and the image counts."""
    table = pd.DataFrame.from_dict(probes, orient="index").rename_axis("model")
    rates = [column for column in table.columns if not column.startswith("n_")]
    table[rates] *= 100.0
    return table
