"""Power study of the embedded problem: does a setting separate configurations by more than their seed noise?

For each setting (overrides on top of ``experiment=showcase``, whose values this study chose: data size, image
size, epochs, batch size, ...) and
the same configurations in every setting, one ``train`` run per (configuration, seed), run as a search trial runs
(validated after its last epoch only, no test split), measuring:

- the seed noise: the default DPN (the preset's searchable DPN, ops 3-0-1) with ``--seeds`` seeds: mean validation
  error and the standard deviation (ddof 1) over seeds of error and rank disparity;
- the spread across configurations, one seed each: the default DPN (seed 0), ``--dpn-configs`` configurations of
  the paper's DPN space (``searchspaces/dpn_paper.yaml``) sampled with a fixed seed and the hand-designed sweep
  (``searchspaces/timm_zoo_small.yaml``'s architectures with the preset's head; ``--no-sweep`` screens a setting
  without it, the sweep being the costliest part). Only configurations that learn (validation error below
  ``LEARNS``) count: a model at chance is trivially 'fair';
- the cost: seconds per run (``train`` alone, data cached), median over the default DPN and the DPN sample (what a
  search trial at the full budget costs), and the sweep's total.

Targets (issue "Fast data path, then a powered embedded problem"): default DPN error <= 0.6; configuration s.d. >=
2x (goal 3x) seed s.d. for both error and rank disparity; median full-budget trial <= 45 s on 2 cores. Finished runs
are read back, so an interrupted study resumes; run it alone on the machine (the seconds are part of the result).

    python bench/power_study.py --out outputs/power                       # every setting of SETTINGS
    python bench/power_study.py --out outputs/power --no-sweep --settings s20k_e4 s10k_e8
"""

from __future__ import annotations

import argparse
import json
import logging
import time
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pandas as pd

from fairnas.config import compose_config
from fairnas.io import write_csv_atomic, write_json_atomic
from fairnas.search import load_space
from fairnas.training.run import train

REPOSITORY = Path(__file__).resolve().parents[1]
LEARNS = 0.9  # validation error below which a configuration counts as learning (chance is ~0.997)
SPACE_SEED = 0
TIMING_FILE = "timing.json"

_24PX = ("data.table.image_size=24", "data.transforms.resize=27")
SETTINGS: dict[str, tuple[str, ...]] = {
    # the preset before this study: 200 training identities x 5 images (800 in all), 32 px, 4 epochs, batch 32
    "s1k_e4": (
        "data.table.n_identities=800",
        "data.table.images_per_identity=5",
        "data.table.split_fractions=[0.25,0.375,0.375]",
        "data.batch_size=32",
    ),
    # the preset chosen by this study: 2,000 training identities x 10 images, 150 validation and 150 test
    # identities per group, 32 px, 4 epochs, batch 128
    "s20k_e4": (),
    "s20k_e4_24px": _24PX,
    "s20k_e6_24px": (*_24PX, "trainer.max_epochs=6"),
    # 1,000 training identities x 10 images, the same validation and test identities, 8 epochs
    "s10k_e8": (
        "data.table.n_identities=1600",
        "data.table.split_fractions=[0.625,0.1875,0.1875]",
        "trainer.max_epochs=8",
    ),
}


def configurations(dpn_configs: int, head: str, sweep: bool) -> list[tuple[str, str, tuple[str, ...]]]:
    """(name, kind, overrides) of the configurations: the default DPN, a DPN sample and (``sweep``) the
    hand-designed sweep; each keeps its place (and run folder) whether or not the sweep is included."""
    rows = [("default DPN", "default", ())]
    space = load_space(REPOSITORY / "searchspaces" / "dpn_paper.yaml", seed=SPACE_SEED)
    for config in space.configspace.sample_configuration(dpn_configs):
        config = dict(config)
        lr = config.get("lr_adam", config.get("lr_sgd"))
        name = f"DPN {config['op0']}{config['op1']}{config['op2']} {config['head']} {config['optimizer']} {lr:.2g}"
        rows.append((name, "DPN sample", tuple(space.overrides(config))))
    if sweep:
        zoo = load_space(REPOSITORY / "searchspaces" / "timm_zoo_small.yaml")
        rows += [
            (f"{arch} {head}", "hand-designed", ("backbone=timm", f"backbone.name={arch}", f"head={head}"))
            for arch in zoo.configspace["architecture"].choices
        ]
    return rows


