"""Speed and memory of fairnas.metrics.face_identification_metrics against the naive rank computation.

The naive method is what the paper's reference code did: a full N x N distance matrix, then a Python loop that
argsorts each probe's row and counts the distinct identities ranked before the first genuine match.

Each (method, N) runs in a fresh subprocess so that its peak resident memory can be read in isolation; the
"peak RSS" columns are the growth of the process's peak resident set size (getrusage ru_maxrss) during the call,
above what the process held after generating the embeddings.

    python bench/metrics_speed.py [--sizes 2000 10000 50000] [--dim 512] [--naive-max 50000]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time

import numpy as np
import torch

from fairnas.metrics import face_identification_metrics, group_disparities

METHODS = ("naive", "blocked")
NOISE_SCALE = 3.0  # per-image noise around each identity centre: error ~0.4 at N = 2k, ~0.6 at 10k (D = 512)


def synthetic_embeddings(n_images: int, dim: int, seed: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """float32 [N, dim] embeddings of ~N/10 identities (~10 images each), identities split into 2 groups."""
    rng = np.random.default_rng(seed)
    n_identities = max(n_images // 10, 2)
    identities = rng.integers(0, n_identities, size=n_images)
    centres = rng.standard_normal((n_identities, dim), dtype=np.float32)
    embeddings = centres[identities]
    embeddings += NOISE_SCALE * rng.standard_normal((n_images, dim), dtype=np.float32)
    groups = np.where(identities % 2 == 0, "male", "female")
    return embeddings, identities, groups


def naive_identification_metrics(embeddings: np.ndarray, identities: np.ndarray, groups: np.ndarray) -> dict:
    """Full N x N matrix, argsort per probe in a Python loop; same definitions as the library (rank by identity)."""
    embeddings = embeddings / np.linalg.norm(embeddings, axis=1, keepdims=True)
    squared_norms = np.square(embeddings).sum(axis=1)
    # One N x N float32 matrix, built in place. The transpose is copied because numpy's A @ A.T shortcut
    # (OpenBLAS syrk) segfaults at N = 50k (numpy/numpy#19685).
    distances = embeddings @ embeddings.T.copy()
    distances *= -2.0
    distances += squared_norms[:, None]
    distances += squared_norms[None, :]
    identity_codes = np.unique(identities, return_inverse=True)[1]
    probes = np.flatnonzero(np.bincount(identity_codes)[identity_codes] >= 2)
    ranks = np.empty(len(probes), dtype=np.int64)
    for position, probe in enumerate(probes):
        row = distances[probe]
        row[probe] = np.inf
        ranked_identities = identities[np.argsort(row)]
        first_genuine = int(np.argmax(ranked_identities == identities[probe]))
        ranks[position] = len(np.unique(ranked_identities[:first_genuine]))
    per_group = {}
    for group in sorted(set(groups[probes])):
        group_ranks = ranks[groups[probes] == group]
        error = float(np.mean(group_ranks > 0))
        per_group[group] = {"rank": float(group_ranks.mean()), "error": error, "accuracy": 1.0 - error}
    error = float(np.mean(ranks > 0))
    metrics = {"rank": float(ranks.mean()), "error": error, "accuracy": 1.0 - error}
    metrics.update(group_disparities(per_group, sorted(per_group)))
    return metrics


def run_one(method: str, n_images: int, dim: int, seed: int, block_size: int) -> dict:
    """Time one method on one size in this process; returns seconds, peak RSS growth (MiB) and the metrics."""
    embeddings, identities, groups = synthetic_embeddings(n_images, dim, seed)
    if method == "blocked":  # warm up torch kernels outside the timed call
        face_identification_metrics(embeddings[:64], identities[:64] % 4, groups[:64])
    rss_before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    start = time.perf_counter()
    if method == "naive":
        metrics = naive_identification_metrics(embeddings, identities, groups)
    else:
        metrics = face_identification_metrics(embeddings, identities, groups, block_size=block_size)
    seconds = time.perf_counter() - start
    rss_growth_mib = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - rss_before) / 1024
    return {"seconds": seconds, "peak_rss_mib": rss_growth_mib, "metrics": metrics}


def run_in_subprocess(method: str, n_images: int, args: argparse.Namespace) -> dict:
    command = [
        sys.executable, __file__, "--worker", method, "--sizes", str(n_images),
        "--dim", str(args.dim), "--seed", str(args.seed), "--block-size", str(args.block_size),
    ]
    completed = subprocess.run(command, check=True, capture_output=True, text=True)
    return json.loads(completed.stdout.strip().splitlines()[-1])


def format_table(rows: list[dict]) -> str:
    header = (
        f"{'N':>7} | {'naive s':>9} | {'blocked s':>9} | {'speed-up':>8} | "
        f"{'naive peak RSS MiB':>18} | {'blocked peak RSS MiB':>20} | {'rank naive/blocked':>20}"
    )
    lines = [header, "-" * len(header)]
    for row in rows:
        naive, blocked = row["naive"], row["blocked"]
        if naive is None:
            naive_s = speedup = naive_mem = "skipped"
            agreement = f"-/{blocked['metrics']['rank']:.4f}"
        else:
            naive_s = f"{naive['seconds']:.2f}"
            speedup = f"{naive['seconds'] / blocked['seconds']:.1f}x"
            naive_mem = f"{naive['peak_rss_mib']:.0f}"
            agreement = f"{naive['metrics']['rank']:.4f}/{blocked['metrics']['rank']:.4f}"
        lines.append(
            f"{row['n']:>7} | {naive_s:>9} | {blocked['seconds']:>9.2f} | {speedup:>8} | "
            f"{naive_mem:>18} | {blocked['peak_rss_mib']:>20.0f} | {agreement:>20}"
        )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", type=int, nargs="+", default=[2000, 10000, 50000])
    parser.add_argument("--dim", type=int, default=512)
    parser.add_argument("--naive-max", type=int, default=None, help="skip the naive method above this N")
    parser.add_argument("--block-size", type=int, default=1024)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--worker", choices=METHODS, help=argparse.SUPPRESS)
    args = parser.parse_args()

    if args.worker is not None:
        print(json.dumps(run_one(args.worker, args.sizes[0], args.dim, args.seed, args.block_size)))
        return

    print(f"D = {args.dim}, block size = {args.block_size}, torch threads = {torch.get_num_threads()}")
    rows = []
    for n_images in args.sizes:
        skip_naive = args.naive_max is not None and n_images > args.naive_max
        rows.append({
            "n": n_images,
            "naive": None if skip_naive else run_in_subprocess("naive", n_images, args),
            "blocked": run_in_subprocess("blocked", n_images, args),
        })
        print(f"done N = {n_images}", file=sys.stderr, flush=True)
    print(format_table(rows))
    print("peak RSS = growth of the worker's peak resident set size during the call (getrusage ru_maxrss)")
    print(f"load average at the end (1/5/15 min): {' '.join(f'{load:.1f}' for load in os.getloadavg())}")


if __name__ == "__main__":
    main()
