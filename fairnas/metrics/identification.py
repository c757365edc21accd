"""Closed-set face-identification error, rank and per-group fairness (thesis Section 4.3.4, Eq. 4.1, Table 4.1).

Every image whose identity has at least one other image is a probe; the gallery of a probe is every other image.
The genuine distance d+ of a probe is its distance to the nearest other image of the same identity, and its rank
counts what is strictly closer than d+ from other identities (ties go to the genuine match):

- rank by identity (default): the number of distinct other identities with an image closer than d+;
- rank by image: the number of images of other identities closer than d+.

A probe errs when its rank is above 0. Non-finite embeddings raise :class:`NonFiniteEmbeddingsError` (NaN compares
False with everything and would otherwise rank as a perfect match). Ranks are computed in blocks of probes against
the whole set, so memory is O(N * block_size) and no N x N distance matrix is ever held.
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F

from fairnas.metrics.exact_scores import WIDEST_BAND, ExactScorer, score_dtype
from fairnas.metrics.fairness import DISPARITY_METRICS, check_disparity_groups, group_disparities
from fairnas.metrics.genuine_band import Candidates, GenuineBand, IdentityMembers
from fairnas.validation import Settings

RANK_BY_CHOICES = ("identity", "image")


class NonFiniteEmbeddingsError(ValueError):
    """Embeddings hold NaN or inf values: they cannot be ranked (a trial with them has crashed, not scored 0)."""


IDENTIFICATION_METRICS = ("error", "accuracy", "rank", *DISPARITY_METRICS)
"""Summary metrics of :func:`face_identification_metrics` (besides ``n_probes`` and the per-group ones)."""


def face_identification_metrics(
    embeddings: np.ndarray | torch.Tensor,
    identities: np.ndarray | torch.Tensor | Sequence[Any],
    groups: np.ndarray | torch.Tensor | Sequence[Any],
    *,
    group_order: Sequence[Any] | None = None,
    rank_by: str = "identity",
    normalize: bool = True,
    block_size: int = 1024,
    score_precision: str = "auto",
) -> dict[str, float]:
    """Identification error, accuracy and rank, overall and per group, plus the Table 4.1 disparities.

    Args:
        embeddings: [N, D] array or tensor; computation runs on its device (CPU for numpy).
        identities: N identity labels (ints or strings).
        groups: N protected-attribute labels (ints or strings); metric keys use ``str(label)``.
        group_order: groups to report and compare, matched by ``str(label)``; with two groups the first is g0
            of Table 4.1. Default: all group labels, sorted. Images of other groups are gallery images and
            impostors and count in the overall ``error``/``rank``, but in no per-group metric or disparity.
        rank_by: "identity" (count closer identities) or "image" (count closer images).
        normalize: L2-normalise embeddings first; distances then rank like cosine similarity.
        block_size: probes per block. Peak memory on the embeddings' device is about
            ``8 N D + block_size * (9 N + 4 n_identities)`` bytes for float32 (the embeddings and their distinct
            rows; per block the [N, block] scores, their copy when some rows repeat, a boolean comparison and the
            per-identity maxima). E.g. N = 1,000,000, D = 512, 100,000 identities, block_size = 1024: ~4 GB + ~9.6 GB;
            halve block_size to halve the second term. A bfloat16 product adds ``2 N D`` for its copy of the
            embeddings; on the CPU its scores stay bfloat16, which halves their terms.
        score_precision: dtype of the fast similarity product, "float32", "bfloat16" or "auto" (the default:
            bfloat16 on the CPU, float32 on a GPU; ``exact_scores.SCORE_PRECISIONS``). Ranks are exact for each:
            comparisons within the product's rounding bound of a genuine score are decided in float64
            (``fairnas.metrics.exact_scores``); bfloat16 only changes the speed, and falls back to float32 when
            too many comparisons need deciding.

    Returns:
        ``error``, ``accuracy``, ``rank``, ``n_probes``; per group g ``error/g``, ``accuracy/g``, ``rank/g``,
        ``n_probes/g``; and ``rank_disparity``, ``disparity``, ``ratio``, ``rank_ratio``, ``error_ratio``.
    """
    _check_rank_by(rank_by)
    Settings().integer("block_size", block_size, minimum=1)
    score_dtype(score_precision)  # refuses an unknown precision before any work
    embeddings = _embedding_tensor(embeddings)
    _check_finite(embeddings)
    n_images = embeddings.shape[0]
    identity_codes = _identity_codes(identities, n_images, embeddings.device)
    group_values, group_codes = np.unique(_label_array(groups, "groups", n_images), return_inverse=True)
    code_of_group = {str(value): code for code, value in enumerate(group_values)}
    group_names = _group_names(list(code_of_group), group_order)

    image_counts = torch.bincount(identity_codes)
    probes = torch.nonzero(image_counts[identity_codes] >= 2).squeeze(1)
    if probes.numel() == 0:
        raise ValueError("no probes: every identity has a single image (probes need identities with >= 2 images)")
    probe_group_codes = group_codes.reshape(-1)[probes.cpu().numpy()]
    group_masks = {name: probe_group_codes == code_of_group[name] for name in group_names}
    for name, in_group in group_masks.items():
        if not in_group.any():
            raise ValueError(f"group {name!r} has no probes (needs identities with >= 2 images)")

    if normalize:
        embeddings = F.normalize(embeddings, dim=1)
    ranks = (
        probe_ranks(
            embeddings,
            identity_codes,
            probes,
            rank_by=rank_by,
            normalize=normalize,
            block_size=block_size,
            score_precision=score_precision,
        )
        .cpu()
        .numpy()
    )
    metrics = _rank_summary(ranks)
    per_group = {name: _rank_summary(ranks[in_group]) for name, in_group in group_masks.items()}
    for name, summary in per_group.items():
        metrics.update({f"{key}/{name}": value for key, value in summary.items()})
    metrics.update(group_disparities(per_group, group_names))
    return metrics


@torch.no_grad()
def probe_ranks(
    embeddings: torch.Tensor,
    identity_codes: torch.Tensor,
    probes: torch.Tensor,
    *,
    rank_by: str = "identity",
    normalize: bool = True,
    block_size: int = 1024,
    score_precision: str = "auto",
) -> torch.Tensor:
    """Rank of each probe (see module docstring), computed blockwise without an N x N matrix.

    Gallery images are scored by closeness to the probe (:class:`ExactScorer`) in one fast matrix product per
    block; comparisons within the product's rounding bound of a probe's genuine score are decided in float64, so
    the ranks are exact for every ``score_precision``. Identical gallery rows are scored once and share the score
    (``_distinct_rows``), so exact ties stay exact.

    Args:
        embeddings: [N, D] float tensor, already L2-normalised when ``normalize`` is True.
        identity_codes: [N] int64 identity indices in [0, n_identities), on the embeddings' device.
        probes: [P] indices of the probe images; each identity of a probe must have >= 2 images.
        rank_by: "identity" or "image".
        normalize: whether ``embeddings`` are unit vectors (selects the score above).
        block_size: probes per block; memory is O(N * block_size).
        score_precision: the fast product's dtype, "float32", "bfloat16" or "auto" (bfloat16 on the CPU).

    Returns:
        [P] int64 ranks on the embeddings' device.
    """
    _check_rank_by(rank_by)
    n_identities = int(identity_codes.max()) + 1
    gallery, row_of_image = _distinct_rows(embeddings)
    dtype = score_dtype(score_precision, embeddings.device)
    scorer = ExactScorer(gallery, normalize=normalize, dtype=dtype)
    widest_band = WIDEST_BAND * len(embeddings) * block_size if dtype == torch.bfloat16 else torch.inf
    rows = torch.arange(len(embeddings), device=embeddings.device) if row_of_image is None else row_of_image
    members = IdentityMembers(identity_codes, n_identities)
    ranks = []
    for block in torch.split(probes, block_size):
        band, candidates = _block_candidates(scorer, members, rows, row_of_image, identity_codes, block, rank_by)
        if candidates.images.numel() > widest_band:  # embeddings too alike for bfloat16 to pay: float32 from here
            scorer, widest_band = ExactScorer(gallery, normalize=normalize, dtype=torch.float32), torch.inf
            band, candidates = _block_candidates(scorer, members, rows, row_of_image, identity_codes, block, rank_by)
        ranks.append(band.ranks(candidates))
    return torch.cat(ranks)


def _block_candidates(
    scorer: ExactScorer,
    members: IdentityMembers,
    rows: torch.Tensor,
    row_of_image: torch.Tensor | None,
    identity_codes: torch.Tensor,
    block: torch.Tensor,
    rank_by: str,
) -> tuple[GenuineBand, Candidates]:
    """One block's fast scores, exact genuine scores and the comparisons left to decide exactly."""
    columns = torch.arange(block.numel(), device=block.device)
    probe_rows = rows[block]
    scores = scorer.scores(probe_rows)
    if row_of_image is not None:
        scores = scores[row_of_image]
    scores[block, columns] = -torch.inf
    closest_per_identity = index_amax(scores, identity_codes, len(members.counts))
    own = identity_codes[block]
    fast_genuine = closest_per_identity.gather(0, own[None])[0]
    band = GenuineBand(scorer, members, rows, scores, probe_rows, own, fast_genuine)
    if rank_by == "identity":
        return band, band.identity_candidates(closest_per_identity)
    return band, band.image_candidates()


