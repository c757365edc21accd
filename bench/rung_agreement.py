"""Can a search tell from its own trials whether Hyperband's low rungs predict the answer?

Hyperband promotes the configurations that rank best at a low budget (a rung). A search that kept its low rungs only
where they predict would need a statistic it can compute from its own trials. This script sets the statistic a
search can see beside the agreement that matters, per landscape:

- **tables** (``--tables``: real training runs, seeds x epochs, ``fairnas/benchmarks/tables/``): per objective and
  epoch, Kendall's tau of one seed's values over the table's configurations with (``same_seed``) the same seed's
  last epoch, which is what a search sees when a promoted configuration continues its run; (``truth``) the mean of
  the other seeds at the last epoch, what the answer is judged by, without the seed itself; (``other_seed``) another
  seed at the same epoch: the seed noise. Each is averaged over the seeds (or pairs of seeds).
- **searches** (``--runs LABEL=FOLDER``: finished ``bench/search_efficiency.py`` runs of a multi-fidelity
  strategy): per run, Kendall's tau between the lowest rung's and the next rung's values of the first ``--pairs``
  configurations promoted from one to the other, in the order they reached the higher rung, per objective; the
  statistic a search could act on once it has made that many promotions. Mean ± s.e. over the runs.

    PYTHONHASHSEED=0 python bench/rung_agreement.py --tables dpn_showcase_noisy dpn_paper_sampled \\
        --runs table=outputs/search_fidelity_check/table/smac_96 surrogate_60=outputs/rungs/surrogate \\
        --output results/search_rung_pilot/rung_agreement.csv
"""

from __future__ import annotations

import argparse
import itertools
import json
from collections.abc import Sequence
from pathlib import Path

import pandas as pd
from scipy import stats

from fairnas.benchmarks.tables import load_table, names
from fairnas.groups import mean_se
from fairnas.io import write_csv_atomic


def tau(x: Sequence[float], y: Sequence[float]) -> float:
    """Kendall's tau-b of two equally long sequences (NaN where either is constant)."""
    return float(stats.kendalltau(x, y).statistic)


def table_agreement(table: pd.DataFrame, objectives: Sequence[str]) -> pd.DataFrame:
    """Rows (objective, epoch, quantity, mean, se, n) of a table's ``same_seed``, ``truth`` and ``other_seed`` taus
    (module docstring); ``table`` has one row per configuration, seed and epoch, objectives as ``val/<name>``."""
    last, seeds = int(table["epoch"].max()), sorted(table["seed"].unique())
    rows = []
    for objective in objectives:
        wide = table.pivot_table(index="config_id", columns=["seed", "epoch"], values=f"val/{objective}").dropna()
        at_last = wide.xs(last, level="epoch", axis=1)
        truth_without = {s: at_last.drop(columns=s).mean(axis=1) for s in seeds}  # the other seeds' last-epoch mean
        for epoch in range(1, last + 1):
            values = {
                "same_seed": [tau(wide[(s, epoch)], at_last[s]) for s in seeds],
                "truth": [tau(wide[(s, epoch)], truth_without[s]) for s in seeds],
                "other_seed": [tau(wide[(a, epoch)], wide[(b, epoch)]) for a, b in itertools.combinations(seeds, 2)],
            }
            for quantity, taus in values.items():
                mean, se = mean_se(taus)
                rows.append(
                    {
                        "objective": objective,
                        "epoch": epoch,
                        "quantity": quantity,
                        "mean": mean,
                        "se": se,
                        "n": len(taus),
                    }
                )
    return pd.DataFrame(rows)


def first_promotions(trials: pd.DataFrame, objectives: Sequence[str], pairs: int) -> dict[str, float] | None:
    """Per objective, Kendall's tau between the lowest rung's and the next rung's values of the first ``pairs``
    configurations that reached both (successful trials of one search's ``trials.csv``, in the order they reached
    the higher rung); None when fewer reached both."""
    trials = trials[trials["status"] == "success"]
    rungs = sorted(trials["budget"].unique())
    if len(rungs) < 2:
        return None
    low = trials[trials["budget"] == rungs[0]].drop_duplicates("config_id").set_index("config_id")
    high = trials[trials["budget"] == rungs[1]].sort_values("trial_id").drop_duplicates("config_id")
    high = high[high["config_id"].isin(low.index)].head(pairs)
    if len(high) < pairs:
        return None
    return {objective: tau(low.loc[high["config_id"], objective], high[objective]) for objective in objectives}


def search_agreement(folder: Path, pairs: int) -> pd.DataFrame:
    """Rows (objective, quantity ``first_promotions``, mean, se, n) over every finished search under ``folder``
    (``**/seed*/search/trials.csv`` with its ``search.json``) that promoted at least ``pairs`` configurations."""
    taus: dict[str, list[float]] = {}
    for trials_file in sorted(folder.glob("**/seed*/search/trials.csv")):
        objectives = json.loads((trials_file.parent / "search.json").read_text())["objectives"]
        run = first_promotions(pd.read_csv(trials_file), objectives, pairs)
        for objective, value in (run or {}).items():
            taus.setdefault(objective, []).append(value)
    rows = []
    for objective, values in taus.items():
        mean, se = mean_se(values)
        rows.append({"objective": objective, "quantity": "first_promotions", "mean": mean, "se": se, "n": len(values)})
    return pd.DataFrame(rows)


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tables", nargs="*", default=[], help="names of fairnas/benchmarks/tables/ (seeds x epochs)")
    parser.add_argument("--runs", nargs="*", default=[], help="LABEL=FOLDER of finished bench/search_efficiency runs")
    parser.add_argument("--pairs", type=int, default=8, help="promotions a search has seen when it would decide")
    parser.add_argument("--output", type=Path, help="CSV: landscape, view, objective, epoch, quantity, mean, se, n")
    args = parser.parse_args(argv)
    frames = []
    for name in args.tables:
        if name not in names():
            parser.error(f"--tables {name}: not a table of fairnas/benchmarks/tables/ ({', '.join(names())})")
        table, spec = load_table(name)
        agreement = table_agreement(table, spec["objectives"])
        frames.append(agreement.assign(landscape=name, view="table"))
    for item in args.runs:
        label, _, folder = item.partition("=")
        if not folder or not Path(folder).is_dir():
            parser.error(f"--runs {item}: expected LABEL=FOLDER with an existing folder")
        agreement = search_agreement(Path(folder), args.pairs)
        if agreement.empty:
            parser.error(f"--runs {item}: no finished search under it promoted {args.pairs} configurations")
        frames.append(agreement.assign(landscape=label, view=f"search, first {args.pairs} promotions"))
    if not frames:
        parser.error("nothing to do: give --tables or --runs")
    result = pd.concat(frames, ignore_index=True)
    result = result[["landscape", "view", "objective", "epoch", "quantity", "mean", "se", "n"]]
    print(result.round(3).to_string(index=False))
    if args.output is not None:
        write_csv_atomic(result, args.output)


if __name__ == "__main__":
    main()
