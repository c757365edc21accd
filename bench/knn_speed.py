"""Exact top-K retrieval over embeddings: fairnas's torch path against faiss (IndexFlatIP / IndexFlatL2).

fairnas computes top-K cosine retrieval in the Fairness Indicators audit (fairnas/audits/fairness_indicators.py):

- ``identity``:  identity retrieval, each image's K nearest *other* images of the whole split
                 (``nearest(x, x, k, exclude_self=True)``), N queries x N database rows;
- ``attribute``: same-attribute retrieval, the query half against the identity-disjoint database half
                 (``nearest(queries, database, k)``), N/2 x N/2;
- ``label``:     label association, each probe's top-5 gallery templates (``top_predictions(probes @ templates.T)``),
                 here N - N/10 probes against N/10 templates (about ten images an identity), K = 5 only.

The faiss path computes the same top-K exactly: an IndexFlatIP (or IndexFlatL2: on unit vectors it ranks as the
inner product does) over the L2-normalised float32 database; ``identity`` asks for K + 1 neighbours and drops the
query itself. Both paths run on the CPU with the same number of threads (``--threads``).

Time: both paths are brute force, linear in the number of queries, so each timed call searches a seeded sample of
at most ``--max-queries`` queries against the *whole* database and the time of all queries is extrapolated:
``full s`` = setup + (sampled seconds - setup) x all queries / sampled queries, where setup is the time of the same
call with no query (normalising the database, building the index: paid once per call). The best of ``--repeats``
calls is kept.

Each (workload, N, D) is timed in one subprocess that alternates the methods call by call (ABAB...), so that a
change of load on a shared machine hits them alike.

Memory: each (method, workload, N, D) also runs in a fresh subprocess of its own, one call per K on the timed
queries; ``MiB`` is the peak of its resident set size during those calls (read from /proc/self/statm every 2 ms by
a thread: getrusage's ru_maxrss proved unreliable here, the kernel updates its high-water mark lazily) above what
it held just before them, after generating the embeddings and a small warm-up call.

Agreement: per sampled query the two neighbour *sets* are compared (P@K and the label association depend on the
set only). A query whose sets differ is a tie if every neighbour in the symmetric difference has a float64 cosine
within ``--tie-tol`` of the K-th best one (faiss's OpenBLAS and torch's MKL round the last bit of a dot product
differently, so a float32 near-tie can fall either way). ``order`` counts queries whose sets agree but whose order
differs.

faiss is not a dependency of fairnas (docs/dependencies.md: these numbers are why); install it to run this:
``pip install faiss-cpu``.

    python bench/knn_speed.py                                         # N = 10k 50k 200k, D = 512 128, K = 10 50
    python bench/knn_speed.py --sizes 10000 --dims 128 --max-queries 500 --repeats 1   # a quick look
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F

from fairnas.audits.fairness_indicators import TOP, nearest, top_predictions

WORKLOADS = ("identity", "attribute", "label")
METHODS = ("torch", "faiss")
IMAGES_PER_IDENTITY = 10
NOISE_SCALE = 3.0  # per-image noise around each identity centre (as bench/metrics_speed.py)


def synthetic_embeddings(n_images: int, dim: int, seed: int) -> np.ndarray:
    """L2-normalised float32 [N, dim] embeddings of ~N/10 identities (~10 images each) around Gaussian centres."""
    rng = np.random.default_rng(seed)
    n_identities = max(n_images // IMAGES_PER_IDENTITY, 2)
    identities = rng.integers(0, n_identities, size=n_images)
    centres = rng.standard_normal((n_identities, dim), dtype=np.float32)
    embeddings = np.empty((n_images, dim), dtype=np.float32)
    for start in range(0, n_images, 8192):  # in blocks: the peak RSS after this is the array itself
        block = centres[identities[start : start + 8192]]
        block += NOISE_SCALE * rng.standard_normal(block.shape, dtype=np.float32)
        embeddings[start : start + 8192] = block / np.linalg.norm(block, axis=1, keepdims=True)
    return embeddings


def workload_arrays(workload: str, embeddings: np.ndarray, max_queries: int, seed: int):
    """(sampled queries, database, row of each sampled query in the database or None, number of all queries)."""
    n_images = len(embeddings)
    if workload == "identity":
        queries_all, database = np.arange(n_images), embeddings
    elif workload == "attribute":
        half = n_images // 2
        queries_all, database = np.arange(half, n_images), embeddings[:half]
    else:
        n_templates = max(n_images // IMAGES_PER_IDENTITY, 2)
        queries_all, database = np.arange(n_templates, n_images), embeddings[:n_templates]
    rng = np.random.default_rng(seed + 1)
    sample = np.sort(rng.choice(queries_all, size=min(max_queries, len(queries_all)), replace=False))
    self_rows = sample if workload == "identity" else None
    return np.ascontiguousarray(embeddings[sample]), np.ascontiguousarray(database), self_rows, len(queries_all)


# ------------------------------------------------------------------------------------------------------ methods


def torch_topk(workload: str, queries: np.ndarray, database: np.ndarray, self_rows, k: int) -> np.ndarray:
    """The audit's own code path."""
    queries_t, database_t = torch.from_numpy(queries), torch.from_numpy(database)
    if workload == "label":
        return top_predictions(F.normalize(queries_t, dim=1) @ F.normalize(database_t, dim=1).T, k)[1]
    if self_rows is None:
        return nearest(queries_t, database_t, k)
    if len(self_rows) == len(database):  # every image is a query: the audit's exact call
        return nearest(database_t, database_t, k, exclude_self=True)
    if len(self_rows) == 0:
        return nearest(queries_t, database_t, k)
    # nearest(x, x, exclude_self=True) takes the queries to be the whole database; for a sample of its rows the
    # same computation is the chunked product with each query's own row masked (as nearest does).
    queries_t, database_t = F.normalize(queries_t.float(), dim=1), F.normalize(database_t.float(), dim=1)
    out = []
    for start in range(0, len(queries_t), 1024):
        scores = queries_t[start : start + 1024] @ database_t.T
        rows = torch.arange(len(scores))
        scores[rows, torch.as_tensor(self_rows[start : start + 1024])] = -torch.inf
        out.append(scores.topk(k, dim=1).indices)
    return torch.cat(out).numpy()


