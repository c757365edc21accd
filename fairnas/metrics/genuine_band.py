"""Exact rank decisions for one block of probes from fast scores and their error bound (Eq. 4.1).

With fast scores ŝ within t of the exact scores s (:class:`~fairnas.metrics.exact_scores.ExactScorer`):

1. the exact genuine score g of a probe is the float64 maximum over the probe's own-identity images whose ŝ is
   within 2t of their fast maximum (the true maximiser always is);
2. an image with ŝ > g + t is certainly closer than g, one with ŝ < g - t certainly is not, and only the images
   in between (the band) are rescored exactly; own-identity images never count, as s <= g for them.

By identity, an identity counts when its fast maximum exceeds g + t, or when one of its band images is exactly
closer; only identities whose fast maximum lies in the band are looked into.
"""

from __future__ import annotations

from typing import NamedTuple

import torch

from fairnas.metrics.exact_scores import ExactScorer, at_least, at_most


class Candidates(NamedTuple):
    """What one block's band leaves to decide exactly: per probe column the ``certain`` count, and band ``images``
    (with their probe ``columns``) that each make their ``owners`` entry count if exactly closer; an owner (an image,
    or an identity-probe pair) counts once, in the probe column ``owner_columns[owner]``."""

    certain: torch.Tensor
    images: torch.Tensor
    columns: torch.Tensor
    owners: torch.Tensor
    owner_columns: torch.Tensor


class IdentityMembers:
    """The images of each identity, as contiguous runs of one sorted index."""

    def __init__(self, identity_codes: torch.Tensor, n_identities: int) -> None:
        self.order = torch.argsort(identity_codes, stable=True)
        self.counts = torch.bincount(identity_codes, minlength=n_identities)
        self.starts = torch.cumsum(self.counts, dim=0) - self.counts

    def images_of(self, identities: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Every image of each listed identity: (image indices, the position in ``identities`` each belongs to)."""
        counts = self.counts[identities]
        owner = torch.repeat_interleave(torch.arange(identities.numel(), device=identities.device), counts)
        first = torch.repeat_interleave(torch.cumsum(counts, dim=0) - counts, counts)
        offsets = torch.arange(owner.numel(), device=owner.device) - first
        return self.order[self.starts[identities][owner] + offsets], owner


class GenuineBand:
    """One block's exact genuine scores and band edges; it turns fast scores into exact ranks (``ranks`` of the
    ``image_candidates`` or ``identity_candidates``).

    Args:
        scorer: the block's scorer (fast scores, their bound, exact rescoring).
        members: the images of each identity.
        rows: [N] the distinct gallery row of each image.
        scores: [N, B] fast scores of every image against the block's probes, the probes' own entries -inf.
        probe_rows: [B] the distinct gallery row of each probe.
        own: [B] each probe's identity code.
        fast_genuine: [B] the fast maximum score of each probe's own identity.
    """

    def __init__(
        self,
        scorer: ExactScorer,
        members: IdentityMembers,
        rows: torch.Tensor,
        scores: torch.Tensor,
        probe_rows: torch.Tensor,
        own: torch.Tensor,
        fast_genuine: torch.Tensor,
    ) -> None:
        self.scorer, self.members, self.rows, self.scores = scorer, members, rows, scores
        self.probe_rows, self.own = probe_rows, own
        tolerance = scorer.tolerance(probe_rows)
        images, column = members.images_of(own)
        near = scores[images, column].double() >= (fast_genuine.double() - 2 * tolerance)[column]
        images, column = images[near], column[near]
        exact = self._exact(images, column)
        self.genuine = torch.full_like(tolerance, -torch.inf).scatter_reduce_(0, column, exact, "amax")
        self.low = at_most(self.genuine - tolerance, scores.dtype)
        self.high = at_least(self.genuine + tolerance, scores.dtype)

    def image_candidates(self) -> Candidates:
        """By image: the images certainly closer, and the band images of other identities to rescore."""
        certain = self.scores > self.high
        images, column = ((self.scores >= self.low) & ~certain).nonzero(as_tuple=True)
        owners = torch.arange(images.numel(), device=images.device)
        return Candidates(certain.sum(dim=0), images, column, owners, column)

    def identity_candidates(self, closest_per_identity: torch.Tensor) -> Candidates:
        """By identity: the identities certainly closer, and the band images of the other identities whose fast
        maximum lies in the band (each such identity counts once if any of its images is exactly closer)."""
        certain = closest_per_identity > self.high
        unsure = (closest_per_identity >= self.low) & ~certain
        unsure[self.own, torch.arange(self.own.numel(), device=self.own.device)] = False
        identity, identity_column = unsure.nonzero(as_tuple=True)
        images, owners = self.members.images_of(identity)
        in_band = self.scores[images, identity_column[owners]] >= self.low[identity_column[owners]]
        images, owners = images[in_band], owners[in_band]
        return Candidates(certain.sum(dim=0), images, identity_column[owners], owners, identity_column)

    def ranks(self, candidates: Candidates) -> torch.Tensor:
        """[B] exact ranks: the certain count plus the candidates' owners with an image exactly closer."""
        closer = self._exact(candidates.images, candidates.columns) > self.genuine[candidates.columns]
        counted = torch.unique(candidates.owners[closer])
        extra = torch.bincount(candidates.owner_columns[counted], minlength=self.genuine.numel())
        return candidates.certain + extra

    def _exact(self, images: torch.Tensor, column: torch.Tensor) -> torch.Tensor:
        return self.scorer.exact(self.rows[images], self.probe_rows[column])
