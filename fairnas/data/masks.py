"""Facial-region masks in the generic format: one PNG label map per image, named by a ``mask`` column.

Hard masks. A data set supplies masks by adding a ``mask`` column to its ``metadata.csv`` with paths (relative to
the data set's
root) of single-channel PNG images of the image's size whose pixel value is the index of its region in
:data:`MASK_PARTS` (0 = background). The synthetic renderer writes them for every image; other data sets may ship
their own. :func:`region_maps` turns a label map into one binary map per region, for the Attention-IoU mask score.

Soft masks from five landmarks (a heuristic, for CelebA's ``list_landmarks_align_celeba.txt``): with d the
distance between the eyes, eyes are Gaussians (sigma 0.15 d) at the eye landmarks, brows Gaussians 0.3 d above
them, the nose a Gaussian (0.2 d) at its landmark, the mouth Gaussians along the segment between its corners,
skin a soft ellipse (1.1 d wide, 1.6 d high, centred between eyes and mouth) less the parts above, the
background its complement; hair, ears, glasses and hat have no landmark and stay empty (their scores are NaN).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
from PIL import Image

MASK_COLUMN = "mask"
LANDMARK_COLUMNS = (
    "lefteye_x",
    "lefteye_y",
    "righteye_x",
    "righteye_y",
    "nose_x",
    "nose_y",
    "leftmouth_x",
    "leftmouth_y",
    "rightmouth_x",
    "rightmouth_y",
)
MASK_PARTS = ("background", "skin", "hair", "ears", "eyes", "brows", "nose", "mouth", "glasses", "hat")


def read_label_map(path: str | Path) -> Image.Image:
    """The label map at ``path`` (mode L); a value outside :data:`MASK_PARTS` is an error naming the file."""
    with Image.open(path) as file:
        label = file.convert("L")
    if np.asarray(label).max() >= len(MASK_PARTS):
        raise ValueError(
            f"mask '{path}': value {int(np.asarray(label).max())} is not a region index; "
            f"allowed 0..{len(MASK_PARTS) - 1} for {list(MASK_PARTS)}"
        )
    return label


def region_maps(label: np.ndarray) -> np.ndarray:
    """[len(MASK_PARTS), H, W] float32 binary maps of a label map [H, W]."""
    return (np.asarray(label)[None] == np.arange(len(MASK_PARTS))[:, None, None]).astype(np.float32)


def landmark_region_maps(landmarks: np.ndarray, width: int, height: int) -> np.ndarray:
    """[len(MASK_PARTS), height, width] soft maps in [0, 1] from the ten LANDMARK_COLUMNS values (see above)."""
    left_eye, right_eye, nose, left_mouth, right_mouth = np.asarray(landmarks, float).reshape(5, 2)
    d = max(float(np.linalg.norm(right_eye - left_eye)), 1.0)
    y, x = np.mgrid[0:height, 0:width].astype(float)

    def blob(centre: np.ndarray, sigma: float) -> np.ndarray:
        return np.exp(-((x - centre[0]) ** 2 + (y - centre[1]) ** 2) / (2 * (sigma * d) ** 2))

    up = np.array([0.0, -0.3 * d])
    maps = np.zeros((len(MASK_PARTS), height, width))
    maps[MASK_PARTS.index("eyes")] = np.maximum(blob(left_eye, 0.15), blob(right_eye, 0.15))
    maps[MASK_PARTS.index("brows")] = np.maximum(blob(left_eye + up, 0.15), blob(right_eye + up, 0.15))
    maps[MASK_PARTS.index("nose")] = blob(nose, 0.2)
    maps[MASK_PARTS.index("mouth")] = np.max(
        [blob(left_mouth + t * (right_mouth - left_mouth), 0.12) for t in np.linspace(0, 1, 5)], axis=0
    )
    centre = (left_eye + right_eye + left_mouth + right_mouth) / 4
    radius = ((x - centre[0]) / (1.1 * d)) ** 2 + ((y - centre[1]) / (1.6 * d)) ** 2
    face = 1.0 / (1.0 + np.exp(8.0 * (radius - 1.0)))
    parts = maps[[MASK_PARTS.index(p) for p in ("eyes", "brows", "nose", "mouth")]].max(axis=0)
    maps[MASK_PARTS.index("skin")] = np.clip(face - parts, 0.0, 1.0)
    maps[MASK_PARTS.index("background")] = 1.0 - face
    return maps.astype(np.float32)