def import_faiss():
    try:
        import faiss
    except ImportError as error:
        raise SystemExit(
            "bench/knn_speed.py needs faiss, which fairnas does not depend on: pip install faiss-cpu"
        ) from error
    return faiss


def faiss_topk(queries: np.ndarray, database: np.ndarray, self_rows, k: int, metric: str = "ip") -> np.ndarray:
    """Exact search of an IndexFlatIP / IndexFlatL2 over the normalised database; self excluded via K + 1."""
    faiss = import_faiss()

    # Normalised exactly as the torch path does (F.normalize), so both search the same float32 vectors.
    queries = F.normalize(torch.from_numpy(queries).float(), dim=1).numpy()
    database = F.normalize(torch.from_numpy(database).float(), dim=1).numpy()
    index = (faiss.IndexFlatIP if metric == "ip" else faiss.IndexFlatL2)(database.shape[1])
    index.add(database)
    if self_rows is None:
        return index.search(queries, k)[1]
    found = index.search(queries, k + 1)[1]
    is_self = found == np.asarray(self_rows)[:, None]
    # Drop the query itself; where a duplicate of it pushed it out of the K + 1, drop the last neighbour instead.
    is_self[~is_self.any(axis=1), -1] = True
    return found[~is_self].reshape(len(found), k)


# ------------------------------------------------------------------------------------------------------- worker


def search(method: str, workload: str, queries, database, self_rows, k: int) -> np.ndarray:
    if method == "torch":
        return torch_topk(workload, queries, database, self_rows, k)
    return faiss_topk(queries, database, self_rows, k, metric="l2" if method == "faiss_l2" else "ip")


class PeakRSS:
    """Peak growth of this process's resident set size inside the ``with`` block, sampled every 2 ms."""

    def __enter__(self):
        self.before = self.peak = _resident_bytes()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)
        self._thread.start()
        return self

    def _sample(self):
        while not self._stop.wait(0.002):
            self.peak = max(self.peak, _resident_bytes())

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join()
        self.peak = max(self.peak, _resident_bytes())
        self.growth_mib = (self.peak - self.before) / 2**20


