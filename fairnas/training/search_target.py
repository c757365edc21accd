"""The search's target for faces: ``target(config, seed, budget) -> {objective: value}`` trains with ``train(cfg)``.

Budgets are epochs. The learning-rate schedule of every trial is defined over ``max_budget`` epochs, so a
configuration promoted from budget b to b' can continue its budget-b checkpoint for b' - b more epochs and end
exactly where training to b' directly would (beyond the paper, which retrained every rung from scratch).
"""

from __future__ import annotations

import copy
import json
import math
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from fairnas.config import compose_config
from fairnas.io import write_json_atomic
from fairnas.search import config_id
from fairnas.training.run import train

TRIAL_FILE = "trial.json"


class TrainingTarget:
    """Trains one configuration of a search space at a budget and returns its metrics on ``split``.

    Each run lives in ``<trials_dir>/<config id>/seed<seed>/epochs<budget>`` with the usual ``train`` outputs
    plus ``trial.json`` (written last) recording which checkpoint it continued and how many epochs it ran; a run
    whose ``trial.json`` exists is not trained again.

    A trial needs only the metrics of its last epoch on ``split``: it validates once, after its last epoch
    (``trainer.check_val_every_n_epoch``), and skips the test split unless ``split`` is ``test`` or ``test`` is set
    (:meth:`reporting_test`: the final stage's runs, which also return ``test/<objective>``). These settings come
    before ``base_overrides``, which may change them.
    """

    def __init__(
        self,
        overrides: Callable[[dict[str, Any]], list[str]],
        *,
        objectives: Sequence[str],
        trials_dir: str | Path,
        max_budget: float,
        base_overrides: Sequence[str] = (),
        split: str = "val",
        continue_across_fidelities: bool = True,
        test: bool = False,
    ):
        self.overrides = overrides
        self.objectives = list(objectives)
        self.trials_dir = Path(trials_dir)
        self.max_epochs = epochs(max_budget)
        self.base_overrides = list(base_overrides)
        self.split = split
        self.continue_across_fidelities = continue_across_fidelities
        self.test = test

    def __call__(self, config: dict[str, Any], seed: int, budget: float) -> dict[str, float]:
        metrics = self.run(config, seed, budget, test=self.test)
        values = {name: metrics[self.split][name] for name in self.objectives}
        return values | {f"test/{name}": metrics["test"][name] for name in self.objectives if self.test}

    @property
    def extra_metrics(self) -> list[str]:
        """What a call returns beside the objectives: ``test/<objective>`` when it evaluates the test split."""
        return [f"test/{name}" for name in self.objectives] if self.test else []

    def reporting_test(self) -> TrainingTarget:
        """This target, its runs also evaluating the test split and returning ``test/<objective>``."""
        reporting = copy.copy(self)
        reporting.test = True
        return reporting

    def run(self, config: dict[str, Any], seed: int, budget: float, test: bool = False) -> dict:
        """Train ``config`` to ``budget`` epochs (continuing a lower-budget run if allowed); the full metrics, with
        the test split's when ``test`` (or the objectives' split is ``test``)."""
        n_epochs = epochs(budget)
        test = test or self.split == "test"
        run_dir = trial_dir(self.trials_dir, config, seed, budget)
        seed_dir = run_dir.parent
        if (run_dir / TRIAL_FILE).is_file():  # finished before (e.g. by an interrupted search or final evaluation)
            metrics = json.loads((run_dir / "metrics.json").read_text())
            if metrics.get("test") is not None or not test:
                return metrics
        previous = self._checkpoint_below(seed_dir, n_epochs) if self.continue_across_fidelities else None
        overrides = [
            f"trainer.check_val_every_n_epoch={n_epochs}",
            f"eval.test={str(test).lower()}",
            *self.base_overrides,
            *self.overrides(config),
            f"seed={seed}",
            f"trainer.max_epochs={n_epochs}",
            f"scheduler.horizon_epochs={self.max_epochs}",
        ]
        if previous is not None:
            overrides.append(f"resume_from={previous[1]}")
        metrics = train(compose_config("train", overrides, output_dir=run_dir))
        start = previous[0] if previous else 0
        write_json_atomic(
            run_dir / TRIAL_FILE,
            {
                "config": config,
                "seed": seed,
                "budget": budget,
                "overrides": overrides,
                "continued_from_epoch": start,
                "epochs_run": n_epochs - start,
            },
        )
        return metrics

    @staticmethod
    def _checkpoint_below(seed_dir: Path, n_epochs: int) -> tuple[int, Path] | None:
        """The finished run of this configuration and seed with the most epochs below ``n_epochs``."""
        finished = []
        for run_dir in seed_dir.glob("epochs*"):
            done = int(run_dir.name.removeprefix("epochs"))
            checkpoint = run_dir / "checkpoints" / "last.ckpt"
            if done < n_epochs and checkpoint.is_file() and (run_dir / "metrics.json").is_file():
                finished.append((done, checkpoint))
        return max(finished, default=None)


def trial_dir(trials_dir: str | Path, config: dict[str, Any], seed: int, budget: float) -> Path:
    """Where ``TrainingTarget`` trains ``config`` with ``seed`` to ``budget``: ``<config id>/seed<s>/epochs<b>``."""
    return Path(trials_dir) / config_id(config) / f"seed{seed}" / f"epochs{epochs(budget)}"


def epochs(budget: float) -> int:
    """A search budget as a whole number of epochs (Hyperband budgets between integers are rounded)."""
    if not math.isfinite(budget) or budget < 0.5:
        raise ValueError(f"budget={budget} must be at least one epoch")
    return int(round(budget))


def epochs_saved(trials_dir: str | Path) -> tuple[int, int]:
    """(epochs actually trained, epochs saved by continuing) over all runs under ``trials_dir``."""
    trained = saved = 0
    for record in Path(trials_dir).glob(f"*/seed*/epochs*/{TRIAL_FILE}"):
        trial = json.loads(record.read_text())
        trained += trial["epochs_run"]
        saved += trial["continued_from_epoch"]
    return trained, saved
