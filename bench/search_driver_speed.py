"""The search driver's cost per trial as the trials grow: does a 10,000-trial search cost each trial what a 100-trial
one does?

Random search, in this process, on a target that costs next to nothing (the analytic ZDT1 problem of
``fairnas.benchmarks.analytic``: microseconds a trial), at 100, 1,000 and 10,000 trials. Per trial, in ms: the wall
time, the target's own time, the strategy's (its ask and tell), and the rest, which is the driver's: recording the
trial (trials.csv), the front and the hypervolume curve (pareto_front.csv, hypervolume.csv) and the progress line.
Goal: at most 5 ms of driver time per trial at 10,000 trials. SMAC runs beside it at 100 and 1,000 trials, where
its own ask and tell dominate (its random forest is refitted as the trials grow).

    python bench/search_driver_speed.py                      # about 2 minutes on 2 CPU cores
    python bench/search_driver_speed.py --trials 100 1000 --strategies random
"""

from __future__ import annotations

import argparse
import logging
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from unittest import mock

import pandas as pd

from fairnas.benchmarks.analytic import NoisyMultiFidelityProblem
from fairnas.search import SearchSettings, loop, run_search

ZDT1 = NoisyMultiFidelityProblem("zdt1", n_variables=3)
GOAL_MS = 5.0
SMAC_LIMIT = 1_000
"""SMAC runs up to this many trials (at 10,000 its own cost, not the driver's, would take hours)."""


class Timed:
    """A callable or a strategy whose calls add their wall time to ``seconds``."""

    def __init__(self, wrapped, methods: Sequence[str] = ()):
        self.wrapped, self.seconds, self._methods = wrapped, 0.0, set(methods)

    def __call__(self, *args, **kwargs):
        return self._timed(self.wrapped, *args, **kwargs)

    def __getattr__(self, name):
        attribute = getattr(self.wrapped, name)
        if name not in self._methods:
            return attribute
        return lambda *args, **kwargs: self._timed(attribute, *args, **kwargs)

    def _timed(self, function, *args, **kwargs):
        start = time.perf_counter()
        try:
            return function(*args, **kwargs)
        finally:
            self.seconds += time.perf_counter() - start


def driver_cost(strategy: str, n_trials: int, folder: Path) -> dict:
    """One search's wall time per trial, split into the target's, the strategy's and the driver's."""
    target, strategies = Timed(ZDT1), []
    real = loop.registration

    def timed_registration(name):
        build = real(name).load()

        def load():
            def timed_build(*args, **kwargs):
                strategies.append(Timed(build(*args, **kwargs), methods=("ask", "tell", "tell_record")))
                return strategies[-1]

            return timed_build

        return mock.Mock(load=load)

    settings = SearchSettings(
        ZDT1.objectives, min_budget=1, max_budget=4, strategy=strategy, n_trials=n_trials, seed=0, final={"seeds": 0}
    )
    with mock.patch.object(loop, "registration", timed_registration):
        start = time.perf_counter()
        run_search(target, ZDT1.configspace(), settings, output_dir=folder)
        wall = time.perf_counter() - start
    per_trial = {
        "wall": wall,
        "target": target.seconds,
        "strategy": strategies[0].seconds,
    }
    per_trial["driver"] = wall - target.seconds - strategies[0].seconds
    return {
        "strategy": strategy,
        "trials": n_trials,
        **{f"{name} ms/trial": seconds * 1e3 / n_trials for name, seconds in per_trial.items()},
    }


def main(argv: Sequence[str] | None = None) -> pd.DataFrame:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, nargs="+", default=[100, 1_000, 10_000])
    parser.add_argument("--strategies", nargs="+", default=["random", "smac"])
    parser.add_argument("--output", type=Path, help="also write the table as CSV here")
    args = parser.parse_args(argv)
    logging.getLogger("fairnas.search").setLevel(logging.WARNING)
    rows = []
    with tempfile.TemporaryDirectory() as scratch:
        for strategy in args.strategies:
            for n_trials in args.trials:
                if strategy == "smac" and n_trials > SMAC_LIMIT:
                    continue
                rows.append(driver_cost(strategy, n_trials, Path(scratch) / f"{strategy}-{n_trials}"))
                print(f"[driver] {rows[-1]}", flush=True)
    table = pd.DataFrame(rows)
    print(f"\nSearch driver cost per trial (goal: driver <= {GOAL_MS} ms per trial at 10,000 trials):")
    print(table.to_string(index=False, float_format="{:.2f}".format))
    if args.output is not None:
        table.to_csv(args.output, index=False)
    return table


if __name__ == "__main__":
    main()
