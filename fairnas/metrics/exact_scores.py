"""Similarity scores from a fast matrix product, with every comparison its rounding could flip decided exactly.

The ranks of Eq. 4.1 only compare a probe's scores with its genuine score. A bfloat16 or float32 product is
within a rigorous error bound of the exact score, so a comparison whose sides differ by more than that bound is
decided by the fast score; only the scores within the bound of a probe's genuine score (its "band") are recomputed
in float64 from the stored embeddings. The ranks are therefore those of exact arithmetic on the embeddings whatever
the product's precision, which only sets the speed.

The bound for a probe a and a gallery row b (standard rounding-error analysis, Higham, *Accuracy and Stability of
Numerical Algorithms*, 2nd ed., Section 3.1), with x̂ the rounded input and r_x = x - x̂:

- rounding the inputs: |<a, b> - <â, b̂>| <= |r_a| |b| + |â| |r_b| (Cauchy-Schwarz on the residuals);
- accumulating D products in float32: gamma_D |â| |b̂| with gamma_D = D u / (1 - D u), u = 2^-24;
- rounding the output (bfloat16 on the CPU): its unit roundoff times the largest possible |score|;
- on CUDA, float32 products that ``torch.set_float32_matmul_precision`` lets run as TF32 ("high") or bfloat16
  ("medium") round their inputs internally: 2 u_in |â| |b̂| more, with u_in one unit in the last place
  (truncation-safe);
- for unnormalised scores 2<a, b> - |b|^2 also the rounding of |b|^2 and of the sum.

On CUDA the sum is doubled (CUDA_SAFETY) to cover tensor cores, whose accumulators may truncate instead of
rounding to nearest (Fasi, Higham, Mikaitis & Pranesh, "Numerical behavior of NVIDIA tensor cores", PeerJ CS
2021); CPU kernels round to nearest as IEEE 754 prescribes.
"""

from __future__ import annotations

import torch

SCORE_PRECISIONS = ("auto", "float32", "bfloat16")
"""``auto`` (the default) is bfloat16 on the CPU, float32 elsewhere: the choice the measurements of
``bench/metrics_speed.py`` support (docs/benchmarks.md, "Metric speed", with their dates and machines)."""
CUDA_SAFETY = 2.0
FLOAT32_ROUNDOFF = 2.0**-24
RECOMPUTE_CHUNK_ELEMENTS = 2**18  # float64 elements (pairs x D) gathered at once by ExactScorer.exact: fits L2
WIDEST_BAND = 1 / 1024
"""Share of a block's comparisons in the band above which a bfloat16 product loses to float32 (rescoring a pair in
float64 costs hundreds of times what a bfloat16 product saves on it; docs/benchmarks.md, "Metric speed"): probe_ranks
then switches."""
INTERNAL_FLOAT32_ROUNDING = {"highest": 0.0, "high": 2.0**-10, "medium": 2.0**-7}  # TF32 / bfloat16 ulp


def score_dtype(precision: str, device: torch.device | None = None) -> torch.dtype:
    """The dtype of the fast product named by ``precision`` on ``device`` (``auto``: bfloat16 on the CPU, else
    float32); a one-line ValueError for any other name."""
    if precision not in SCORE_PRECISIONS:
        raise ValueError(f"score_precision must be one of {list(SCORE_PRECISIONS)}, got {precision!r}")
    if precision == "auto":
        return torch.bfloat16 if device is None or device.type == "cpu" else torch.float32
    return getattr(torch, precision)


