"""Robustness bias and rank disparity with and without the AdvERM regulariser, on the embedded biased faces.

For each seed, two runs that differ only in the regulariser train on ``data=synthetic_biased`` (group g1 is a 25%
minority of the training identities and its identities are harder to tell apart): plain training, and training
with ``regularizer=robustness_bias`` (alpha, tau, temperature). Every run reports on val and test the robustness
bias max_g |sigma(g)| from DeepFool distances (``eval.robustness_bias``, thesis eq. 2.3), the rank disparity and
the error, plus its wall time. Printed per seed and as mean +- standard error over seeds; written as CSV.

    python bench/adverm_effect.py [--seeds 0 1 2] [--epochs 4] [--alpha 1.0] [--tau 0.05] [--out DIR]
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import pandas as pd

from fairnas.config import compose_config
from fairnas.groups import mean_se_by_group
from fairnas.io import write_csv_atomic
from fairnas.training.run import train

METRICS = ("robustness_bias", "rank_disparity", "error")


def run(seed: int, regularised: bool, args: argparse.Namespace, output_dir: Path) -> dict:
    overrides = [
        "data=synthetic_biased",
        f"data.table.n_identities={args.identities}",
        f"data.table.image_size={args.image_size}",
        f"data.transforms.resize={args.image_size + args.image_size // 8}",
        f"optimizer={args.optimizer}",
        f"optimizer.lr={args.lr}",
        f"trainer.max_epochs={args.epochs}",
        "trainer.accelerator=cpu",
        "trainer.enable_progress_bar=false",
        "trainer.enable_model_summary=false",
        "logger=none",
        f"seed={seed}",
        f"paths.cache_dir={args.cache_dir}",
        "eval.robustness_bias=true",
        f"eval.robustness.max_probes={args.max_probes}",
        f"eval.robustness.estimator.steps={args.deepfool_steps}",
    ]
    if regularised:
        overrides += [
            "regularizer=robustness_bias",
            f"regularizer.robustness_bias.weight={args.alpha}",
            f"regularizer.robustness_bias.tau={args.tau}",
            f"regularizer.robustness_bias.temperature={args.temperature}",
        ]
    start = time.perf_counter()
    metrics = train(compose_config("train", overrides, output_dir=output_dir))
    row = {
        "seed": seed,
        "regulariser": f"AdvERM alpha={args.alpha}" if regularised else "none",
        "wall_s": time.perf_counter() - start,
    }
    for stage in ("val", "test"):
        row.update({f"{stage}_{name}": metrics[stage][name] for name in METRICS})
    return row


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--epochs", type=int, default=4)
    parser.add_argument("--identities", type=int, default=160)
    parser.add_argument("--image-size", type=int, default=32)
    parser.add_argument("--optimizer", default="adamw")
    parser.add_argument("--lr", type=float, default=3e-3)
    parser.add_argument("--alpha", type=float, default=1.0)
    parser.add_argument("--tau", type=float, default=0.05)
    parser.add_argument("--temperature", type=float, default=0.05)
    parser.add_argument("--max-probes", type=int, default=128, help="probes attacked per split and run")
    parser.add_argument("--deepfool-steps", type=int, default=20)
    parser.add_argument("--cache-dir", default=None, help="synthetic-face cache (default: the config's)")
    parser.add_argument("--out", type=Path, default=None, help="write runs.csv and summary.csv here")
    args = parser.parse_args()
    args.cache_dir = args.cache_dir or compose_config("train").paths.cache_dir

    rows = []
    with tempfile.TemporaryDirectory() as runs_dir:
        for seed in args.seeds:
            for regularised in (False, True):
                rows.append(run(seed, regularised, args, Path(runs_dir) / f"seed{seed}_{int(regularised)}"))
                print(pd.DataFrame(rows[-1:]).to_string(index=False, float_format="%.4f"), flush=True)
    runs = pd.DataFrame(rows)
    columns = [c for c in runs.columns if c not in ("seed", "regulariser")]
    summary = mean_se_by_group(runs, columns, ["regulariser"]).set_index("regulariser")
    summary = summary[[f"{c}_{s}" for c in columns for s in ("mean", "se")]]
    print(
        f"\n{len(args.seeds)} seeds, {args.epochs} epochs, alpha={args.alpha}, tau={args.tau}, "
        f"temperature={args.temperature}; mean and standard error over seeds:"
    )
    print(summary.T.to_string(float_format="%.4f"))
    if args.out:
        write_csv_atomic(runs, args.out / "runs.csv")
        write_csv_atomic(summary.reset_index(), args.out / "summary.csv")


if __name__ == "__main__":
    main()
