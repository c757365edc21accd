"""The exact metric engine's per-identity maximum, three ways side by side: is its atomic reduction what a GPU waits on?

For every block of probes the engine (``fairnas.metrics.identification``) reduces the fast scores [N images, B
probes] to each identity's best score [identities, B] with ``index_reduce_`` (amax): on a GPU, one floating-point
atomic per score, about 1e12 at N = 1M. Two ways need no atomics once the gallery's rows are sorted by identity (a
one-time permutation before the first block, which this benchmark does not time):

- ``segment_reduce``: ``torch.segment_reduce`` (max) over each identity's run of rows;
- ``padded amax``: each identity's rows gathered to the largest identity's width, padded with -inf, then ``amax``
  (it reads identities x that width rows, about 2.7 N here).

The three must agree exactly (``equal``). Scores are random float32 (the engine compares float32 scores on a GPU
with either product precision); identities are drawn as ``bench/metrics_speed.py`` draws them, ~10 images each.
One block of ``--block-size`` probes, the best of ``--repeats`` timings, synchronised around each.

    python bench/identity_max_speed.py                                     # CPU, N = 50,000
    python bench/identity_max_speed.py --device cuda --images 1000000      # what bench/gpu_check.py runs
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable

import pandas as pd
import torch

from fairnas.metrics.identification import index_amax


def padded_rows(counts: torch.Tensor) -> torch.Tensor:
    """[identities, widest] the sorted row of each identity's images, then ``sum(counts)`` (an extra -inf row)."""
    starts = torch.cumsum(counts, dim=0) - counts
    slots = torch.arange(int(counts.max()), device=counts.device)
    return torch.where(slots < counts[:, None], starts[:, None] + slots, int(counts.sum()))


def identity_maxima(identities: torch.Tensor, block_size: int, seed: int = 0) -> dict[str, Callable[[], torch.Tensor]]:
    """Each way's per-identity maximum of one random block of scores for images of ``identities`` (codes, on the
    device), as a function of no arguments (its inputs made here)."""
    device, n_identities = identities.device, int(identities.max()) + 1
    generator = torch.Generator(device=device).manual_seed(seed)
    scores = torch.randn(len(identities), block_size, generator=generator, device=device)
    counts = torch.bincount(identities, minlength=n_identities)
    ordered = scores[torch.argsort(identities, stable=True)]
    padded = torch.cat([ordered, torch.full((1, block_size), -torch.inf, device=device)])
    slots = padded_rows(counts)
    return {
        "index_reduce (the engine)": lambda: index_amax(scores, identities, n_identities),
        "segment_reduce": lambda: torch.segment_reduce(
            ordered, "max", lengths=counts, axis=0, unsafe=True, initial=-torch.inf
        ),
        "padded amax": lambda: padded[slots.flatten()].view(*slots.shape, block_size).amax(dim=1),
    }


def seconds(way: Callable[[], torch.Tensor], device: str, repeats: int) -> tuple[float, torch.Tensor]:
    """The best of ``repeats`` timings of ``way`` after one untimed call, and its result."""
    result = way()
    best = float("inf")
    for _ in range(repeats):
        if device.startswith("cuda"):
            torch.cuda.synchronize(device)
        start = time.perf_counter()
        result = way()
        if device.startswith("cuda"):
            torch.cuda.synchronize(device)
        best = min(best, time.perf_counter() - start)
    return best, result


def compare(images: int, block_size: int, device: str, repeats: int) -> pd.DataFrame:
    """ms per block of each way, its ratio to the engine's, and whether it equals the engine's result."""
    identities = torch.randint(max(images // 10, 2), (images,), generator=torch.Generator().manual_seed(0))
    ways = identity_maxima(identities.to(device), block_size)
    rows, reference = [], None
    for name, way in ways.items():
        best, result = seconds(way, device, repeats)
        reference = result if reference is None else reference
        rows.append({"way": name, "ms/block": best * 1e3, "equal": bool(torch.equal(result, reference))})
        del result
    table = pd.DataFrame(rows)
    table["ratio to the engine"] = table["ms/block"] / table["ms/block"].iloc[0]
    return table


def main(argv: list[str] | None = None) -> pd.DataFrame:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--images", type=int, default=50_000)
    parser.add_argument("--block-size", type=int, default=1024, help="probes per block (the engine's default)")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--output", help="also write the table as CSV there")
    args = parser.parse_args(argv)
    table = compare(args.images, args.block_size, args.device, args.repeats)
    print(
        f"Per-identity maximum of one block: N = {args.images:,} images (~10 per identity), B = {args.block_size} "
        f"probes, {args.device}, torch {torch.__version__}, {torch.get_num_threads()} threads\n"
        f"{table.to_string(index=False, float_format='{:.3f}'.format)}"
    )
    if args.output:
        table.to_csv(args.output, index=False)
    return table


if __name__ == "__main__":
    main()
