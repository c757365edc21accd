"""Closed-gallery identification of one split's probes, shared by the audits that perturb probes.

Every identity of the split enrols its first ``min(gallery_images, n - 1)`` clean images into a template (the
mean of their L2-normalised embeddings, as in :mod:`fairnas.robustness.probes`); its other images are probes.
Perturbed probes (corrupted, re-rendered) are identified against these clean templates by cosine similarity:
the prediction is the most similar template and the rank of the true identity is 1 + the number of templates
more similar than it. Images enter as uint8 arrays [H, W, 3] after the evaluation pipeline's geometry (resize,
centre crop), so a perturbation acts on exactly the pixels the model sees.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

import numpy as np
import torch
import torch.nn.functional as F
from PIL import Image
from torchvision.transforms import v2

from fairnas.audits.base import AuditData, AuditedModel
from fairnas.robustness.probes import split_enrolment


class PixelPipeline:
    """The evaluation transform of a data module split in two: ``geometry`` (file -> uint8 [H, W, 3] after resize
    and centre crop) and ``to_tensor`` (uint8 arrays -> the normalised batch the model takes)."""

    def __init__(self, transforms: dict):
        self.image_size = int(transforms.get("image_size", 112))
        self.resize = int(transforms.get("resize") or self.image_size)
        self._geometry = v2.Compose(
            [v2.Resize((self.resize, self.resize), antialias=True), v2.CenterCrop(self.image_size)]
        )
        self._normalise = v2.Normalize(
            list(transforms.get("mean", (0.5,) * 3)), list(transforms.get("std", (0.5,) * 3))
        )

    def geometry(self, image: Image.Image | np.ndarray) -> np.ndarray:
        """uint8 [H, W, 3] of an image (a PIL image or an array of any size), resized and centre-cropped."""
        if isinstance(image, np.ndarray):
            image = Image.fromarray(np.ascontiguousarray(image, dtype=np.uint8))
        return np.asarray(self._geometry(image.convert("RGB")), dtype=np.uint8)

    def load(self, path) -> np.ndarray:
        with Image.open(path) as file:
            return self.geometry(file.convert("RGB"))

    def to_tensor(self, images: Sequence[np.ndarray]) -> torch.Tensor:
        batch = torch.from_numpy(np.stack([np.asarray(image, dtype=np.uint8) for image in images]))
        return self._normalise(batch.permute(0, 3, 1, 2).float() / 255.0)


@torch.no_grad()
def embed_arrays(
    model: AuditedModel, pipeline: PixelPipeline, images: Sequence[np.ndarray], batch_size: int = 64
) -> torch.Tensor:
    """[N, D] L2-normalised embeddings (on the CPU) of uint8 images, in batches of ``batch_size``."""
    out = []
    for start in range(0, len(images), batch_size):
        batch = pipeline.to_tensor(images[start : start + batch_size]).to(model.device)
        out.append(F.normalize(model.embed(batch).float(), dim=1).cpu())
    return torch.cat(out) if out else torch.zeros(0, 0)


@dataclasses.dataclass(frozen=True)
class Gallery:
    """Clean templates of a split and its probes.

    ``labels[i]``: class index (into ``templates``) of row ``i`` of the split's frame; ``probe_rows``: the rows
    that are probes (sorted, groups outside the group order dropped); ``clean``: the uint8 images of the probes,
    in ``probe_rows`` order; ``clean_embeddings`` their embeddings.
    """

    templates: torch.Tensor
    labels: np.ndarray
    probe_rows: np.ndarray
    clean: list[np.ndarray]
    clean_embeddings: torch.Tensor

    def identify(self, embeddings: torch.Tensor, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(predicted class, rank of the true class, 1 = best) of embeddings of the split's ``rows``."""
        scores = embeddings @ self.templates.T
        truth = torch.as_tensor(self.labels[rows])
        true_score = scores.gather(1, truth[:, None])
        rank = 1 + (scores > true_score).sum(dim=1)
        return scores.argmax(dim=1).numpy(), rank.numpy()


def cap_per_group(rows: np.ndarray, groups: np.ndarray, max_per_group: int | None, seed: int) -> np.ndarray:
    """A seeded random subset of at most ``max_per_group`` of ``rows`` per group (sorted); ``None`` keeps all."""
    if max_per_group is None:
        return np.sort(rows)
    rng = np.random.default_rng(seed)
    kept = [
        rng.choice(rows[groups == g], size=min(max_per_group, int((groups == g).sum())), replace=False)
        for g in np.unique(groups)
    ]
    return np.sort(np.concatenate(kept)) if kept else rows[:0]


def enrol_gallery(
    model: AuditedModel,
    data: AuditData,
    pipeline: PixelPipeline,
    *,
    gallery_images: int = 1,
    max_probes_per_group: int | None = None,
) -> Gallery:
    """Clean templates from each identity's enrolment images; probes capped per group (seeded by ``data.seed``)."""
    frame = data.frame
    labels = np.unique(frame["identity"].to_numpy(), return_inverse=True)[1]
    enrolment, probes = split_enrolment(labels, gallery_images)
    groups = data.datamodule.group_index(frame)
    probes = probes[groups[probes] >= 0]
    probes = cap_per_group(probes, groups[probes], max_probes_per_group, data.seed)
    images = {row: pipeline.load(data.root / frame["path"].iloc[row]) for row in (*enrolment, *probes)}
    enrolled = embed_arrays(model, pipeline, [images[row] for row in enrolment], data.batch_size)
    sums = torch.zeros(int(labels.max()) + 1, enrolled.shape[1]).index_add_(
        0, torch.as_tensor(labels[enrolment]), enrolled
    )
    clean = [images[row] for row in probes]
    return Gallery(
        F.normalize(sums, dim=1), labels, probes, clean, embed_arrays(model, pipeline, clean, data.batch_size)
    )
