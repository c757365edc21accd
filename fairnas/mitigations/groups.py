"""Which protected group a mitigation acts on: named in config, or measured by an earlier run (thesis Sec. 4.5.3).

Flipped acts on the group with the better accuracy, Angular on the group with the worse one. Either is named
directly (``mitigation.group``) or read from the validation accuracies per group in the ``metrics.json`` of an
earlier run on the same data, typically the unmitigated baseline of the same model and seed (what ``compare.py``
passes). The validation split is used so that the test split stays untouched by every choice made in training.
"""

from __future__ import annotations

import json
from pathlib import Path

REFERENCE_SPLIT = "val"


def resolve_group(group: str | None, reference_metrics: str | Path | None, *, best: bool) -> str:
    """``group`` if given, else the group with the highest (``best``) or lowest validation accuracy in
    ``reference_metrics``."""
    if group is not None:
        return str(group)
    if reference_metrics is None:
        role = "better" if best else "worse"
        raise ValueError(f"mitigation.group: name the group with the {role} accuracy, or set "
                         "mitigation.reference_metrics=<earlier run>/metrics.json to measure it")
    return group_by_accuracy(reference_metrics, best=best)


def group_by_accuracy(metrics_path: str | Path, *, best: bool) -> str:
    """The group with the highest (``best``) or lowest validation accuracy in a run's ``metrics.json``.

    Ties go to the first group in the run's group order.
    """
    path = Path(metrics_path).expanduser()
    if not path.is_file():
        raise FileNotFoundError(f"mitigation.reference_metrics: '{path}' does not exist")
    metrics = json.loads(path.read_text())
    accuracies = {group: metrics[REFERENCE_SPLIT].get(f"accuracy/{group}") for group in metrics["group_order"]}
    missing = [group for group, value in accuracies.items() if value is None]
    if missing:
        raise ValueError(f"mitigation.reference_metrics: '{path}' has no {REFERENCE_SPLIT} accuracy for groups "
                         f"{missing}")
    pick = max if best else min
    return pick(accuracies, key=accuracies.__getitem__)
