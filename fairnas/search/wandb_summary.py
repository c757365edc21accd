"""Log a finished search to Weights & Biases: one run per trial plus a summary run.

Trial runs share the group ``<search name>`` and carry their configuration and objectives; the
summary run holds the Pareto front as a ``wandb.Table``, a scatter of the objectives with the front
highlighted, and the hypervolume-vs-budget curve. W&B runs offline unless ``WANDB_MODE`` (or
``mode``) says otherwise; run files go to ``<output_dir>/wandb``.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
from collections.abc import Sequence
from pathlib import Path

import pandas as pd
from PIL import Image

from fairnas.search.plots import pareto_figure
from fairnas.search.result import SearchResult


def log_search_to_wandb(
    result: SearchResult,
    search_name: str,
    *,
    enabled: bool = True,
    project: str = "fairnas",
    entity: str | None = None,
    mode: str | None = None,
    reference_point: Sequence[float] | None = None,
) -> Path | None:
    """Log every trial and a summary of ``result``; return the W&B directory (None when disabled).

    Run ids derive from the output directory and trial id, so logging the same search again
    (e.g. after a resumed search) updates the same runs when synced instead of duplicating them.
    """
    if not enabled:
        return None
    import wandb

    mode = mode or os.environ.get("WANDB_MODE") or "offline"
    search_id = hashlib.sha1(str(result.output_dir.resolve()).encode()).hexdigest()[:10]
    common = {"project": project, "entity": entity, "group": search_name, "dir": str(result.output_dir), "mode": mode}
    settings = wandb.Settings(silent=True)

    for trial in result.trials.to_dict("records"):
        config = {**json.loads(trial["config"]), "budget": trial["budget"], "seed": trial["seed"]}
        with wandb.init(
            **common,
            job_type="trial",
            name=f"{search_name}-trial{trial['trial_id']}",
            id=f"{search_id}-trial{trial['trial_id']}",
            config=config,
            settings=settings,
        ) as run:
            run.summary.update(
                {name: trial[name] for name in result.objectives}
                | {key: trial[key] for key in ("status", "error_message", "wall_time_s", "config_id", "trial_id")}
            )

    reference = reference_point if reference_point is not None else result.default_reference_point()
    with wandb.init(
        **common,
        job_type="summary",
        name=f"{search_name}-summary",
        id=f"{search_id}-summary",
        config={"objectives": list(result.objectives), "max_budget": result.max_budget},
        settings=settings,
    ) as run:
        png = io.BytesIO()
        pareto_figure(result.trials, result.pareto_front, result.objectives, result.max_budget).savefig(png, dpi=120)
        run.log(
            {
                "pareto_front": wandb.Table(dataframe=_loggable(result.pareto_front)),
                "trials": wandb.Table(dataframe=_loggable(result.trials)),
                "pareto_scatter": wandb.Image(Image.open(png)),
            }
        )
        run.summary.update({"front_size": len(result.pareto_front), "n_trials": len(result.trials)})
        if reference is not None:
            curve = result.hypervolume_curve(reference)
            run.log(
                {
                    "hypervolume_curve": wandb.plot.line(
                        wandb.Table(dataframe=curve), "consumed_budget", "hypervolume", title="hypervolume vs budget"
                    )
                }
            )
            run.summary.update(
                {"hypervolume": result.hypervolume(reference), "reference_point": [float(v) for v in reference]}
            )
    return result.output_dir / "wandb"


def _loggable(frame: pd.DataFrame) -> pd.DataFrame:
    """Text columns with missing entries (inactive hyperparameters) as "" so W&B sees one type per column."""
    frame = frame.copy()
    for column in [name for name in frame.columns if not pd.api.types.is_numeric_dtype(frame[name])]:
        frame[column] = frame[column].map(lambda value: "" if pd.isna(value) else str(value))
    return frame
