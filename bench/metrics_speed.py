"""Speed and memory of fairnas.metrics.face_identification_metrics against the naive rank computation.

The naive method is what the paper's reference code did: a full N x N distance matrix, then a Python loop that
argsorts each probe's row and counts the distinct identities ranked before the first genuine match. The engine runs
twice, with its fast product in float32 and in bfloat16 (``score_precision``; both decide the comparisons within
the product's rounding bound in float64, so their metrics must be identical, which the table checks). The bound of
each is the one N x N x D matrix product in that dtype, done in the engine's block sizes on the same device.

Each (method, N) runs in a fresh subprocess so that its peak resident memory can be read in isolation; the
"peak RSS" columns are the growth of the process's peak resident set size (getrusage ru_maxrss) during the call,
above what the process held after generating the embeddings.

    python bench/metrics_speed.py [--sizes 2000 10000 50000] [--dim 512] [--naive-max 50000]
    python bench/metrics_speed.py --device cuda --sizes 10000 100000 1000000 --naive-max 0   # on a GPU
    python bench/metrics_speed.py --noise-scale 2.0 --methods float32 bfloat16    # a separable set

On a GPU the naive method (numpy) is skipped and peak memory is torch.cuda.max_memory_allocated.

The embeddings are identity centres plus per-image noise of s.d. ``--noise-scale`` times a centre's. The default,
3.0, is a hard set (identification error 0.68 at N = 20k, 0.9 at 1M): many impostors score near a probe's genuine
score, so the bfloat16 product's band is wide and the engine falls back to float32. 2.0 is a separable set like
a trained model's (error 0.007 at 20k, 0.02 at 100k), where the band is narrow and bfloat16 pays. ``--profile``
also runs each engine once more on the first 100,000 images under ``torch.profiler`` and keeps the operations
that take the most time (device time on a GPU) in the JSON, so a GPU run says where the time beyond the product
goes.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import torch

from fairnas.metrics import face_identification_metrics, group_disparities

PRECISIONS = ("float32", "bfloat16")
METHODS = ("naive", *PRECISIONS, *(f"bound_{precision}" for precision in PRECISIONS))
NOISE_SCALE = 3.0  # per-image noise around each identity centre: error ~0.4 at N = 2k, ~0.6 at 10k (D = 512)
PROFILE_IMAGES = 100_000
PROFILE_ROWS = 12


def synthetic_embeddings(
    n_images: int, dim: int, seed: int, noise_scale: float = NOISE_SCALE
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """float32 [N, dim] embeddings of ~N/10 identities (~10 images each), identities split into 2 groups."""
    rng = np.random.default_rng(seed)
    n_identities = max(n_images // 10, 2)
    identities = rng.integers(0, n_identities, size=n_images)
    centres = rng.standard_normal((n_identities, dim), dtype=np.float32)
    embeddings = centres[identities]
    embeddings += noise_scale * rng.standard_normal((n_images, dim), dtype=np.float32)
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


@torch.no_grad()
def blocked_product(embeddings: torch.Tensor, block_size: int) -> dict:
    """The N x N x D similarity product in the engine's blocks of probes, nothing else (the bound)."""
    checksum = 0.0
    for block in torch.split(embeddings, block_size):
        checksum += float(torch.mm(embeddings, block.T).amax())
    return {"max_similarity": checksum}


def run_one(method: str, n_images: int, args: argparse.Namespace) -> dict:
    """Time one method on one size in this process; returns seconds, peak memory growth (MiB) and the metrics, and
    with ``args.profile`` the engine's top operations."""
    dim, seed, block_size, device = args.dim, args.seed, args.block_size, args.device
    embeddings, identities, groups = synthetic_embeddings(n_images, dim, seed, args.noise_scale)
    if method != "naive":
        embeddings = torch.as_tensor(embeddings, device=device)
        face_identification_metrics(embeddings[:64], identities[:64] % 4, groups[:64])  # warm up the kernels
        blocked_product(embeddings[:64], 32)
        if method.startswith("bound_"):
            dtype = getattr(torch, method.removeprefix("bound_"))
            embeddings = torch.nn.functional.normalize(embeddings, dim=1).to(dtype)
    cuda = device.startswith("cuda")
    if cuda:
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
        memory_before = torch.cuda.memory_allocated()
    rss_before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    start = time.perf_counter()
    if method == "naive":
        metrics = naive_identification_metrics(embeddings, identities, groups)
    elif method.startswith("bound_"):
        metrics = blocked_product(embeddings, block_size)
    else:
        metrics = face_identification_metrics(
            embeddings, identities, groups, block_size=block_size, score_precision=method
        )
    if cuda:
        torch.cuda.synchronize()
    seconds = time.perf_counter() - start
    if cuda:
        memory_mib = (torch.cuda.max_memory_allocated() - memory_before) / 2**20
    else:
        memory_mib = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - rss_before) / 1024
    found = {"seconds": seconds, "peak_rss_mib": memory_mib, "metrics": metrics}
    if args.profile and method in PRECISIONS:
        found["profile"] = engine_profile(embeddings[:PROFILE_IMAGES], identities, groups, block_size, method)
    return found


