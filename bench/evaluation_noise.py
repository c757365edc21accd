"""How much of the seed noise of error and rank disparity comes from the finite validation set, and how much from
training (issue "The search's answer survives seed noise", item 4).

Input: finished runs of one configuration with different training seeds (run folders with ``checkpoints/last.ckpt``,
e.g. ``bench/group_sampling.py``'s). For every run the split's probes are ranked once against the whole split
(:func:`fairnas.metrics.probe_ranks`, exactly as training evaluates it; checked against the run's ``metrics.json``).
Then a cluster bootstrap over the split's identities, stratified by group (each replicate draws as many identities
of each group as the split has, with replacement, and averages their probes' errors and ranks; the gallery stays
the split), gives:

- ``boot_sd``: the standard deviation of one model's error or rank disparity over replicates: how much it would
  change on another validation set of the same size;
- the evaluation part of the seed variance: two seeds are evaluated on the same identities, so what the finite set
  adds to their difference is the bootstrap variance of the *paired* difference (both models resampled with the
  same identities), halved; averaged over every pair of seeds and compared with the seed variance (ddof 1) of the
  observed values. Its share above 1/3 means the splits are too small to rank configurations;
- the identities per group that would bring that share to 1/3, assuming the evaluation variance falls as 1/n and
  the training variance stays.

    python bench/evaluation_noise.py outputs/group_sampling/variants/301_off/seed* --split val
"""

from __future__ import annotations

import argparse
import itertools
import json
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pandas as pd
import torch

from fairnas.metrics import probe_ranks
from fairnas.training.build import load_run

OBJECTIVES = ("error", "rank_disparity")


def per_identity(run_dir: Path, split: str) -> pd.DataFrame:
    """One row per identity of ``split`` with probes: its group index, probe count, summed errors and ranks."""
    run = load_run(run_dir)
    data = run.data()
    embeddings, identities, groups = [], [], []
    with torch.no_grad():
        for batch in getattr(data, f"{split}_dataloader")():
            batch = data.on_after_batch_transfer(batch, 0)
            embeddings.append(run.module.embed(batch["image"]))
            identities.append(batch["label"])
            groups.append(batch["group"])
    identity = torch.cat(identities)
    codes = torch.unique(identity, return_inverse=True)[1]
    probes = torch.nonzero(torch.bincount(codes)[codes] >= 2).squeeze(1)
    ranks = probe_ranks(torch.cat(embeddings), codes, probes, rank_by=run.config.eval.rank_by, normalize=True)
    frame = pd.DataFrame(
        {"identity": codes[probes].numpy(), "group": torch.cat(groups)[probes].numpy(), "rank": ranks.numpy()}
    )
    frame["err"] = (frame["rank"] > 0).astype(float)
    table = frame.groupby("identity").agg(
        group=("group", "first"), n=("rank", "size"), err=("err", "sum"), rank=("rank", "sum")
    )
    observed = objectives(table.to_numpy(dtype=float)[None])
    recorded = json.loads((run_dir / "metrics.json").read_text())[split]
    # Embedding again can flip a near-tie between two distances: allow a few probes' worth of rank.
    for name, value in zip(OBJECTIVES, observed[0], strict=True):
        assert abs(value - float(recorded[name])) < 0.01, (run_dir, name, value, recorded[name])
    return table.reset_index(drop=True)


def objectives(tables: np.ndarray) -> np.ndarray:
    """[R, 2] error and rank disparity of R resampled tables [R, identities, (group, n, err, rank)], two groups."""
    n, err, rank = tables[..., 1], tables[..., 2], tables[..., 3]
    error = err.sum(axis=1) / n.sum(axis=1)
    mean_rank = []
    for group in (0, 1):
        members = tables[..., 0] == group
        mean_rank.append((rank * members).sum(axis=1) / (n * members).sum(axis=1))
    return np.stack([error, np.abs(mean_rank[0] - mean_rank[1])], axis=1)


def bootstrap_draws(groups: np.ndarray, replicates: int, seed: int) -> np.ndarray:
    """[replicates, identities] row indices: per replicate, every group's identities drawn with replacement."""
    rng = np.random.default_rng(seed)
    columns = []
    for group in np.unique(groups):
        members = np.flatnonzero(groups == group)
        columns.append(rng.choice(members, size=(replicates, len(members)), replace=True))
    return np.concatenate(columns, axis=1)


def decompose(tables: Sequence[pd.DataFrame], replicates: int = 2000, seed: int = 0) -> pd.DataFrame:
    """Per objective: the seeds' mean and s.d., one model's bootstrap s.d., the evaluation share of the seed
    variance, and the identities per group that would bring that share to 1/3."""
    arrays = [table[["group", "n", "err", "rank"]].to_numpy(dtype=float) for table in tables]
    assert all(np.array_equal(a[:, :2], arrays[0][:, :2]) for a in arrays), "the runs must share their split"
    draws = bootstrap_draws(arrays[0][:, 0], replicates, seed)
    observed = np.stack([objectives(a[None])[0] for a in arrays])
    resampled = np.stack([objectives(a[draws]) for a in arrays])  # [runs, replicates, 2]
    pair_var = np.mean(
        [np.var(resampled[i] - resampled[j], axis=0, ddof=1) for i, j in itertools.combinations(range(len(arrays)), 2)],
        axis=0,
    )
    seed_var = np.var(observed, axis=0, ddof=1)
    eval_var = pair_var / 2
    identities = int(np.sum(arrays[0][:, 0] == 0))
    rows = []
    for k, name in enumerate(OBJECTIVES):
        share = eval_var[k] / seed_var[k]
        train_var = max(seed_var[k] - eval_var[k], 0.0)
        # eval_var * n0 / n = train_var / 2  (evaluation one third of the total)
        needed = identities * eval_var[k] / (train_var / 2) if train_var > 0 else np.inf
        rows.append(
            {
                "objective": name,
                "runs": len(arrays),
                "mean": observed[:, k].mean(),
                "seed_sd": np.sqrt(seed_var[k]),
                "boot_sd_one_model": float(np.mean(resampled[..., k].std(axis=1, ddof=1))),
                "eval_sd_of_seed_noise": np.sqrt(eval_var[k]),
                "eval_share_of_seed_variance": share,
                "identities_per_group": identities,
                "identities_for_share_one_third": needed,
            }
        )
    return pd.DataFrame(rows)


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("runs", nargs="+", type=Path, help="run folders of one configuration, different seeds")
    parser.add_argument("--split", choices=["val", "test"], default="val")
    parser.add_argument("--replicates", type=int, default=2000)
    args = parser.parse_args(argv)
    if len(args.runs) < 2:
        parser.error("give at least two runs (seeds) of one configuration")
    tables = [per_identity(run, args.split) for run in args.runs]
    print(decompose(tables, args.replicates).round(4).to_markdown(index=False))


if __name__ == "__main__":
    main()
