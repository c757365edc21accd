"""All metrics of one model on one verification benchmark, from the embeddings of the benchmark's images."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

import numpy as np
from matplotlib.figure import Figure

from fairnas.data.formats.verification import VerificationBenchmark
from fairnas.metrics import det_figure, face_identification_metrics, frvt_error_rates, pair_scores, verification_metrics


@dataclasses.dataclass
class BenchmarkResult:
    """``verification``: k-fold accuracy, TAR@FAR and FRVT FMR/FNMR (per group with ``/g``); ``identification``:
    error, rank and the Table 4.1 disparities over the benchmark's images (empty without a protected attribute or
    identities); ``det``: the DET curves per group."""

    verification: dict[str, float]
    identification: dict[str, float]
    det: Figure


def evaluate_benchmark(
    benchmark: VerificationBenchmark,
    embeddings: np.ndarray,
    *,
    far_targets: Sequence[float],
    target_fmr: float,
    rank_by: str = "identity",
    title: str | None = None,
) -> BenchmarkResult:
    """Verification metrics of ``benchmark``'s pairs, per group when it has a protected attribute, and
    identification fairness over its images when they carry identities and groups (RFW, thesis Table 4.8)."""
    pairs = benchmark.pairs
    scores = pair_scores(embeddings, pairs["left"].to_numpy(), pairs["right"].to_numpy())
    same, folds = pairs["same"].to_numpy(), pairs["fold"].to_numpy()
    groups = pairs["group"].to_numpy() if benchmark.attribute else None
    verification = verification_metrics(scores, same, folds, groups, far_targets=far_targets)
    rates = frvt_error_rates(scores, same, groups, target_fmr=target_fmr)
    verification.update(rates)
    identification = {}
    images = benchmark.images
    if benchmark.attribute and images["identity"].notna().all():
        identification = face_identification_metrics(
            embeddings,
            images["identity"].to_numpy(),
            images[benchmark.attribute].to_numpy(),
            rank_by=rank_by,
            normalize=False,
        )
    det = det_figure(scores, same, pairs["group"].to_numpy(), rates["threshold"], title=title or benchmark.name)
    return BenchmarkResult(verification, identification, det)
