"""Image transforms: the paper's recipe of resize, random crop, horizontal flip and normalisation."""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torchvision.transforms import v2


def build_transforms(
    *,
    train: bool,
    image_size: int = 64,
    resize: int | None = None,
    random_crop: bool = True,
    hflip: float = 0.5,
    mean: Sequence[float] = (0.5, 0.5, 0.5),
    std: Sequence[float] = (0.5, 0.5, 0.5),
) -> v2.Compose:
    """Training: resize -> random crop -> flip -> normalise; evaluation: resize -> centre crop -> normalise.

    ``resize`` is the side images are resized to before cropping ``image_size`` (default: ``image_size``,
    i.e. no crop margin).
    """
    if not 16 <= image_size <= 1024:
        raise ValueError(f"data.transforms.image_size={image_size} must be in [16, 1024]")
    resize = resize or image_size
    if resize < image_size:
        raise ValueError(f"data.transforms.resize={resize} must be >= image_size={image_size}")
    if not 0.0 <= hflip <= 1.0:
        raise ValueError(f"data.transforms.hflip={hflip} must be a probability in [0, 1]")
    steps: list = [v2.ToImage(), v2.Resize((resize, resize), antialias=True)]
    if train:
        steps.append(v2.RandomCrop(image_size) if random_crop else v2.CenterCrop(image_size))
        if hflip > 0:
            steps.append(v2.RandomHorizontalFlip(hflip))
    else:
        steps.append(v2.CenterCrop(image_size))
    steps += [v2.ToDtype(torch.float32, scale=True), v2.Normalize(list(mean), list(std))]
    return v2.Compose(steps)