def _resident_bytes() -> int:
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def run_worker(args: argparse.Namespace) -> dict:
    """``--worker time``: every method on one (workload, N, D), calls interleaved (ABAB) so that a change of load
    on a shared machine hits all methods alike; ``--worker <method>``: one call per K of one method, for its peak
    resident memory alone."""
    faiss = import_faiss()

    torch.set_num_threads(args.threads)
    faiss.omp_set_num_threads(args.threads)
    embeddings = synthetic_embeddings(args.sizes[0], args.dims[0], args.seed)
    queries, database, self_rows, n_all = workload_arrays(args.workload, embeddings, args.max_queries, args.seed)
    ks = [TOP] if args.workload == "label" else args.ks
    methods = args.methods if args.worker == "time" else [args.worker]
    small = min(64, len(database) - 1)
    for method in methods:  # warm up kernels and thread pools
        search(
            method,
            args.workload,
            queries[:8],
            database[: small + 1],
            None if self_rows is None else np.arange(8),
            min(ks[0], small - 1),
        )
    info = {"n_queries": len(queries), "n_all_queries": n_all, "n_database": len(database)}
    if args.worker != "time":
        with PeakRSS() as peak:
            for k in ks:
                search(args.worker, args.workload, queries, database, self_rows, k)
        return {**info, "peak_mib": peak.growth_mib}

    no_rows = None if self_rows is None else self_rows[:0]
    results = {}
    for k in ks:
        setup = dict.fromkeys(methods, float("inf"))
        seconds = dict.fromkeys(methods, float("inf"))
        for _ in range(args.repeats):
            for method in methods:
                if len(queries) < n_all:  # per call, whatever the queries: normalise, build the index
                    begin = time.perf_counter()
                    search(method, args.workload, queries[:0], database, no_rows, k)
                    setup[method] = min(setup[method], time.perf_counter() - begin)
                begin = time.perf_counter()
                found = search(method, args.workload, queries, database, self_rows, k)
                seconds[method] = min(seconds[method], time.perf_counter() - begin)
                np.save(Path(args.out) / f"{method}_{k}.npy", found)
        results[k] = {}
        for method in methods:
            full = seconds[method]
            if len(queries) < n_all:
                full = setup[method] + max(seconds[method] - setup[method], 0.0) * n_all / len(queries)
            results[k][method] = {
                "seconds": seconds[method],
                "setup_seconds": setup[method],
                "full_seconds": full,
                "indices": str(Path(args.out) / f"{method}_{k}.npy"),
            }
    return {**info, "ks": results}


def run_in_subprocess(worker: str, workload: str, n_images: int, dim: int, methods, args, out: str) -> dict:
    command = [
        sys.executable,
        __file__,
        "--worker",
        worker,
        "--workload",
        workload,
        "--sizes",
        str(n_images),
        "--dims",
        str(dim),
        "--ks",
        *map(str, args.ks),
        "--max-queries",
        str(args.max_queries),
        "--repeats",
        str(args.repeats),
        "--threads",
        str(args.threads),
        "--seed",
        str(args.seed),
        "--methods",
        *methods,
        "--out",
        out,
    ]
    completed = subprocess.run(command, check=True, capture_output=True, text=True)
    return json.loads(completed.stdout.strip().splitlines()[-1])


# ---------------------------------------------------------------------------------------------------- agreement


