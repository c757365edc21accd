"""The cost of ``search.strategy=botorch``'s model: seconds per suggestion against the trials it knows, and what the
cap on the trials it is fitted on (``search.botorch.max_observations``) and fitting the hyperparameters only at every
k-th suggestion (``search.botorch.refit_every``) do to the time and to the answer.

**Time per suggestion.** For each space, fidelity variant, number of told trials n, cap and ``refit_every``, a
``BotorchStrategy`` is told n trials of a synthetic noisy two-objective target (random configurations of the space;
``full``: at the maximum budget, the other variants: at rungs drawn uniformly), then asked ``--asks`` times (each
answer told before the next ask); the table gives the mean (the cost per suggestion when ``--asks`` is a multiple
of ``refit_every``: the first ask fits the hyperparameters), the median and the largest wall time of an ask, which
fits the Gaussian process (or takes in the new trials) and optimises the acquisition. BoTorch's fused C++ kernel of
qLogNEHVI is built or loaded once before any timing (a once-per-process cost). Spaces: ``analytic`` (4 floats,
``SingleTaskGP``) and ``dpn_paper`` (the paper's space: five categoricals, two conditional log-scaled floats,
``MixedSingleTaskGP`` with imputation). The search settings are the defaults of ``conf/search/local.yaml`` unless
given.

**The effect on the answer.** ``run_search`` on the analytic problem (noisy ZDT1, 4 inputs, budgets 1-8,
``full``: every trial at 8) for ``--answer-trials`` trials with each cap of ``--answer-caps``, each value of
``--answer-refit-every`` and seeds 0 .. ``--seeds`` - 1; the table gives the hypervolume of the observed front
(reference point (1.1, 11)) as a share of the noise-free front's, mean and standard error over seeds, and the mean
time per suggestion.

Run it alone on the machine (it times wall clock): ``--threads 2`` is the 2-core setting of docs/search_benchmark.md;
``--observations`` with no value skips the timing.

    PYTHONHASHSEED=0 python bench/botorch_cost.py --observations 100 300 1000 --caps none 100 --refit-every 1 5 \\
        --answer-trials 150 --answer-caps none 100 --answer-refit-every 1 5 --seeds 2 --output botorch_cost.csv
"""

from __future__ import annotations

import argparse
import copy
import logging
import statistics
import sys
import tempfile
import time
import warnings
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import torch
from botorch.acquisition.multi_objective.logei import _try_load_fused_kernel
from ConfigSpace import ConfigurationSpace

from fairnas.benchmarks.analytic import NoisyMultiFidelityProblem
from fairnas.groups import mean_se
from fairnas.search import SearchSettings, config_id, load_space, run_search
from fairnas.search.hypervolume import hypervolume
from fairnas.search.pareto import final_trials
from fairnas.search.records import TrialRecord
from fairnas.search.strategies.botorch.strategy import BotorchStrategy
from fairnas.search.trial import TrialOutcome

REPOSITORY = Path(__file__).resolve().parents[1]
ZDT1 = NoisyMultiFidelityProblem("zdt1", n_variables=4, noise=0.3)
REFERENCE = (1.1, 11.0)
MAX_HYPERVOLUME = 1.1 * 11.0 - 1 / 3  # the noise-free front f2 = 1 - sqrt(f1), as bench/search_efficiency.py
BUDGETS = {"min_budget": 1, "max_budget": 8, "eta": 2}


def spaces() -> dict[str, tuple[ConfigurationSpace, Callable[[dict[str, Any], int, float], dict[str, float]]]]:
    """Each timed space and a cheap synthetic target on it (two objectives, noise shrinking with the budget)."""
    paper = load_space(REPOSITORY / "searchspaces" / "dpn_paper.yaml").configspace

    def paper_target(config: dict[str, Any], seed: int, budget: float) -> dict[str, float]:
        rng = np.random.default_rng(int(config_id(config), 16) % 2**32 + int(budget))
        lr = config.get("lr_adam", config.get("lr_sgd", 0.01))
        ops = (config["op0"] + 2 * config["op1"] + 3 * config["op2"]) / 48
        error = 0.3 + 0.4 * ops + 0.1 * abs(np.log10(lr) + 2.5) + rng.normal(0, 0.1 / budget)
        disparity = 4 - 2 * ops + (config["head"] == "arcface") + rng.normal(0, 1 / budget)
        return {"f1": float(error), "f2": float(disparity)}

    return {"analytic": (ZDT1.configspace(), ZDT1), "dpn_paper": (paper, paper_target)}


def settings(fidelity: str, cap: int | None, refit_every: int = 1, **extra: Any) -> SearchSettings:
    """The timed strategy's settings: no initial design (the told trials stand for it), the defaults otherwise."""
    return SearchSettings(
        ("f1", "f2"),
        **BUDGETS,
        n_trials=10**6,
        initial_design_size=0,
        strategy="botorch",
        final={"seeds": 0},
        options={"fidelity": fidelity, "max_observations": cap, "refit_every": refit_every, **extra},
    )