def _distinct_rows(embeddings: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor | None]:
    """The distinct rows of ``embeddings`` and, if some repeat, the distinct row of every image (else None).

    Matrix kernels (matrix-vector for a single column, edge tiles of matrix-matrix) can give bitwise-identical rows
    scores that differ in the last bit, which would break the tie rule for duplicated images. Scoring each distinct
    row once and sharing its score makes exact ties exact for every ``block_size`` and device.
    """
    distinct, row_of_image = torch.unique(embeddings, dim=0, return_inverse=True)
    if distinct.shape[0] == embeddings.shape[0]:
        return embeddings, None
    return distinct, row_of_image


def index_amax(values: torch.Tensor, row_groups: torch.Tensor, n_groups: int) -> torch.Tensor:
    """[n_groups, B] maximum of the rows of ``values`` [N, B] in each group (-inf for an empty group).

    index_reduce_ is several times faster than scatter_reduce_ with a broadcast index on CPU; torch still labels
    it beta, and its one-time warning is silenced here.
    """
    result = torch.full((n_groups, values.shape[1]), -torch.inf, dtype=values.dtype, device=values.device)
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="index_reduce\\(\\) is in beta")
        return result.index_reduce_(0, row_groups, values, "amax")


def _check_rank_by(rank_by: str) -> None:
    if rank_by not in RANK_BY_CHOICES:
        raise ValueError(f"rank_by must be one of {list(RANK_BY_CHOICES)}, got {rank_by!r}")


