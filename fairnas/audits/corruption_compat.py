"""The 15 ImageNet-C corruptions of ``imagecorruptions`` 1.1.2, made to run on today's NumPy, SciPy, scikit-image
and setuptools, and seeded per call (thesis Sec. 3.3.1.1: 15 corruptions x 5 severities).

``imagecorruptions`` 1.1.2 (the reference implementation of Hendrycks & Dietterich, 2019) no longer runs as
released. The patches below are the smallest that make it run; each leaves the reference maths unchanged:

- ``from pkg_resources import resource_filename`` (setuptools >= 81 has no ``pkg_resources``): while the library
  is imported, and only when no real ``pkg_resources`` exists, a stand-in ``resource_filename`` resolves a
  resource relative to the folder of the module that names it, as ``pkg_resources`` did (``frost`` reads its
  frost pictures that way);
- ``gaussian(..., multichannel=True)`` (removed in scikit-image 0.19; ``glass_blur``): the library's ``gaussian``
  becomes one that maps ``multichannel=True`` to ``channel_axis=-1``;
- ``np.float_`` (removed in NumPy 2; ``fog``'s plasma fractal): the library's ``np`` becomes NumPy with
  ``float_ = float64`` added;
- ``skimage.util.random_noise`` now draws from its own unseeded generator (``impulse_noise``): the replacement
  passes it a seed drawn from NumPy's global generator, so that, like every other corruption, it is determined by
  the global state.

``glass_blur``'s pixel-shuffling loop runs one Python iteration per pixel; :func:`_glass_blur` does the same
sequential moves on a list of pixel indices, with the same random numbers, and gives bit-identical images (tested
against the reference loop). As in the reference, a "swap" copies the neighbour into the pixel (NumPy views make
the second half of the tuple assignment a no-op).
"""

from __future__ import annotations

import functools
import importlib
import importlib.util
import os
import sys
import types
import warnings
from collections.abc import Sequence

import numpy as np
import skimage.filters
import skimage.util
from PIL import Image

CORRUPTIONS = (
    "gaussian_noise",
    "shot_noise",
    "impulse_noise",
    "defocus_blur",
    "glass_blur",
    "motion_blur",
    "zoom_blur",
    "snow",
    "frost",
    "fog",
    "brightness",
    "contrast",
    "elastic_transform",
    "pixelate",
    "jpeg_compression",
)
"""The 15 ImageNet-C corruptions in the standard order (noise, blur, weather, digital)."""

SEVERITIES = (1, 2, 3, 4, 5)
GLASS_BLUR = [(0.7, 1, 2), (0.9, 2, 1), (1, 2, 3), (1.1, 3, 2), (1.5, 4, 2)]  # sigma, max_delta, iterations
IMPULSE_NOISE = [0.03, 0.06, 0.09, 0.17, 0.27]


def corrupt(image: np.ndarray, name: str, severity: int, seed: int | Sequence[int]) -> np.ndarray:
    """``image`` (uint8 [H, W, 3], H and W >= 32) under corruption ``name`` at ``severity`` (0: unchanged copy).

    The corruption draws from NumPy's global generator, seeded from ``SeedSequence([*seed, corruption, severity])``
    for this call only; the caller's global state is restored afterwards.
    """
    if name not in CORRUPTIONS:
        raise ValueError(f"unknown corruption {name!r}; allowed: {list(CORRUPTIONS)}")
    if severity not in (0, *SEVERITIES):
        raise ValueError(f"severity={severity!r}: an integer in 0..5")
    image = np.asarray(image)
    if image.dtype != np.uint8 or image.ndim != 3 or image.shape[2] != 3 or min(image.shape[:2]) < 32:
        raise ValueError(f"expected a uint8 image [H, W, 3] with H, W >= 32, got {image.dtype} {image.shape}")
    if severity == 0:
        return image.copy()
    entropy = [*np.atleast_1d(seed).tolist(), CORRUPTIONS.index(name), severity]
    state = np.random.get_state()
    try:
        np.random.seed(np.random.SeedSequence(entropy).generate_state(4))
        out = functions()[name](Image.fromarray(image), severity)
    finally:
        np.random.set_state(state)
    return np.uint8(out)  # as imagecorruptions.corrupt: values are clipped to [0, 255] already, then truncated


@functools.cache
def functions() -> dict:
    """name -> corruption function ``f(PIL image, severity) -> array or PIL image`` of the patched library."""
    library = _import_corruptions()
    table = {name: getattr(library, name) for name in CORRUPTIONS}
    table.update(glass_blur=_glass_blur, impulse_noise=_impulse_noise)
    return table


def _import_corruptions() -> types.ModuleType:
    """``imagecorruptions.corruptions``, imported (with a ``pkg_resources`` stand-in if needed) and patched."""
    stand_in = None
    if "pkg_resources" not in sys.modules and importlib.util.find_spec("pkg_resources") is None:
        stand_in = types.ModuleType("pkg_resources")
        stand_in.resource_filename = _resource_filename
        sys.modules["pkg_resources"] = stand_in
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)  # scipy.ndimage.interpolation
            library = importlib.import_module("imagecorruptions.corruptions")
    finally:
        if stand_in is not None and sys.modules.get("pkg_resources") is stand_in:
            del sys.modules["pkg_resources"]
    library.gaussian = _gaussian
    if not hasattr(np, "float_"):
        library.np = _NumPyWithFloat_("numpy")
    return library


def _resource_filename(module_name: str, resource: str) -> str:
    """``pkg_resources.resource_filename`` for a module on disk: ``resource`` relative to its folder."""
    module = importlib.import_module(module_name)
    return os.path.normpath(os.path.join(os.path.dirname(module.__file__), resource))


def _gaussian(image, *args, multichannel: bool | None = None, **kwargs):
    """``skimage.filters.gaussian`` accepting the removed ``multichannel=True`` (now ``channel_axis=-1``)."""
    if multichannel:
        kwargs["channel_axis"] = -1
    return skimage.filters.gaussian(image, *args, **kwargs)


class _NumPyWithFloat_(types.ModuleType):
    """NumPy with the alias ``float_ = float64`` that NumPy 2 removed."""

    float_ = np.float64

    def __getattr__(self, name: str):
        return getattr(np, name)


def _impulse_noise(x, severity=1):
    """imagecorruptions' ``impulse_noise`` with skimage's generator seeded from NumPy's global one."""
    amount = IMPULSE_NOISE[severity - 1]
    x = skimage.util.random_noise(np.array(x) / 255.0, mode="s&p", amount=amount, rng=np.random.randint(2**31))
    return np.clip(x, 0, 1) * 255


def _glass_blur(x, severity=1):
    """imagecorruptions' ``glass_blur`` with its pixel loop run on a list of pixel indices (bit-identical)."""
    sigma, delta, iterations = GLASS_BLUR[severity - 1]
    x = np.uint8(_gaussian(np.array(x) / 255.0, sigma=sigma, multichannel=True) * 255)
    height, width = x.shape[:2]
    steps = [
        (h, w)
        for _ in range(iterations)
        for h in range(height - delta, delta, -1)
        for w in range(width - delta, delta, -1)
    ]
    offsets = np.random.randint(-delta, delta, size=(len(steps), 2)).tolist()  # the loop's draws, in its order
    source = list(range(height * width))
    for (h, w), (dx, dy) in zip(steps, offsets, strict=True):
        source[h * width + w] = source[(h + dy) * width + (w + dx)]
    x = x.reshape(height * width, -1)[source].reshape(x.shape)
    return np.clip(_gaussian(x / 255.0, sigma=sigma, multichannel=True), 0, 1) * 255