def engine_profile(
    embeddings: torch.Tensor, identities: np.ndarray, groups: np.ndarray, block_size: int, precision: str
) -> list[dict]:
    """The engine's operations on ``embeddings`` that take the most self time (device time on a GPU), in ms."""
    cuda = embeddings.device.type == "cuda"
    activities = [torch.profiler.ProfilerActivity.CPU, *([torch.profiler.ProfilerActivity.CUDA] if cuda else [])]
    n_images = len(embeddings)
    with torch.profiler.profile(activities=activities) as profile:
        face_identification_metrics(
            embeddings, identities[:n_images], groups[:n_images], block_size=block_size, score_precision=precision
        )
        if cuda:
            torch.cuda.synchronize()
    key = "self_device_time_total" if cuda else "self_cpu_time_total"
    events = sorted(profile.key_averages(), key=lambda event: getattr(event, key), reverse=True)
    return [
        {"operation": event.key, "ms": getattr(event, key) / 1000, "calls": event.count}
        for event in events[:PROFILE_ROWS]
    ]


def run_in_subprocess(method: str, n_images: int, args: argparse.Namespace) -> dict:
    command = [
        sys.executable,
        __file__,
        "--worker",
        method,
        "--sizes",
        str(n_images),
        "--dim",
        str(args.dim),
        "--seed",
        str(args.seed),
        "--block-size",
        str(args.block_size),
        "--device",
        args.device,
        "--noise-scale",
        str(args.noise_scale),
        *(["--profile"] if args.profile else []),
    ]
    completed = subprocess.run(command, check=True, capture_output=True, text=True)
    return json.loads(completed.stdout.strip().splitlines()[-1])


def format_table(rows: list[dict]) -> str:
    header = (
        f"{'N':>7} | {'naive s':>8} | {'float32 s':>9} | {'bfloat16 s':>10} | {'bf16 speed-up':>13} | "
        f"{'f32/bound':>9} | {'bf16/bound':>10} | {'naive MiB':>9} | {'f32 MiB':>8} | {'bf16 MiB':>8} | "
        f"{'identical':>9} | {'rank':>8}"
    )
    lines = [header, "-" * len(header)]
    for row in rows:
        naive, single, half = row["naive"], row["float32"], row["bfloat16"]
        compared = [single, half] if naive is None else [naive, single, half]
        identical = all(_comparable(result["metrics"]) == _comparable(single["metrics"]) for result in compared)
        naive_s = "skipped" if naive is None else f"{naive['seconds']:.2f}"
        naive_mem = "skipped" if naive is None else f"{naive['peak_rss_mib']:.0f}"
        to_bound = [_to_bound(row, precision) for precision in PRECISIONS]
        lines.append(
            f"{row['n']:>7} | {naive_s:>8} | {single['seconds']:>9.2f} | {half['seconds']:>10.2f} | "
            f"{single['seconds'] / half['seconds']:>12.2f}x | {to_bound[0]:>9} | {to_bound[1]:>10} | {naive_mem:>9} | "
            f"{single['peak_rss_mib']:>8.0f} | {half['peak_rss_mib']:>8.0f} | {str(identical):>9} | "
            f"{single['metrics']['rank']:>8.4f}"
        )
    return "\n".join(lines)


def _to_bound(row: dict, precision: str) -> str:
    """The engine's time over its product bound's, or "-" when the bound was not timed (``--methods``)."""
    bound = row.get(f"bound_{precision}")
    return "-" if bound is None else f"{row[precision]['seconds'] / bound['seconds']:.2f}x"


def _comparable(metrics: dict) -> dict:
    """The metrics every method reports, rounded to 12 digits (the naive method sums in another order)."""
    return {key: round(metrics[key], 12) for key in ("rank", "error", "accuracy")}


def options(argv: list[str] | None = None) -> argparse.Namespace:
    """The command line's settings (the module docstring)."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", type=int, nargs="+", default=[2000, 10000, 50000])
    parser.add_argument("--dim", type=int, default=512)
    parser.add_argument("--naive-max", type=int, default=None, help="skip the naive method above this N")
    parser.add_argument("--block-size", type=int, default=1024)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--device", default="cpu", help="cpu or cuda (the naive method runs on the CPU only)")
    parser.add_argument("--noise-scale", type=float, default=NOISE_SCALE, help="per-image noise (module docstring)")
    parser.add_argument("--methods", nargs="+", choices=METHODS[1:], default=list(METHODS[1:]), help="engines timed")
    parser.add_argument("--profile", action="store_true", help="also profile each engine on 100k images")
    parser.add_argument("--output", type=Path, help="also write every size's timings there as JSON")
    parser.add_argument("--worker", choices=METHODS, help=argparse.SUPPRESS)
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> None:
    args = options(argv)
    if args.worker is not None:
        print(json.dumps(run_one(args.worker, args.sizes[0], args)))
        return

    device_name = torch.cuda.get_device_name(args.device) if args.device.startswith("cuda") else "CPU"
    print(
        f"D = {args.dim}, block size = {args.block_size}, torch {torch.__version__}, device {args.device} "
        f"({device_name}), torch threads = {torch.get_num_threads()}"
    )
    rows = []
    for n_images in args.sizes:
        skip_naive = args.naive_max is not None and n_images > args.naive_max
        row = {"n": n_images, "naive": None if skip_naive else run_in_subprocess("naive", n_images, args)}
        row.update({method: run_in_subprocess(method, n_images, args) for method in args.methods})
        rows.append(row)
        print(f"done N = {n_images}", file=sys.stderr, flush=True)
    print(format_table(rows))
    if args.output is not None:
        args.output.write_text(json.dumps(rows, indent=1, default=float))
    print(
        "peak memory = growth of the worker's peak resident set size during the call (getrusage ru_maxrss); on "
        "a GPU, torch.cuda.max_memory_allocated above what the embeddings held"
    )
    print(f"load average at the end (1/5/15 min): {' '.join(f'{load:.1f}' for load in os.getloadavg())}")


if __name__ == "__main__":
    main()