def agreement(workload: str, n_images: int, dim: int, k: int, a: np.ndarray, b: np.ndarray, args) -> dict:
    """Queries with equal neighbour sets, with sets that differ only by float32 near-ties, and in order only."""
    embeddings = synthetic_embeddings(n_images, dim, args.seed)
    queries, database, _, _ = workload_arrays(workload, embeddings, args.max_queries, args.seed)
    same_set = (np.sort(a, axis=1) == np.sort(b, axis=1)).all(axis=1)
    ties = 0
    for row in np.flatnonzero(~same_set):
        query = queries[row].astype(np.float64)
        scores = {int(i): float(database[i].astype(np.float64) @ query) for i in (*a[row], *b[row])}
        kth = min(scores[int(i)] for i in a[row])
        differ = set(map(int, a[row])) ^ set(map(int, b[row]))
        ties += all(abs(scores[i] - kth) <= args.tie_tol for i in differ)
    return {
        "same_set": int(same_set.sum()),
        "ties": ties,
        "other": int((~same_set).sum()) - ties,
        "order": int((same_set & ~(a == b).all(axis=1)).sum()),
        "n": len(a),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", type=int, nargs="+", default=[10000, 50000, 200000])
    parser.add_argument("--dims", type=int, nargs="+", default=[512, 128])
    parser.add_argument("--ks", type=int, nargs="+", default=[10, 50])
    parser.add_argument("--workloads", nargs="+", choices=WORKLOADS, default=list(WORKLOADS))
    parser.add_argument("--max-queries", type=int, default=2000, help="queries timed per call (extrapolated)")
    parser.add_argument("--repeats", type=int, default=3, help="calls per setting; the fastest is kept")
    parser.add_argument("--threads", type=int, default=1, help="torch and faiss (OpenMP) threads")
    parser.add_argument("--l2", action="store_true", help="also time faiss.IndexFlatL2")
    parser.add_argument("--no-memory", action="store_true", help="skip the peak-memory subprocesses")
    parser.add_argument("--tie-tol", type=float, default=1e-5, help="float64 cosine gap counted as a tie")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--worker", choices=("time", *METHODS, "faiss_l2"), help=argparse.SUPPRESS)
    parser.add_argument("--workload", choices=WORKLOADS, help=argparse.SUPPRESS)
    parser.add_argument("--methods", nargs="+", help=argparse.SUPPRESS)
    parser.add_argument("--out", help=argparse.SUPPRESS)
    args = parser.parse_args()

    if args.worker is not None:
        print(json.dumps(run_worker(args)))
        return

    faiss = import_faiss()

    methods = [*METHODS, *(["faiss_l2"] if args.l2 else [])]
    print(
        f"torch {torch.__version__}, faiss {faiss.__version__}, threads = {args.threads}, "
        f"queries timed per call <= {args.max_queries}, best of {args.repeats}, cpu count = {os.cpu_count()}"
    )
    header = (
        f"{'workload':>9} | {'N':>7} | {'D':>4} | {'K':>3} | {'queries':>7} | {'database':>8} | "
        + " | ".join(f"{m + ' s':>10}" for m in methods)
        + " | "
        + " | ".join(f"{m + ' MiB':>12}" for m in methods)
        + " | "
        + " | ".join(f"{'torch/' + m:>14}" for m in methods[1:])
        + " | "
        + " | ".join(f"{m + ' same/tie/other/order':>30}" for m in methods[1:])
    )
    lines = [header, "-" * len(header)]
    with tempfile.TemporaryDirectory() as out:
        for n_images in args.sizes:
            for dim in args.dims:
                for workload in args.workloads:
                    timed = run_in_subprocess("time", workload, n_images, dim, methods, args, out)
                    memory = {
                        m: (
                            None
                            if args.no_memory
                            else run_in_subprocess(m, workload, n_images, dim, methods, args, out)["peak_mib"]
                        )
                        for m in methods
                    }
                    for k, runs in timed["ks"].items():
                        found = {m: np.load(runs[m]["indices"]) for m in methods}
                        agree = [
                            agreement(workload, n_images, dim, int(k), found["torch"], found[m], args)
                            for m in methods[1:]
                        ]
                        torch_s = runs["torch"]["full_seconds"]
                        lines.append(
                            f"{workload:>9} | {n_images:>7} | {dim:>4} | {k:>3} | {timed['n_all_queries']:>7} | "
                            f"{timed['n_database']:>8} | "
                            + " | ".join(f"{runs[m]['full_seconds']:>10.2f}" for m in methods)
                            + " | "
                            + " | ".join(f"{'-' if memory[m] is None else f'{memory[m]:.0f}':>12}" for m in methods)
                            + " | "
                            + " | ".join(f"{torch_s / runs[m]['full_seconds']:>13.2f}x" for m in methods[1:])
                            + " | "
                            + " | ".join(
                                f"{a['same_set']}/{a['ties']}/{a['other']}/{a['order']} of {a['n']}".rjust(30)
                                for a in agree
                            )
                        )
                        print(lines[-1], file=sys.stderr, flush=True)
    print("\n".join(lines))
    print(
        "s: seconds of one call over all the queries (extrapolated from the timed ones when there are more; see the "
        "module docstring); MiB: peak growth of the resident set over one call per K on the timed queries, in a "
        "fresh process; "
        f"same/tie/other/order: timed queries whose neighbour sets are equal / differ only by neighbours within "
        f"{args.tie_tol:g} of the K-th cosine / differ otherwise / are equal but ordered differently"
    )
    print(f"load average at the end (1/5/15 min): {' '.join(f'{load:.1f}' for load in os.getloadavg())}")


if __name__ == "__main__":
    main()