def _rank_summary(ranks: np.ndarray) -> dict[str, float]:
    """Error (share of probes with rank > 0), accuracy, mean rank and probe count."""
    error = float(np.mean(ranks > 0))
    return {"error": error, "accuracy": 1.0 - error, "rank": float(np.mean(ranks)), "n_probes": float(ranks.size)}


def _embedding_tensor(embeddings: np.ndarray | torch.Tensor) -> torch.Tensor:
    """A floating [N, D] tensor (float32 unless already float32/float64) on the input's device."""
    with warnings.catch_warnings():  # read-only arrays (e.g. np.load(mmap_mode="r")) are never written to here
        warnings.filterwarnings("ignore", message="The given NumPy array is not writable")
        tensor = torch.as_tensor(embeddings).detach()
    if tensor.ndim != 2:
        raise ValueError(f"embeddings must be 2-D [N, D], got shape {tuple(tensor.shape)}")
    if tensor.dtype not in (torch.float32, torch.float64):
        tensor = tensor.float()
    return tensor


def _check_finite(embeddings: torch.Tensor) -> None:
    """Refuse NaN/inf embeddings: every comparison with NaN is False, so they would rank as perfect matches."""
    finite_rows = torch.isfinite(embeddings).all(dim=1)
    if not bool(finite_rows.all()):
        n_bad = int((~finite_rows).sum())
        raise NonFiniteEmbeddingsError(
            f"embeddings: {n_bad} of {len(finite_rows)} rows hold NaN or inf values "
            "(did training diverge?); non-finite embeddings cannot be ranked"
        )


def _label_array(labels: np.ndarray | torch.Tensor | Sequence[Any], name: str, n_images: int) -> np.ndarray:
    """Labels as a 1-D numpy array of length ``n_images``."""
    array = labels.detach().cpu().numpy() if isinstance(labels, torch.Tensor) else np.asarray(labels)
    _check_label_shape(tuple(array.shape), name, n_images)
    return array


def _check_label_shape(shape: tuple[int, ...], name: str, n_images: int) -> None:
    if len(shape) != 1:
        raise ValueError(f"{name} must be 1-D, got shape {shape}")
    if shape[0] != n_images:
        raise ValueError(f"{name} has {shape[0]} labels but embeddings has {n_images} rows")


def _identity_codes(
    identities: np.ndarray | torch.Tensor | Sequence[Any], n_images: int, device: torch.device
) -> torch.Tensor:
    """Identity labels mapped to int64 codes 0..n_identities-1 on ``device``."""
    if isinstance(identities, torch.Tensor) and not identities.is_floating_point():
        _check_label_shape(tuple(identities.shape), "identities", n_images)
        return torch.unique(identities.to(device), return_inverse=True)[1]
    labels = _label_array(identities, "identities", n_images)
    codes = np.unique(labels, return_inverse=True)[1].reshape(-1)
    return torch.as_tensor(codes, dtype=torch.int64, device=device)


def _group_names(present: list[str], group_order: Sequence[Any] | None) -> list[str]:
    """The metric names (``str(label)``) of the groups to report and compare (at least two), validated against the
    ``present`` names."""
    names = present if group_order is None else [str(group) for group in group_order]
    check_disparity_groups(names)
    for name in names:
        if name not in present:
            raise ValueError(f"group {name!r} in group_order is not among the group labels {present}")
    return names
