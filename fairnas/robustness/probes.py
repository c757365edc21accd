"""Which images of a split are attacked, and under which identity classifier.

- ``train``: every image is a probe of the trained head's classifier over the training identities.
- ``val`` / ``test`` (held-out identities): each identity enrols its first ``min(gallery_images, n - 1)`` images
  (data-set order) into a gallery template, the mean of their normalised embeddings; its remaining images are
  probes of the gallery classifier over all templates. A probe never contributes to its own template, and an
  identity with a single image is an impostor template only (as in the rank metric, probes need a second image).

Probes outside the configured group order are dropped; ``max_probes`` keeps a seeded random subset. A probe set
needs of the trained model only its :class:`EmbeddingModel`: an embedding function and the margin head's class
centres and scale, so robustness depends on no training code.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import torch
import torch.nn.functional as F
from torch.utils.data import DataLoader, Subset

from fairnas.data.dataset import FaceImageDataset
from fairnas.robustness.classifier import IdentityClassifier, pixel_normalization
from fairnas.validation import Settings


@dataclass(frozen=True)
class EmbeddingModel:
    """What robustness needs of a trained face model: ``embed`` maps normalised images [B, 3, H, W] on ``device`` to
    L2-normalised embeddings (differentiable: attacks take input gradients through it; the caller puts the networks
    behind it in evaluation mode), and the margin head's class ``centres`` [C, D] and cosine ``scale`` classify the
    training identities."""

    embed: Callable[[torch.Tensor], torch.Tensor]
    centres: torch.Tensor
    scale: float
    device: torch.device


@dataclass(frozen=True)
class ProbeSet:
    """Probes (rows of ``dataset``) with their class under ``classifier``."""

    classifier: IdentityClassifier
    dataset: FaceImageDataset
    indices: np.ndarray
    labels: np.ndarray

    @property
    def groups(self) -> np.ndarray:
        """Group index (into the data module's group order) of each probe."""
        return self.dataset.groups.numpy()[self.indices]


def check_probe_settings(gallery_images: int, max_probes: int | None) -> None:
    """Reject a non-positive ``gallery_images`` or ``max_probes`` (null: every probe) before any work."""
    Settings().integer("gallery_images", gallery_images, minimum=1)
    Settings().integer("max_probes", max_probes, minimum=1, null="all probes")


def split_enrolment(identities: np.ndarray, gallery_images: int) -> tuple[np.ndarray, np.ndarray]:
    """(enrolment rows, probe rows): per identity its first min(gallery_images, n - 1) rows enrol (n = 1: all)."""
    check_probe_settings(gallery_images, None)
    identities = np.asarray(identities)
    order = np.argsort(identities, kind="stable")
    sorted_ids = identities[order]
    starts = np.flatnonzero(np.r_[True, sorted_ids[1:] != sorted_ids[:-1]])
    counts = np.diff(np.r_[starts, len(sorted_ids)])
    position = np.arange(len(sorted_ids)) - np.repeat(starts, counts)
    enrol_count = np.repeat(np.maximum(np.minimum(gallery_images, counts - 1), 1), counts)
    is_enrolment = np.empty(len(identities), dtype=bool)
    is_enrolment[order] = position < enrol_count
    return np.flatnonzero(is_enrolment), np.flatnonzero(~is_enrolment)


def build_probe_set(
    model: EmbeddingModel,
    dataset: FaceImageDataset,
    *,
    split: str,
    gallery_images: int = 1,
    max_probes: int | None = None,
    seed: int = 0,
    batch_size: int = 64,
) -> ProbeSet:
    """The probes of ``dataset`` (a split of the data module) and their classifier; see the module docstring."""
    check_probe_settings(gallery_images, max_probes)
    labels = dataset.labels.numpy()
    mean, std = pixel_normalization(dataset.transform)
    if split == "train":
        centres, indices = model.centres, np.arange(len(dataset))
    else:
        enrolment, indices = split_enrolment(labels, gallery_images)
        centres = gallery_templates(model, dataset, enrolment, batch_size=batch_size)
    indices = indices[dataset.groups.numpy()[indices] >= 0]
    if max_probes is not None and len(indices) > max_probes:
        indices = np.sort(np.random.default_rng(seed).choice(indices, size=max_probes, replace=False))
    classifier = IdentityClassifier(model.embed, centres, model.scale, mean, std).to(model.device).eval()
    return ProbeSet(classifier, dataset, indices, labels[indices])


@torch.no_grad()
def gallery_templates(
    model: EmbeddingModel, dataset: FaceImageDataset, enrolment: np.ndarray, *, batch_size: int
) -> torch.Tensor:
    """[n_identities, D]: the mean normalised embedding of each identity's enrolment images."""
    labels = dataset.labels[enrolment].to(model.device)
    sums = torch.zeros(int(dataset.labels.max()) + 1, model.centres.shape[1], device=model.device)
    loader = DataLoader(Subset(dataset, enrolment.tolist()), batch_size=batch_size)
    start = 0
    for batch in loader:
        embeddings = model.embed(batch["image"].to(model.device))
        sums.index_add_(0, labels[start : start + len(embeddings)], embeddings)
        start += len(embeddings)
    return F.normalize(sums, dim=1)
