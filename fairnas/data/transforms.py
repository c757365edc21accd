"""Image transforms: the paper's recipe of resize, random crop, horizontal flip and normalisation.

The recipe runs in two parts. :func:`resize_transform` decodes an image and resizes it to ``resize`` x ``resize``
(uint8); the in-memory path runs it once per image and caches the result, the file path runs it per item in the
DataLoader. :class:`BatchTransform` does the rest on whole batches, on the model's device: training takes a random
``image_size`` crop and a horizontal flip of every image, evaluation the centre crop; both end in float32 scaled to
[0, 1] and normalised by ``mean`` / ``std``. A training image's crop and flip are drawn for every image of the split
at once from a generator seeded with (seed, epoch), so they depend only on (seed, epoch, image index): the same
whichever path loaded the pixels, however many DataLoader workers there were, and whether or not the run was resumed.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

import numpy as np
import torch
from torchvision.transforms import v2
from torchvision.transforms.v2 import functional as F

AUGMENTATION_STREAM = 0xA06
"""Spawn key that keeps the augmentation seeds apart from the (seed, epoch) shuffling seeds."""


@dataclasses.dataclass(frozen=True)
class TransformSettings:
    """``data.transforms``, checked: ``resize`` is the side images are resized to before an ``image_size`` crop
    (default ``image_size``: no crop margin)."""

    image_size: int = 64
    resize: int | None = None
    random_crop: bool = True
    hflip: float = 0.5
    mean: Sequence[float] = (0.5, 0.5, 0.5)
    std: Sequence[float] = (0.5, 0.5, 0.5)

    @property
    def resize_side(self) -> int:
        """``resize`` as ``__post_init__`` resolved it: an int, never None once the settings exist."""
        assert self.resize is not None
        return self.resize

    def __post_init__(self) -> None:
        if not 16 <= self.image_size <= 1024:
            raise ValueError(f"data.transforms.image_size={self.image_size} must be in [16, 1024]")
        resize = self.resize or self.image_size
        object.__setattr__(self, "resize", resize)
        if resize < self.image_size:
            raise ValueError(f"data.transforms.resize={resize} must be >= image_size={self.image_size}")
        if not 0.0 <= self.hflip <= 1.0:
            raise ValueError(f"data.transforms.hflip={self.hflip} must be a probability in [0, 1]")
        object.__setattr__(self, "mean", [float(value) for value in self.mean])
        object.__setattr__(self, "std", [float(value) for value in self.std])


def resize_transform(resize: int) -> v2.Compose:
    """PIL image -> uint8 tensor [3, resize, resize] (antialiased): the part of the recipe done once per image."""
    return v2.Compose([v2.ToImage(), v2.Resize((resize, resize), antialias=True)])


def eval_transforms(**transforms) -> v2.Compose:
    """PIL image -> the normalised evaluation tensor [3, image_size, image_size] (resize, centre crop, normalise):
    what :class:`BatchTransform` gives for evaluation, one image at a time (audits, benchmarks)."""
    settings = TransformSettings(**transforms)
    return v2.Compose(
        [
            resize_transform(settings.resize_side),
            v2.CenterCrop(settings.image_size),
            v2.ToDtype(torch.float32, scale=True),
            v2.Normalize(settings.mean, settings.std),
        ]
    )


class BatchTransform:
    """The batched part of the recipe for one split of ``n_images`` resized uint8 images [B, 3, resize, resize].

    :meth:`train` crops and flips every image as :meth:`draws` says for its (epoch, index); :meth:`eval` takes the
    centre crop. The draws of the last epoch asked for are kept on the device they were last asked for, so each
    epoch draws once and copies them once: a batch looks its images' draws up where its indices are, with no
    device-to-host read that would wait for the GPU.
    """

    def __init__(self, settings: TransformSettings, n_images: int, seed: int = 0):
        self.settings, self.n_images, self.seed = settings, n_images, seed
        self._kept: dict[tuple[int, torch.device], tuple[torch.Tensor, torch.Tensor, torch.Tensor]] = {}

    def draws(self, epoch: int, device: torch.device | str = "cpu") -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """(top, left, flip) of every image in ``epoch``, on ``device``: crop offsets (uniform over the margin when
        ``random_crop``, else centred) and whether it is mirrored (probability ``hflip``)."""
        key = (epoch, torch.device(device))
        if key not in self._kept:
            settings, n = self.settings, self.n_images
            generator = torch.Generator().manual_seed(mix_seed(self.seed, epoch, AUGMENTATION_STREAM))
            margin = settings.resize_side - settings.image_size
            if settings.random_crop:
                top, left = torch.randint(0, margin + 1, (2, n), generator=generator)
            else:
                top = left = torch.full((n,), int(round(margin / 2.0)))
            flip = torch.rand(n, generator=generator) < settings.hflip
            self._kept = {key: (top.to(key[1]), left.to(key[1]), flip.to(key[1]))}
        return self._kept[key]

    def train(self, pixels: torch.Tensor, index: torch.Tensor, epoch: int) -> torch.Tensor:
        """Random crop + flip of each image as drawn for (``epoch``, its ``index``), then normalised."""
        top, left, flip = (values[index].to(pixels.device) for values in self.draws(epoch, index.device))
        return self._normalise(crop_and_flip(pixels, top, left, flip, self.settings.image_size))

    def eval(self, pixels: torch.Tensor) -> torch.Tensor:
        """Centre crop, then normalised."""
        return self._normalise(F.center_crop(pixels, [self.settings.image_size] * 2))

    def _normalise(self, pixels: torch.Tensor) -> torch.Tensor:
        return F.normalize(F.to_dtype(pixels, torch.float32, scale=True), self.settings.mean, self.settings.std)


def crop_and_flip(
    pixels: torch.Tensor, top: torch.Tensor, left: torch.Tensor, flip: torch.Tensor, size: int
) -> torch.Tensor:
    """[B, C, size, size]: image b cropped at (top[b], left[b]) and mirrored left-right where flip[b], in one
    gather of rows and one of columns (no per-image loop)."""
    batch, channels, _, width = pixels.shape
    steps = torch.arange(size, device=pixels.device)
    rows = (top[:, None] + steps).view(batch, 1, size, 1).expand(batch, channels, size, width)
    columns = left[:, None] + torch.where(flip[:, None], size - 1 - steps, steps)
    cropped = pixels.gather(2, rows)
    return cropped.gather(3, columns.view(batch, 1, 1, size).expand(batch, channels, size, size))


def mix_seed(*values: int) -> int:
    """A 63-bit seed from several integers (stable across processes, unlike ``hash``)."""
    return int(np.random.SeedSequence([int(value) for value in values]).generate_state(1, dtype=np.uint64)[0] >> 1)
