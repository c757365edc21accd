"""Does a surrogate benchmark agree with real training? Its predictions read against live studies: the answer a real
search chose and the default model, each trained by ``study.py``'s final stage on seeds that neither the search nor
the table used (issue 45, item 6; docs/search_benchmark.md, "Live searches re-judged").

For every study, model and objective: the measured mean over the fresh seeds and its standard error, the surrogate's
predicted mean and seed s.d. at the last epoch; z, the measured mean's distance from the prediction in units of the
s.e. an n-seed mean would have under the predicted noise (the mean model's error, which grows in z with the seeds);
and the run coverage, the share of the fresh runs inside the 90 % interval a simulated run is drawn from. For
the searched answer minus the default model, paired by seed: the measured difference and its s.e. beside the
predicted one, whether the two agree in sign (the surrogate's verdict on "the search beat the default") and whether
the prediction lies inside the measured difference's 95 % t-interval.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from scipy import stats

from fairnas.benchmarks.surrogate import INTERVAL, Surrogate
from fairnas.search import SearchSpace
from fairnas.study.stages.search import searched_name

DEFAULT_KIND = "default"
"""The kind ``study.py`` gives its default model in ``runs.csv``."""


def live_check(
    surrogates: Mapping[str, Surrogate],
    study: Path,
    study_space: SearchSpace,
    in_table_space: Any,
    default: Mapping[str, Any],
) -> pd.DataFrame:
    """The rows described in the module docstring for the ``study`` folder (its ``runs.csv`` and
    ``search_answer.csv``), one surrogate per split (``{"val": ..., "test": ...}``); ``in_table_space`` names a
    configuration of ``study_space`` as in the surrogate's space, and ``default`` is the default model's
    configuration there."""
    runs, answer = _read(study / "runs.csv"), _read(study / "search_answer.csv")
    final = runs[(runs["stage"] == "final") & (runs["status"] == "success") & (runs["mitigation"] == "none")]
    final = final[final["data"] == "main"]
    rows = []
    for config_text in answer["config"]:
        config = json.loads(config_text)
        searched = final[final["model"] == searched_name(config, study_space)].set_index("seed")
        baseline = final[final["kind"] == DEFAULT_KIND].set_index("seed")
        if searched.empty or baseline.empty:
            continue  # the study compared another candidate of its answer
        models = {"searched": (searched, in_table_space(config)), "default": (baseline, dict(default))}
        for split, surrogate in surrogates.items():
            predicted = {name: _predicted(surrogate, model_config) for name, (_, model_config) in models.items()}
            lead = predicted["searched"] - predicted["default"]
            for k, objective in enumerate(surrogate.objectives):
                column = f"{split}/{objective}"
                for name, (measured, _) in models.items():
                    rows.append(_row(study.name, name, column, measured[column], *predicted[name][:, k]))
                paired = (searched[column] - baseline[column]).dropna()
                rows.append(_row(study.name, "searched - default", column, paired, *lead[:, k]))
    if not rows:
        raise ValueError(f"{study}: no final-stage runs of its search's answer and of its default model in runs.csv")
    return pd.DataFrame(rows)


def _predicted(surrogate: Surrogate, config: Mapping[str, Any]) -> np.ndarray:
    """[mean or s.d., objective] at the surrogate's last epoch."""
    return np.stack([surrogate.mean([config])[0, -1], surrogate.noise_sd([config])[0, -1]])


def _row(study: str, model: str, column: str, values: pd.Series, predicted: float, sd: float) -> dict[str, Any]:
    n = len(values)
    mean, se = float(values.mean()), float(values.std(ddof=1) / np.sqrt(n)) if n > 1 else float("nan")
    row = {"study": study, "model": model, "objective": column, "n": n, "measured": mean, "measured_se": se}
    row["predicted"] = predicted
    if model == "searched - default":
        row["agree"] = bool(np.sign(predicted) == np.sign(mean))
        row["in_measured_ci"] = bool(abs(predicted - mean) <= stats.t.ppf(0.975, n - 1) * se) if n > 1 else False
        return row
    row["predicted_sd"] = sd
    row["z"] = (mean - predicted) / (sd / np.sqrt(n))
    row["run_coverage"] = float((abs(values - predicted) <= stats.norm.ppf(0.5 + INTERVAL / 2) * sd).mean())
    return row


def _read(path: Path) -> pd.DataFrame:
    if not path.is_file():
        raise ValueError(f"{path} does not exist; a study folder has runs.csv and search_answer.csv")
    return pd.read_csv(path)


def summary(checks: Sequence[pd.DataFrame]) -> str:
    """The share of the fresh runs inside a simulated run's 90 % interval, and how often the surrogate's sign of the
    searched answer's lead agreed with the measured one."""
    table = pd.concat(checks, ignore_index=True)
    models, leads = table[table["model"] != "searched - default"], table[table["model"] == "searched - default"]
    runs = float((models["run_coverage"] * models["n"]).sum() / models["n"].sum())
    return (
        f"fresh runs inside a simulated run's {INTERVAL:.0%} interval: {runs:.2f} (of {int(models['n'].sum())}); "
        f"the searched answer's lead over the default model agrees in sign: {int(leads['agree'].sum())} of "
        f"{len(leads)}, and lies in the measured 95 % interval: {int(leads['in_measured_ci'].sum())} of {len(leads)}"
    )