class ExactScorer:
    """Fast scores of probes against distinct gallery rows, their error bound, and exact float64 rescoring.

    Scores are closeness to the probe a: <a, b> when ``normalize`` (cosine similarity of unit vectors) and
    2<a, b> - |b|^2 = |a|^2 - |a - b|^2 otherwise. Probes are gallery rows too (``probe_rows`` index ``gallery``).
    """

    def __init__(self, gallery: torch.Tensor, *, normalize: bool, dtype: torch.dtype) -> None:
        self.gallery, self.normalize = gallery, normalize
        self.fast = gallery.to(dtype)
        squared_norms = None if normalize else gallery.square().sum(dim=1, keepdim=True).neg_()
        combined_dtype = torch.float64 if dtype == torch.float64 else torch.float32
        self.negative_squared_norms = None if squared_norms is None else squared_norms.to(combined_dtype)
        self._norms = torch.linalg.vector_norm(gallery, dim=1, dtype=torch.float64)
        self._fast_norms = torch.linalg.vector_norm(self.fast, dim=1, dtype=torch.float64)
        residuals = gallery - self.fast.to(gallery.dtype)
        self._residual_norms = torch.linalg.vector_norm(residuals, dim=1, dtype=torch.float64)
        self._largest_norm, self._largest_fast_norm = self._norms.max(), self._fast_norms.max()
        self._largest_residual_norm = self._residual_norms.max()
        self._bf16_output = dtype == torch.bfloat16 and gallery.device.type != "cuda"
        self._safety = CUDA_SAFETY if gallery.device.type == "cuda" else 1.0
        internal = dtype == torch.float32 and gallery.device.type == "cuda"
        self._internal_rounding = INTERNAL_FLOAT32_ROUNDING[torch.get_float32_matmul_precision()] if internal else 0.0
        accumulate = 2.0**-53 if dtype == torch.float64 else FLOAT32_ROUNDOFF
        dim = gallery.shape[1]
        self._gamma = dim * accumulate / (1 - dim * accumulate)
        source = torch.finfo(gallery.dtype).eps / 2
        self._squared_norm_gamma = dim * source / (1 - dim * source)

    def scores(self, probe_rows: torch.Tensor) -> torch.Tensor:
        """[M, B] fast scores of every gallery row against the probes (gallery-major: per-identity reductions run
        over contiguous rows). float32 on CUDA and for unnormalised scores, else the product's own dtype (bfloat16
        on the CPU, which halves the memory the comparisons read); no per-probe constant is added."""
        probes = self.fast[probe_rows].T
        squared = self.negative_squared_norms
        if self.fast.dtype != torch.bfloat16:
            if squared is None:
                return torch.mm(self.fast, probes)
            return torch.addmm(squared, self.fast, probes, alpha=2.0)
        if self.fast.device.type == "cuda":
            products = torch.mm(self.fast, probes, out_dtype=torch.float32)
        else:
            products = torch.mm(self.fast, probes)
        if squared is None:
            return products
        return products.float().mul_(2.0).add_(squared)

    def tolerance(self, probe_rows: torch.Tensor) -> torch.Tensor:
        """[B] float64 bound on |fast score - exact score| over every gallery row, per probe (module docstring)."""
        norm, fast_norm, residual = (
            values[probe_rows] for values in (self._norms, self._fast_norms, self._residual_norms)
        )
        gallery_norm, gallery_fast_norm = self._largest_norm, self._largest_fast_norm
        largest_product = fast_norm * gallery_fast_norm * (1 + self._gamma)
        product_error = residual * gallery_norm + fast_norm * self._largest_residual_norm
        product_error = product_error + (self._gamma + 2 * self._internal_rounding) * fast_norm * gallery_fast_norm
        if self._bf16_output:
            product_error = product_error + largest_product * torch.finfo(torch.bfloat16).eps / 2
        if self.normalize:
            return self._safety * product_error
        squared_norm = gallery_norm.square()
        combine = 2 * FLOAT32_ROUNDOFF * (2 * largest_product + squared_norm)
        return self._safety * (2 * product_error + self._squared_norm_gamma * squared_norm + combine)

    def exact(self, rows: torch.Tensor, probe_rows: torch.Tensor) -> torch.Tensor:
        """float64 scores of the pairs (gallery row ``rows[i]``, probe row ``probe_rows[i]``).

        Each distinct pair is computed once, so bitwise-identical rows always share a score (exact ties stay
        exact); the pairs are gathered in chunks so memory stays bounded for wide bands.
        """
        n_rows = self.gallery.shape[0]
        pairs, pair_of = torch.unique(rows * n_rows + probe_rows, return_inverse=True)
        values = torch.empty(pairs.numel(), dtype=torch.float64, device=pairs.device)
        step = max(1, RECOMPUTE_CHUNK_ELEMENTS // self.gallery.shape[1])
        for start in range(0, pairs.numel(), step):
            chunk = pairs[start : start + step]
            gallery = self.gallery[chunk // n_rows].double()
            dots = torch.linalg.vecdot(gallery, self.gallery[chunk % n_rows].double())
            values[start : start + step] = dots if self.normalize else 2 * dots - gallery.square().sum(dim=1)
        return values[pair_of]


def at_least(bound: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """The smallest ``dtype`` value >= each float64 ``bound`` (thresholds rounded outwards widen the band only)."""
    rounded = bound.to(dtype)
    return torch.where(rounded.double() < bound, torch.nextafter(rounded, torch.full_like(rounded, torch.inf)), rounded)


def at_most(bound: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """The largest ``dtype`` value <= each float64 ``bound``."""
    return -at_least(-bound, dtype)
