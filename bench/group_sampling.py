"""Group-weighted training on the embedded faces (``experiment=showcase``): which variant, and which strengths.

Two parts, each a grid of cells (operation triple x ``data.group_sampling`` setting) trained with the same seeds,
so that cells are compared paired by seed (a training seed's effect is largely shared by all configurations):

- ``variants``: at alpha 1 (balanced groups), the weights in the sampler with replacement, in the sampler without
  replacement (fixed draws per group, each group's images cycled), and in the loss; beside them today's training
  (no weights: every image once per epoch) and the sampler at alpha 0 (natural shares, drawn with replacement).
- ``alphas``: the strength alpha of the chosen variant over a grid: where error and rank disparity trade off,
  which picks the values of ``searchspaces/dpn_table.yaml``.

Every run is validated and tested after its last epoch (``<out>/<part>/<cell>/seed<k>``, checkpoints kept for
``bench/evaluation_noise.py``); a finished run is read back, so the study resumes. Prints per cell the mean and
standard error over seeds of validation error, rank disparity and the per-group errors, and per cell the
difference from the part's reference cell, paired by seed, in standard errors.

    OMP_NUM_THREADS=1 python bench/group_sampling.py --part variants --shard 0/2 &
    OMP_NUM_THREADS=1 python bench/group_sampling.py --part variants --shard 1/2; wait
    python bench/group_sampling.py --part variants                  # the table (every run read back)
"""

from __future__ import annotations

import argparse
import itertools
import json
import time
from collections.abc import Sequence
from pathlib import Path

import pandas as pd

from bench.comparison.command_line import parse_shard
from fairnas.config import compose_config
from fairnas.io import write_csv_atomic, write_json_atomic
from fairnas.training.run import train

REPOSITORY = Path(__file__).resolve().parents[1]
TRIPLES = ("363", "301")  # the best configuration of the single-seed table, and the default DPN
OFF = ()
PARTS: dict[str, dict[str, tuple[str, ...]]] = {
    "variants": {
        "off": OFF,
        "alpha 0, replacement": ("data.group_sampling.alpha=0", "data.group_sampling.replacement=true"),
        "alpha 1, replacement": ("data.group_sampling.alpha=1", "data.group_sampling.replacement=true"),
        "alpha 1, no replacement": ("data.group_sampling.alpha=1", "data.group_sampling.replacement=false"),
        "alpha 1, loss": ("data.group_sampling.alpha=1", "data.group_sampling.via=loss"),
    },
    "alphas": {f"alpha {alpha:g}": (f"data.group_sampling.alpha={alpha}",) for alpha in (0, 0.5, 1, 1.5, 2, 3)},
}
REFERENCE = {"variants": "off", "alphas": "alpha 0"}
SEEDS = {"variants": 4, "alphas": 3}
METRICS = ("error", "rank_disparity", "error/g0", "error/g1", "rank/g0", "rank/g1")
RUN_SETTINGS = (
    "experiment=showcase",
    "logger=none",
    "trainer.check_val_every_n_epoch=4",
    "callbacks.model_checkpoint.save_top_k=0",
)


def cells(part: str) -> list[tuple[str, str, tuple[str, ...]]]:
    """(triple, setting name, overrides) of every cell of ``part``."""
    return [
        (triple, name, (f"backbone.ops=[{','.join(triple)}]", *overrides))
        for triple, (name, overrides) in itertools.product(TRIPLES, PARTS[part].items())
    ]


def run_dir(out: Path, part: str, triple: str, setting: str, seed: int) -> Path:
    return out / part / f"{triple}_{setting.replace(' ', '').replace(',', '_')}" / f"seed{seed}"


def train_cell(folder: Path, overrides: Sequence[str], seed: int) -> dict:
    """The run's metrics, trained now unless ``metrics.json`` is there; its seconds in ``seconds.json``."""
    if not (folder / "metrics.json").is_file():
        started = time.perf_counter()
        train(compose_config("train", [*RUN_SETTINGS, *overrides, f"seed={seed}"], output_dir=folder))
        write_json_atomic(folder / "seconds.json", time.perf_counter() - started)
    return json.loads((folder / "metrics.json").read_text())


def study(part: str, out: Path, seeds: int, shard: tuple[int, int] = (0, 1)) -> pd.DataFrame | None:
    """Train the part's runs of this shard; the table of every run once all are finished (else None)."""
    plan = [(cell, seed) for cell in cells(part) for seed in range(seeds)]
    for (triple, setting, overrides), seed in plan[shard[0] :: shard[1]]:
        metrics = train_cell(run_dir(out, part, triple, setting, seed), overrides, seed)
        print(
            f"[{part}] {triple} {setting} seed {seed}: val error {metrics['val']['error']:.3f} "
            f"rank disparity {metrics['val']['rank_disparity']:.2f}",
            flush=True,
        )
    folders = [run_dir(out, part, triple, setting, seed) for (triple, setting, _), seed in plan]
    if not all((folder / "metrics.json").is_file() for folder in folders):
        return None
    rows = []
    for ((triple, setting, _), seed), folder in zip(plan, folders, strict=True):
        metrics = json.loads((folder / "metrics.json").read_text())
        rows.append(
            {
                "triple": triple,
                "setting": setting,
                "seed": seed,
                **{f"{split}/{name}": float(metrics[split][name]) for split in ("val", "test") for name in METRICS},
            }
        )
    return pd.DataFrame(rows)


def summary(runs: pd.DataFrame, reference: str) -> pd.DataFrame:
    """Per triple and setting: mean ± s.e. over seeds, and the paired difference from ``reference`` in s.e."""
    rows = []
    for (triple, setting), cell in runs.groupby(["triple", "setting"], sort=False):
        base = runs[(runs["triple"] == triple) & (runs["setting"] == reference)].set_index("seed")
        row = {"triple": triple, "setting": setting, "seeds": len(cell)}
        for column in (
            "val/error",
            "val/rank_disparity",
            "val/error/g0",
            "val/error/g1",
            "test/error",
            "test/rank_disparity",
        ):
            values = cell.set_index("seed")[column]
            row[column] = f"{values.mean():.3f} ± {values.sem():.3f}"
            if setting != reference and column in (
                "val/error",
                "val/rank_disparity",
                "test/error",
                "test/rank_disparity",
            ):
                difference = values - base[column].reindex(values.index)
                margin = difference.mean() / difference.sem() if difference.sem() > 0 else float("nan")
                row[f"{column} paired"] = f"{difference.mean():+.3f} ({margin:+.1f} s.e.)"
        rows.append(row)
    return pd.DataFrame(rows)


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--part", choices=list(PARTS), required=True)
    parser.add_argument("--out", type=Path, default=REPOSITORY / "outputs" / "group_sampling")
    parser.add_argument("--seeds", type=int, help="seeds 0 .. N-1 per cell (default: variants 4, alphas 3)")
    parser.add_argument("--shard", type=parse_shard, default=(0, 1), metavar="K/N", help="every N-th run from the K-th")
    args = parser.parse_args(argv)
    runs = study(args.part, args.out, args.seeds or SEEDS[args.part], args.shard)
    if runs is None:
        print(f"[{args.part}] shard {args.shard[0]}/{args.shard[1]} done; other shards still running")
        return
    write_csv_atomic(runs, args.out / f"{args.part}.csv")
    print(summary(runs, REFERENCE[args.part]).to_markdown(index=False))


if __name__ == "__main__":
    main()