def run(run_dir: Path, overrides: Sequence[str]) -> dict:
    """Validation metrics and wall seconds of one trial-like run (read back when finished before)."""
    timing = run_dir / TIMING_FILE
    if not timing.is_file():
        cfg = compose_config("train", list(overrides), output_dir=run_dir)
        start = time.perf_counter()
        try:
            metrics = train(cfg)["val"]
        except FloatingPointError as error:  # a diverging configuration (e.g. SGD at a high rate) learns nothing
            metrics = {"error": 1.0, "rank_disparity": float("nan"), "crashed": str(error)}
        write_json_atomic(
            timing, {"seconds": time.perf_counter() - start, "overrides": list(overrides), "val": metrics}
        )
    record = json.loads(timing.read_text())
    return {
        "seconds": record["seconds"],
        "error": float(record["val"]["error"]),
        "rank_disparity": float(record["val"]["rank_disparity"]),
    }


def study(setting: str, overrides: Sequence[str], seeds: int, dpn_configs: int, sweep: bool, out: Path) -> pd.DataFrame:
    """One row per run of ``setting``."""
    base = ["experiment=showcase", "logger=none", "trainer.enable_progress_bar=false", *overrides]
    epochs = compose_config("train", base, output_dir=".").trainer.max_epochs
    trial = [f"trainer.check_val_every_n_epoch={epochs}", "eval.test=false"]
    head = compose_config("train", base, output_dir=".").head._target_.rsplit(".", 1)[-1].removesuffix("Head")
    rows = []
    for index, (name, kind, config) in enumerate(configurations(dpn_configs, head.lower(), sweep)):
        for seed in range(seeds if kind == "default" else 1):
            folder = out / setting / f"{index:02d}" / f"seed{seed}"
            rows.append(
                {
                    "setting": setting,
                    "config": name,
                    "kind": kind,
                    "seed": seed,
                    **run(folder, [*trial, *base, *config, f"seed={seed}"]),
                }
            )
            print(
                f"[power] {setting} {name} seed {seed}: error {rows[-1]['error']:.3f} rank disparity "
                f"{rows[-1]['rank_disparity']:.2f} ({rows[-1]['seconds']:.0f} s)",
                flush=True,
            )
    return pd.DataFrame(rows)


def summarize(runs: pd.DataFrame) -> pd.DataFrame:
    """One row per setting: seed noise, configuration spread, their ratios, and seconds per run."""
    rows = []
    for setting, frame in runs.groupby("setting", sort=False):
        noise = frame[frame["kind"] == "default"]
        configs = frame[frame["seed"] == 0]
        learning = configs[configs["error"] < LEARNS]
        dpn = configs[configs["kind"].isin(["default", "DPN sample"])]
        row = {
            "setting": setting,
            "default error": noise["error"].mean(),
            "n seeds": len(noise),
            "configs learning": f"{len(learning)}/{len(configs)}",
        }
        for metric in ("error", "rank_disparity"):
            seed_sd, config_sd = noise[metric].std(), learning[metric].std()
            row |= {
                f"{metric} seed s.d.": seed_sd,
                f"{metric} config s.d.": config_sd,
                f"{metric} ratio": config_sd / seed_sd if seed_sd > 0 else np.inf,
            }
        row |= {
            "median DPN trial s": dpn["seconds"].median(),
            "max DPN trial s": dpn["seconds"].max(),
            "sweep s": configs.loc[configs["kind"] == "hand-designed", "seconds"].sum(),
        }
        rows.append(row)
    return pd.DataFrame(rows)


def main(argv: Sequence[str] | None = None) -> pd.DataFrame:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, default=REPOSITORY / "outputs" / "power")
    parser.add_argument("--settings", nargs="+", choices=sorted(SETTINGS), default=list(SETTINGS))
    parser.add_argument("--seeds", type=int, default=5, help="seeds of the default DPN (the seed noise)")
    parser.add_argument("--dpn-configs", type=int, default=8, help="configurations sampled from the DPN space")
    parser.add_argument("--overrides", nargs="*", default=[], help="added to every setting (e.g. for a smoke test)")
    parser.add_argument(
        "--no-sweep",
        dest="sweep",
        action="store_false",
        help="screen a setting on DPN configurations only (the sweep costs the most)",
    )
    args = parser.parse_args(argv)
    for name in ("pytorch_lightning", "lightning.pytorch", "lightning.fabric"):
        logging.getLogger(name).setLevel(logging.WARNING)
    runs = pd.concat(
        [
            study(setting, [*SETTINGS[setting], *args.overrides], args.seeds, args.dpn_configs, args.sweep, args.out)
            for setting in args.settings
        ]
    )
    summary = summarize(runs)
    write_csv_atomic(runs, args.out / "runs.csv")
    write_csv_atomic(summary, args.out / "summary.csv")
    print(summary.to_markdown(index=False, floatfmt=".3g"))
    return summary


if __name__ == "__main__":
    main()
