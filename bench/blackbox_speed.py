"""What the fairness blackbox (``fairnas.benchmarks.blackbox``) costs its user: the fit at load, a query of a new and
of a seen configuration, the mean of one new configuration, of many at once and of a cached one, and a query of the
real table (``mode="table"``). Wall and CPU seconds of this process (CPU time is what a busy machine does not inflate).

    OMP_NUM_THREADS=1 python bench/blackbox_speed.py [--name dpn_paper_sampled] [--configs 100]

The configurations are drawn from the blackbox's space (ConfigSpace, seed 0), none of them the table's.
"""

from __future__ import annotations

import argparse
import copy
import time
from collections.abc import Callable, Sequence

import pandas as pd

from fairnas.benchmarks.blackbox import load_blackbox


def timed(work: Callable[[], object], calls: int = 1) -> dict[str, float]:
    """Wall and CPU milliseconds per call of ``work`` run once (it does ``calls`` calls)."""
    wall, cpu = time.perf_counter(), time.process_time()
    work()
    return {
        "wall_ms": (time.perf_counter() - wall) * 1e3 / calls,
        "cpu_ms": (time.process_time() - cpu) * 1e3 / calls,
    }


def measure(name: str = "dpn_paper_sampled", configs: int = 100, refit: bool = True) -> pd.DataFrame:
    """One row per operation (the module docstring), its cost per call; ``refit=False`` times the load of a blackbox
    this process may have fitted already (a test's)."""
    if refit:
        load_blackbox.cache_clear()
    rows = {"load and fit": timed(lambda: load_blackbox(name))}
    blackbox = load_blackbox(name)
    space = copy.deepcopy(blackbox.configspace)
    space.seed(0)
    drawn = [blackbox.checked(config) for config in space.sample_configuration(3 * configs)]
    first, second, third = drawn[:configs], drawn[configs : 2 * configs], drawn[2 * configs :]
    rows["query, new configuration"] = timed(lambda: [blackbox.query(config, 4, 0) for config in first], configs)
    rows["query, seen configuration"] = timed(lambda: [blackbox.query(config, 4, 1) for config in first], configs)
    rows["mean, new configuration"] = timed(lambda: [blackbox.mean(config, 4) for config in second], configs)
    rows["mean, cached configuration"] = timed(lambda: [blackbox.mean(config, 4) for config in second], configs)
    rows[f"mean of {configs} new configurations at once, per configuration"] = timed(
        lambda: blackbox.mean(third, 4), configs
    )
    rows["load the table (mode='table')"] = timed(lambda: load_blackbox(name, mode="table"))
    table = load_blackbox(name, mode="table")
    known = table.configs()[:configs]
    rows["query of the table"] = timed(lambda: [table.query(config, 4, 0) for config in known], len(known))
    return pd.DataFrame(rows).T.round(3)


def main(argv: Sequence[str] | None = None) -> pd.DataFrame:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--name", default="dpn_paper_sampled", help="the table whose blackbox is timed")
    parser.add_argument("--configs", type=int, default=100, help="configurations per timed operation")
    args = parser.parse_args(argv)
    result = measure(args.name, args.configs)
    print(result.to_markdown())
    return result


if __name__ == "__main__":
    main()
