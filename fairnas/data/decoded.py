"""Decoded images of a split, cached: every image decoded and resized once into one uint8 array [N, 3, R, R].

The array is written to ``<cache_dir>/<key>.npy`` (atomically) and memory-mapped by later runs, which then read
batches from it instead of opening image files; processes that map the same file (search workers, DDP ranks) share
its pages. The key covers the data set's folder, the resize side and every image's path, size and modification
time, so a changed or replaced image leads to a new file (old ones stay until the cache folder is deleted).
Without a writable ``cache_dir`` the images are decoded into memory for this process only.
"""

from __future__ import annotations

import hashlib
import logging
import time
from collections.abc import Sequence
from pathlib import Path

import numpy as np
from torch.utils.data import DataLoader

from fairnas.data.dataset import FaceImageDataset, UnreadableImageError
from fairnas.data.transforms import resize_transform
from fairnas.io import atomic_path

log = logging.getLogger(__name__)

FORMAT_VERSION = 1
DECODE_BATCH = 256


def decoded_bytes(n_images: int, resize: int) -> int:
    """Size of ``n_images`` decoded at ``resize`` x ``resize`` (uint8 RGB)."""
    return n_images * 3 * resize * resize


def decoded_images(
    root: str | Path, paths: Sequence[str], resize: int, cache_dir: str | Path | None = None, num_workers: int = 0
) -> np.ndarray:
    """uint8 [len(paths), 3, resize, resize]: the images ``paths`` (relative to ``root``) decoded and resized
    (:func:`~fairnas.data.transforms.resize_transform`), memory-mapped from the cache when it holds them."""
    root = Path(root)
    if cache_dir is None:
        return _decode(root, paths, resize, np.empty((len(paths), 3, resize, resize), np.uint8), num_workers)
    file = Path(cache_dir).expanduser() / f"{cache_key(root, paths, resize)}.npy"
    if not file.is_file():
        try:
            with atomic_path(file) as tmp:
                pixels = np.lib.format.open_memmap(
                    tmp, mode="w+", dtype=np.uint8, shape=(len(paths), 3, resize, resize)
                )
                _decode(root, paths, resize, pixels, num_workers)
                pixels.flush()
                del pixels
        except OSError as error:  # a read-only or full cache: decode for this run only
            log.warning(
                "data: cannot cache decoded images in %s (%s); decoding them for this run only", file.parent, error
            )
            return decoded_images(root, paths, resize, None, num_workers)
    return np.load(file, mmap_mode="r")


def cache_key(root: Path, paths: Sequence[str], resize: int) -> str:
    """A digest of what the decoded array depends on: folder, resize side, and each image's path, size and mtime."""
    digest = hashlib.sha256(f"{FORMAT_VERSION}|{root.resolve()}|{resize}".encode())
    for path in paths:
        try:
            stat = (root / path).stat()
        except OSError as error:
            raise UnreadableImageError(f"data: cannot read image '{root / path}' ({error.strerror})") from None
        digest.update(f"|{path}|{stat.st_size}|{stat.st_mtime_ns}".encode())
    return digest.hexdigest()[:24]


def _decode(root: Path, paths: Sequence[str], resize: int, out: np.ndarray, num_workers: int) -> np.ndarray:
    """Fill ``out`` with the decoded images, ``DECODE_BATCH`` at a time from ``num_workers`` DataLoader workers."""
    start = time.perf_counter()
    zeros = np.zeros(len(paths), dtype=np.int64)
    images = FaceImageDataset(root, list(paths), zeros, zeros, resize_transform(resize))
    for batch in DataLoader(images, batch_size=DECODE_BATCH, num_workers=num_workers):
        out[int(batch["index"][0]) : int(batch["index"][-1]) + 1] = batch["image"].numpy()
    log.info("data: decoded %d images of %s at %d px in %.1f s", len(paths), root, resize, time.perf_counter() - start)
    return out
