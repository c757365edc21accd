"""The plain BoTorch loop outside fairnas (``bench.comparison.reference_loop``) on BoTorch's test problems:
the share of ``max_hv`` each run reaches and its time per suggestion, the reference ``search.strategy=botorch`` is
measured against.

    PYTHONHASHSEED=0 python bench/botorch_reference.py --problem momf_branin_currin --variant full --seeds 3 \\
        --total-budget 800 --fidelity-mapping share_of_max --output reference.csv
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Sequence
from pathlib import Path

import pandas as pd

from bench.comparison.reference_loop import VARIANTS, run_reference, rungs_of
from fairnas.benchmarks.botorch_problems import FIDELITY_MAPPINGS, PROBLEMS, MomfTarget
from fairnas.search.hypervolume import hypervolume_curve


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--problem", nargs="+", choices=list(PROBLEMS), default=list(PROBLEMS))
    parser.add_argument("--variant", nargs="+", choices=VARIANTS, default=["full"])
    parser.add_argument("--seeds", type=int, default=3, help="seeds 0 .. N-1")
    parser.add_argument("--total-budget", type=float, default=800, help="epochs per run")
    parser.add_argument("--min-budget", type=float, default=1)
    parser.add_argument("--max-budget", type=float, default=8)
    parser.add_argument("--eta", type=int, default=2)
    parser.add_argument("--fidelity-mapping", choices=FIDELITY_MAPPINGS, default="share_of_max")
    parser.add_argument("--raw-samples", type=int, default=512)
    parser.add_argument("--num-restarts", type=int, default=10)
    parser.add_argument("--output", type=Path, help="CSV of every trial of every run")
    args = parser.parse_args(argv)
    rungs = rungs_of(args.min_budget, args.max_budget, args.eta)
    runs = []
    for name in args.problem:
        target = MomfTarget(
            name, min_budget=args.min_budget, max_budget=args.max_budget, fidelity_mapping=args.fidelity_mapping
        )
        for variant in args.variant:
            for seed in range(args.seeds):
                start = time.perf_counter()
                trials = run_reference(
                    target,
                    variant,
                    seed=seed,
                    total_budget=args.total_budget,
                    rungs=rungs,
                    raw_samples=args.raw_samples,
                    num_restarts=args.num_restarts,
                )
                curve = hypervolume_curve(trials, target.objectives, target.max_budget, target.reference_point)
                share = curve["hypervolume"].iloc[-1] / target.max_hypervolume
                print(
                    f"{name} {variant} seed {seed}: {len(trials)} trials, share of max_hv {share:.3f}, "
                    f"{trials['wall_time_s'].mean():.2f} s a suggestion, {time.perf_counter() - start:.0f} s",
                    file=sys.stderr,
                    flush=True,
                )
                runs.append(trials.assign(problem=name, variant=variant, share_of_max=share))
    if args.output is not None:
        pd.concat(runs, ignore_index=True).to_csv(args.output, index=False)


if __name__ == "__main__":
    main()