def time_suggestions(
    space_name: str, fidelity: str, n: int, cap: int | None, asks: int, refit_every: int = 1, seed: int = 0
) -> dict[str, Any]:
    """Seconds per ask of a strategy told ``n`` trials (mean, median and maximum over ``asks`` asks, the first of
    which fits the hyperparameters: the mean is the cost per suggestion when ``asks`` is a multiple of
    ``refit_every``)."""
    configspace, target = spaces()[space_name]
    strategy = BotorchStrategy(configspace, settings(fidelity, cap, refit_every))
    sampler = copy.deepcopy(configspace)
    sampler.seed(seed)
    rungs = strategy.rungs
    rng = np.random.default_rng(seed)
    for trial_id in range(n):
        config = dict(sampler.sample_configuration())
        budget = rungs[-1] if fidelity == "full" else float(rng.choice(rungs))
        outcome = TrialOutcome(target(config, seed, budget), "success", 1.0)
        strategy.tell_record(TrialRecord(trial_id, config, budget, seed, outcome))
    times = []
    for _ in range(asks):
        start = time.perf_counter()
        proposal = strategy.ask()
        times.append(time.perf_counter() - start)
        assert proposal is not None
        strategy.tell(proposal, TrialOutcome(target(proposal.config, seed, proposal.budget), "success", 1.0))
    return {
        "space": space_name,
        "fidelity": fidelity,
        "observations": n,
        "cap": cap,
        "refit_every": refit_every,
        "mean_s": statistics.mean(times),
        "median_s": statistics.median(times),
        "max_s": max(times),
    }


def answer_with(cap: int | None, refit_every: int, trials: int, seed: int, work_dir: Path) -> dict[str, Any]:
    """The observed front's hypervolume share after ``trials`` full-budget trials of the analytic problem, with the
    cap ``cap`` and ``refit_every``."""
    search = SearchSettings(
        ("f1", "f2"),
        **BUDGETS,
        n_trials=trials,
        strategy="botorch",
        seed=seed,
        reference_point=REFERENCE,
        final={"seeds": 0},
        options={"fidelity": "full", "max_observations": cap, "refit_every": refit_every},
    )
    result = run_search(
        ZDT1, ZDT1.configspace(), search, output_dir=work_dir / f"cap{cap}_refit{refit_every}" / f"seed{seed}"
    )
    front = final_trials(result.trials, BUDGETS["max_budget"])
    volume = hypervolume(front[["f1", "f2"]].to_numpy(dtype=float), np.array(REFERENCE))
    stamps = result.trials["finished_at"].to_numpy(dtype=float)
    wall = result.trials["wall_time_s"].to_numpy(dtype=float)
    gaps = np.diff(stamps) - wall[1:]  # from one trial's end to the next one's start: mostly the suggestion
    return {
        "cap": cap,
        "refit_every": refit_every,
        "seed": seed,
        "share": volume / MAX_HYPERVOLUME,
        "suggestion_s": float(np.median(gaps)),
    }


def _cap(value: str) -> int | None:
    return None if value.lower() in ("none", "null") else int(value)


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--spaces", nargs="+", choices=["analytic", "dpn_paper"], default=["analytic", "dpn_paper"])
    parser.add_argument("--fidelities", nargs="+", choices=["full", "early_stop", "momf"], default=["full"])
    parser.add_argument("--observations", nargs="*", type=int, default=[100, 300, 1000])
    parser.add_argument("--caps", nargs="+", type=_cap, default=[None, 300], help="'none': no cap")
    parser.add_argument("--refit-every", nargs="+", type=int, default=[1, 5], help="search.botorch.refit_every values")
    parser.add_argument("--asks", type=int, default=5, help="timed asks per setting")
    parser.add_argument("--answer-trials", type=int, default=0, help="0: skip the cap's effect on the answer")
    parser.add_argument("--answer-caps", nargs="+", type=_cap, default=[None, 300, 100])
    parser.add_argument("--answer-refit-every", nargs="+", type=int, default=[1])
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--threads", type=int, default=2, help="torch's intra-op threads")
    parser.add_argument("--output", type=Path, help="CSV of the timings (and <output>.answer.csv)")
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    warnings.filterwarnings("ignore")
    logging.getLogger("fairnas.search").setLevel(logging.ERROR)
    _try_load_fused_kernel()  # once per process (a C++ build on its first use on a machine): not a suggestion's cost

    rows = []
    for space_name in args.spaces:
        for fidelity in args.fidelities:
            for n in args.observations:
                for cap in args.caps:
                    if cap is not None and cap >= n and None in args.caps:
                        continue  # the cap does not bind: the same as no cap
                    for refit_every in args.refit_every:
                        row = time_suggestions(space_name, fidelity, n, cap, args.asks, refit_every)
                        print(row, file=sys.stderr, flush=True)
                        rows.append(row)
    timings = pd.DataFrame(rows)
    print("\n| space | fidelity | trials told | cap | refit every | s per suggestion (mean) | median | largest |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- |")
    for row in timings.itertuples():
        cap = "none" if pd.isna(row.cap) else int(row.cap)
        print(
            f"| {row.space} | {row.fidelity} | {row.observations} | {cap} | {row.refit_every} | {row.mean_s:.2f} "
            f"| {row.median_s:.2f} | {row.max_s:.2f} |"
        )
    if args.output is not None:
        timings.to_csv(args.output, index=False)

    if args.answer_trials:
        with tempfile.TemporaryDirectory(prefix="botorch_cost_") as scratch:
            answers = pd.DataFrame(
                [
                    answer_with(cap, refit_every, args.answer_trials, seed, Path(scratch))
                    for cap in args.answer_caps
                    for refit_every in args.answer_refit_every
                    for seed in range(args.seeds)
                ]
            )
        print(f"\nanalytic, {args.answer_trials} trials at the full budget, {args.seeds} seeds:")
        print("| cap | refit every | share of the maximum hypervolume | s per suggestion (median) |")
        print("| --- | --- | --- | --- |")
        for (cap, refit_every), group in answers.groupby([answers["cap"].fillna(-1), "refit_every"], sort=False):
            label = "none" if cap == -1 else int(cap)
            share, share_se = mean_se(group["share"])
            print(f"| {label} | {refit_every} | {share:.3f} ± {share_se:.3f} | {group['suggestion_s'].mean():.2f} |")
        if args.output is not None:
            answers.to_csv(args.output.with_suffix(".answer.csv"), index=False)


if __name__ == "__main__":
    main()
