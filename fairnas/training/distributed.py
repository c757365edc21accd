"""Evaluation under data parallelism: every rank ranks the whole split, exactly as one process would.

Each rank embeds only its shard of a validation or test split, and a distributed sampler pads the last shard with
repeated images so that every rank gets as many batches. Ranking the local shard would make error and rank
disparity depend on the number of devices; :func:`gather_split` instead collects every rank's rows and keeps each
dataset image once, in dataset order, so the metrics equal a single-process run's on the same weights.
"""

from __future__ import annotations

import torch
import torch.distributed as dist


def gather_split(columns: dict[str, torch.Tensor], device: torch.device) -> dict[str, torch.Tensor]:
    """The rows of ``columns`` (equal-length tensors, one of them ``index``, the dataset index of each row) from
    every rank, each dataset index once, sorted by it; on the devices the columns came from."""
    if dist.is_available() and dist.is_initialized() and dist.get_world_size() > 1:
        columns = {name: _all_gather_rows(column, device) for name, column in columns.items()}
    _, first = _first_occurrences(columns["index"])
    return {name: column[first] for name, column in columns.items()}


def _all_gather_rows(tensor: torch.Tensor, device: torch.device) -> torch.Tensor:
    """Concatenate ``tensor``'s rows from all ranks (ranks may hold different numbers of rows)."""
    local = tensor.to(device)
    world = dist.get_world_size()
    sizes = [torch.zeros(1, dtype=torch.long, device=device) for _ in range(world)]
    dist.all_gather(sizes, torch.tensor([len(local)], dtype=torch.long, device=device))
    counts = [int(size) for size in sizes]
    padded = local.new_zeros((max(counts), *local.shape[1:]))
    padded[: len(local)] = local
    gathered = [torch.empty_like(padded) for _ in range(world)]
    dist.all_gather(gathered, padded)
    return torch.cat([rows[:count] for rows, count in zip(gathered, counts, strict=False)]).to(tensor.device)


def _first_occurrences(index: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """The distinct values of ``index`` (sorted) and the position of each one's first occurrence."""
    unique, inverse = torch.unique(index, return_inverse=True)
    positions = torch.arange(len(index), device=index.device)
    first = torch.full((len(unique),), len(index), dtype=torch.long, device=index.device)
    return unique, first.scatter_reduce_(0, inverse, positions, reduce="amin")
