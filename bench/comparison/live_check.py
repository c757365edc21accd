"""Does a surrogate benchmark agree with real training? Its predictions read against live studies: the answer a real
search chose and the default model, each trained by ``study.py``'s final stage on seeds that neither the search nor
the table used (docs/search_benchmark.md, "Live searches re-judged").

For every study, model and objective: the measured mean over the fresh seeds and its standard error, the surrogate's
predicted mean and seed s.d. at the last epoch; z, the measured mean's distance from the prediction in units of the
s.e. an n-seed mean would have under the predicted noise (the mean model's error, which grows in z with the seeds);
and the run coverage, the share of the fresh runs inside the central 90 % interval of simulated runs
(:meth:`~fairnas.benchmarks.surrogate.Surrogate.interval`; a run's rank disparity is not normal). For
the searched answer minus the default model, paired by seed: the measured difference and its s.e. beside the
predicted one (the difference of the predicted means), whether the two agree in sign (the surrogate's verdict on "the
search beat the default") and whether the prediction lies inside the measured difference's 95 % t-interval, judged
as the study judges its claims (:func:`fairnas.study.inference.paired_test`). Missing values are left out; where
one paired seed or none cannot tell, those two are empty.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from fairnas.benchmarks.surrogate import INTERVAL, Surrogate
from fairnas.groups import mean_se
from fairnas.search import SearchSpace
from fairnas.study.inference import paired_test
from fairnas.study.runs import searched_name

DEFAULT_KIND = "default"
"""The kind ``study.py`` gives its default model in ``runs.csv``."""
LEAD = "searched - default"
"""The model column of the rows of the searched answer's lead over the default model."""


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
    baseline = final[final["kind"] == DEFAULT_KIND].set_index("seed")
    rows = []
    for config_text in answer["config"]:
        config = json.loads(config_text)
        searched = final[final["model"] == searched_name(config, study_space)].set_index("seed")
        if searched.empty or baseline.empty:
            continue  # the study compared another candidate of its answer
        models = {"searched": (searched, in_table_space(config)), "default": (baseline, dict(default))}
        for split, surrogate in surrogates.items():
            predicted = {name: _predicted(surrogate, model_config) for name, (_, model_config) in models.items()}
            for k, objective in enumerate(surrogate.objectives):
                column = f"{split}/{objective}"
                for name, (measured, _) in models.items():
                    rows.append(_model_row(study.name, name, column, measured[column], *predicted[name][:, k]))
                paired = (searched[column] - baseline[column]).dropna()  # seeds both trained
                lead = predicted["searched"][0, k] - predicted["default"][0, k]
                rows.append(_lead_row(study.name, column, paired, lead))
    if not rows:
        raise ValueError(f"{study}: no final-stage runs of its search's answer and of its default model in runs.csv")
    return pd.DataFrame(rows)


def _predicted(surrogate: Surrogate, config: Mapping[str, Any]) -> np.ndarray:
    """[mean, s.d., the simulated runs' interval's lower and upper end; objective] at the surrogate's last epoch."""
    low, high = surrogate.interval([config], INTERVAL)
    return np.stack([surrogate.mean([config])[0, -1], surrogate.noise_sd([config])[0, -1], low[0, -1], high[0, -1]])


def _model_row(
    study: str, model: str, column: str, values: pd.Series, predicted: float, sd: float, low: float, high: float
) -> dict[str, Any]:
    values = values.dropna()
    n, (mean, se) = len(values), mean_se(values)
    z = (mean - predicted) / (sd / np.sqrt(n)) if n else np.nan
    inside = (values >= low) & (values <= high)
    coverage = float(inside.mean()) if n else np.nan
    return {
        "study": study,
        "model": model,
        "objective": column,
        "n": n,
        "measured": mean,
        "measured_se": se,
        "predicted": predicted,
        "predicted_sd": sd,
        "z": z,
        "run_coverage": coverage,
    }


def _lead_row(study: str, column: str, differences: pd.Series, predicted: float) -> dict[str, Any]:
    """The searched answer's lead over the default model, measured (:func:`~fairnas.study.inference.paired_test`,
    as the study's claims are judged) and predicted; ``agree`` and ``in_measured_ci`` are None where the seeds
    cannot tell (no paired seed, or one)."""
    test = paired_test(differences.to_numpy())
    agree = None if np.isnan(test.effect) else bool(np.sign(predicted) == np.sign(test.effect))
    inside = None if np.isnan(test.ci_low) else bool(test.ci_low <= predicted <= test.ci_high)
    se = test.sd / np.sqrt(test.n) if test.n > 1 else np.nan
    return {
        "study": study,
        "model": LEAD,
        "objective": column,
        "n": test.n,
        "measured": test.effect,
        "measured_se": se,
        "predicted": predicted,
        "agree": agree,
        "in_measured_ci": inside,
    }


def _read(path: Path) -> pd.DataFrame:
    if not path.is_file():
        raise ValueError(f"{path} does not exist; a study folder has runs.csv and search_answer.csv")
    return pd.read_csv(path)


def summary(checks: Sequence[pd.DataFrame]) -> str:
    """The share of the fresh runs' values inside a simulated run's 90 % interval, and how often the surrogate's sign
    of the searched answer's lead agreed with the measured one (leads the seeds cannot tell are left out)."""
    table = pd.concat(checks, ignore_index=True)
    models, leads = table[table["model"] != LEAD], table[table["model"] == LEAD]
    counted = models[models["n"] > 0]
    coverage = float((counted["run_coverage"] * counted["n"]).sum() / counted["n"].sum())
    told = leads.dropna(subset=["agree"])
    in_ci = leads.dropna(subset=["in_measured_ci"])
    return (
        f"fresh runs' values (runs x objectives x splits) inside a simulated run's {INTERVAL:.0%} interval: "
        f"{coverage:.2f} of {int(counted['n'].sum())}; the searched answer's lead over the default model agrees in "
        f"sign: {int(told['agree'].astype(bool).sum())} of {len(told)}, and its prediction lies in the measured 95 % "
        f"interval: {int(in_ci['in_measured_ci'].astype(bool).sum())} of {len(in_ci)}"
    )
