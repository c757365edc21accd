"""Drawing one synthetic face: a 2.5-D vector model posed, lit and corrupted per image (numpy + PIL.ImageDraw).

Every shape is a polygon in face-local coordinates (x right, y down, unit = image side, origin = face centre)
with a depth z. A pose maps it to the canvas: yaw squashes x by cos(yaw) and shifts raised features by
z * sin(yaw), then scale and roll act about the face centre. Faces are drawn at SUPERSAMPLE x resolution and
box-downsampled (anti-aliasing); illumination, contrast and noise are applied to the downsampled pixels.

Part masks. Every shape is drawn a second time, with the same geometry, into a label image where the pixel value
is the index in :data:`~fairnas.data.masks.MASK_PARTS` of the part it belongs to (0 = background; later shapes
overwrite earlier ones, as in the colour image): hair behind the head and the hair cap -> hair, neck and face ->
skin, ears, eyes (sclera, its outline, iris, pupil), brows, nose (wedge, nostrils), mouth (lips, lip line),
glasses (rims, temples, bridge), hat (crown, brim); clothing and the backdrop stay background. The label image is
downsampled by a majority vote over each SUPERSAMPLE x SUPERSAMPLE block (ties go to the later part in
MASK_PARTS, i.e. to the smaller facial feature), so a pixel's label is the part covering most of it.
Photometrics (illumination, contrast, noise) do not touch the labels.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping

import numpy as np
from PIL import Image, ImageDraw

from fairnas.data.masks import MASK_PARTS
from fairnas.data.synthetic.spec import SyntheticFaceSpec

SUPERSAMPLE = 4
OCCLUDERS = ("none", "glasses", "hat")  # values of the occluder column
# difficulty = 1 scales the hard group's contrast by (1 - CONTRAST_LOSS) and its noise sigma by (1 + NOISE_GAIN).
DIFFICULTY_CONTRAST_LOSS = 0.5
DIFFICULTY_NOISE_GAIN = 2.0
FACE_CENTRE = (0.5, 0.45)  # canvas position of the face centre, fractions of the image side

_SKIN = np.array([(80, 52, 36), (120, 78, 50), (175, 120, 85), (225, 180, 145), (250, 222, 200)], float)
_HAIR = np.array([(15, 12, 10), (60, 40, 25), (110, 70, 40), (165, 120, 70), (220, 190, 130)], float)
_IRIS = np.array([(60, 35, 20), (110, 75, 40), (120, 110, 60), (70, 110, 70), (70, 110, 170), (120, 130, 140)], float)
_LIPS = np.array((170, 60, 70), float)
_SCLERA = (240, 238, 232)
_DARK = (35, 25, 25)

Colour = tuple[int, int, int]


@dataclasses.dataclass(frozen=True)
class ImageConditions:
    """Per-image nuisances. ``noise`` is a sigma in units of the full intensity range; angles in degrees."""

    yaw: float
    roll: float
    scale: float
    illumination: float
    light_gradient: float
    light_angle: float
    contrast: float
    noise: float
    occluder: str
    background: Colour
    clothing: Colour
    occluder_colour: Colour

    def metadata(self) -> dict[str, float | str]:
        """The nuisance columns written per image to metadata.csv."""
        return {
            "illumination": round(self.illumination, 4),
            "light_gradient": round(self.light_gradient, 4),
            "contrast": round(self.contrast, 4),
            "yaw": round(self.yaw, 3),
            "roll": round(self.roll, 3),
            "scale": round(self.scale, 4),
            "occluder": self.occluder,
            "noise": round(self.noise, 5),
        }


def _colour(values: Iterable[float]) -> Colour:
    """The three ``values`` as an RGB colour (each truncated to an int)."""
    red, green, blue = (int(v) for v in values)
    return red, green, blue


def _random_colour(rng: np.random.Generator, low: float, high: float) -> Colour:
    return _colour(rng.uniform(low, high, size=3))


def sample_conditions(spec: SyntheticFaceSpec, group: int, rng: np.random.Generator) -> ImageConditions:
    """Draw one image's pose, lighting, noise and occluder; the hard group gets less contrast and more noise."""
    hard = spec.difficulty if group == spec.hard_group else 0.0
    draw = rng.uniform()
    occluder = "glasses" if draw < spec.glasses_prob else "hat" if draw < spec.glasses_prob + spec.hat_prob else "none"
    grey = rng.uniform(60, 220)
    return ImageConditions(
        yaw=rng.uniform(-spec.max_yaw_deg, spec.max_yaw_deg),
        roll=rng.uniform(-spec.max_roll_deg, spec.max_roll_deg),
        scale=rng.uniform(*spec.scale_range),
        illumination=rng.uniform(*spec.illumination_range),
        light_gradient=rng.uniform(0.0, spec.max_light_gradient),
        light_angle=rng.uniform(0.0, 360.0),
        contrast=1.0 - DIFFICULTY_CONTRAST_LOSS * hard,
        noise=rng.uniform(*spec.noise_range) * (1.0 + DIFFICULTY_NOISE_GAIN * hard),
        occluder=occluder,
        background=_colour(np.clip(grey + t, 0, 255) for t in rng.uniform(-25, 25, size=3)),
        clothing=_random_colour(rng, 20, 230),
        occluder_colour=_random_colour(rng, 0, 70) if occluder == "glasses" else _random_colour(rng, 30, 240),
    )


def _palette(colours: np.ndarray, position: float) -> np.ndarray:
    """Piecewise-linear colour at ``position`` in [0, 1] along ``colours``."""
    scaled = np.clip(position, 0.0, 1.0) * (len(colours) - 1)
    low = min(int(scaled), len(colours) - 2)
    return colours[low] + (scaled - low) * (colours[low + 1] - colours[low])


def _rgb(colour: np.ndarray) -> Colour:
    return _colour(np.clip(np.round(colour), 0, 255))


def _ellipse(cx: float, cy: float, rx: float, ry: float, z: float, n: int = 28) -> np.ndarray:
    t = np.linspace(0.0, 2.0 * np.pi, n, endpoint=False)
    return np.stack([cx + rx * np.cos(t), cy + ry * np.sin(t), np.full(n, z)], axis=1)


def _points(xs: np.ndarray, ys: np.ndarray, z: float) -> np.ndarray:
    return np.stack([xs, ys, np.full(len(xs), z)], axis=1)


class _Canvas:
    """Supersampled drawing surface that poses face-local points before drawing them.

    With ``labels`` it keeps a parallel label image (mode L, 0 = background) into which every shape is drawn with
    the same geometry and the index in MASK_PARTS of its ``part`` as the value.
    """

    def __init__(self, image_size: int, conditions: ImageConditions, labels: bool = False) -> None:
        self.side = image_size * SUPERSAMPLE
        self.image = Image.new("RGB", (self.side, self.side), conditions.background)
        self.draw = ImageDraw.Draw(self.image)
        self.labels = Image.new("L", (self.side, self.side), 0) if labels else None
        self._label_draw = ImageDraw.Draw(self.labels) if self.labels is not None else None
        yaw, roll = np.radians(conditions.yaw), np.radians(conditions.roll)
        self._cos_yaw, self._sin_yaw = np.cos(yaw), np.sin(yaw)
        rotation = np.array([[np.cos(roll), -np.sin(roll)], [np.sin(roll), np.cos(roll)]])
        self._linear = rotation * conditions.scale * self.side
        self._offset = np.array(FACE_CENTRE) * self.side

    def pose(self, points: np.ndarray) -> list[tuple[float, float]]:
        x = points[:, 0] * self._cos_yaw + points[:, 2] * self._sin_yaw
        posed = np.stack([x, points[:, 1]], axis=1) @ self._linear.T + self._offset
        return [tuple(p) for p in posed.tolist()]

    def width(self, fraction: float) -> int:
        return max(1, round(fraction * self.side))

    def fill(
        self, points: np.ndarray, colour: Colour, part: str, outline: Colour | None = None, width: float = 0.0
    ) -> None:
        posed = self.pose(points)
        self.draw.polygon(posed, fill=colour, outline=outline, width=self.width(width) if outline else 1)
        if self._label_draw is not None:
            label = MASK_PARTS.index(part)
            self._label_draw.polygon(posed, fill=label)
            if outline:  # separately: PIL skips an outline whose value equals the fill's
                self._label_draw.polygon(posed, outline=label, width=self.width(width))

    def ring(self, points: np.ndarray, colour: Colour, part: str, width: float) -> None:
        posed = self.pose(points)
        self.draw.polygon(posed, outline=colour, width=self.width(width))
        if self._label_draw is not None:
            self._label_draw.polygon(posed, outline=MASK_PARTS.index(part), width=self.width(width))

    def line(self, points: np.ndarray, colour: Colour, part: str, width: float) -> None:
        posed = self.pose(points)
        self.draw.line(posed, fill=colour, width=self.width(width), joint="curve")
        if self._label_draw is not None:
            self._label_draw.line(posed, fill=MASK_PARTS.index(part), width=self.width(width), joint="curve")


@dataclasses.dataclass(frozen=True)
class _Face:
    """Derived geometry and colours of one identity, shared by all its images."""

    p: Mapping[str, float]
    skin: np.ndarray
    hair: Colour
    style: int

    @classmethod
    def from_parameters(cls, p: Mapping[str, float]) -> _Face:
        warmth = (p["skin_warmth"] - 0.5) * np.array([18.0, -4.0, -16.0])
        return cls(
            p=p,
            skin=_palette(_SKIN, p["skin_tone"]) + warmth,
            hair=_rgb(_palette(_HAIR, p["hair_colour"])),
            style=min(int(p["hair_style"]), 5),
        )

    def shade(self, factor: float) -> Colour:
        return _rgb(self.skin * factor)

    def outline(self, grow: float = 1.0, n: int = 48) -> np.ndarray:
        """Face contour: an ellipse whose lower half narrows towards the chin by ``jaw``."""
        t = np.linspace(0.0, 2.0 * np.pi, n, endpoint=False)
        a, b = self.p["face_width"] * grow, self.p["face_height"] * grow
        narrowing = 1.0 - (1.0 - self.p["jaw"]) * np.clip(np.sin(t), 0.0, None)
        return _points(a * np.cos(t) * narrowing, b * np.sin(t), 0.0)

    def crown(self, grow_x: float, grow_y: float, lift: float, n: int = 24) -> np.ndarray:
        """Upper half of an enlarged head ellipse, left to right over the top."""
        t = np.linspace(np.pi, 2.0 * np.pi, n)
        a, b = self.p["face_width"] * grow_x, self.p["face_height"] * grow_y
        return _points(a * np.cos(t), b * np.sin(t) - lift, 0.0)


def _draw_hair_behind(canvas: _Canvas, face: _Face) -> None:
    a, b = face.p["face_width"], face.p["face_height"]
    if face.style == 2:  # long: a panel falling behind the neck to the shoulders
        xs = np.array([-1.15, -1.2, -1.05, 1.05, 1.2, 1.15]) * a
        ys = np.array([-0.1, 0.9, 1.25, 1.25, 0.9, -0.1]) * b
        canvas.fill(_points(xs, ys, -0.02), face.hair, "hair")
    elif face.style == 5:  # voluminous: a large halo around the head
        canvas.fill(_ellipse(0.0, -0.2 * b, 1.45 * a, 1.05 * b, -0.02), face.hair, "hair")


def _draw_hair_cap(canvas: _Canvas, face: _Face) -> None:
    if face.style == 0:  # bald
        return
    a, b = face.p["face_width"], face.p["face_height"]
    hairline = -b * (0.38 if face.style == 3 else face.p["hairline"])
    side_y = face.p["eye_level"] - 0.01
    xs = np.linspace(a, -a, 17)
    ys = hairline + (side_y - hairline) * np.abs(xs / a) ** 3
    if face.style == 3:  # fringe: jagged bangs
        ys = ys + 0.012 * (np.arange(len(xs)) % 2)
    outer = face.crown(1.07, 1.08, 0.01)
    sides = _points(np.array([1.07 * a]), np.array([side_y]), 0.0)
    cap = np.concatenate([outer, sides, _points(xs, ys, 0.0), sides * [-1, 1, 1]])
    canvas.fill(cap, face.hair, "hair")
    if face.style == 4:  # bun on top
        canvas.fill(_ellipse(0.0, -1.12 * b, 0.32 * a, 0.22 * b, 0.0), face.hair, "hair")


def _draw_eyes(canvas: _Canvas, face: _Face, iris: Colour) -> None:
    p = face.p
    rx, ry = p["eye_width"], p["eye_width"] * p["eye_openness"]
    iris_r = min(0.95 * ry, 0.55 * rx)
    for side in (-1.0, 1.0):
        cx, cy = side * p["eye_spacing"], p["eye_level"]
        canvas.fill(_ellipse(cx, cy, rx, ry, 0.06), _SCLERA, "eyes", outline=_DARK, width=0.006)
        canvas.fill(_ellipse(cx, cy, iris_r, iris_r, 0.065, n=20), iris, "eyes")
        canvas.fill(_ellipse(cx, cy, 0.45 * iris_r, 0.45 * iris_r, 0.07, n=12), _DARK, "eyes")


def _draw_brows(canvas: _Canvas, face: _Face) -> None:
    p = face.p
    colour = _rgb(np.array(face.hair) * 0.7)
    thickness = p["brow_thickness"]
    for side in (-1.0, 1.0):
        inner_x = side * (p["eye_spacing"] - 0.9 * p["eye_width"])
        outer_x = side * (p["eye_spacing"] + 1.15 * p["eye_width"])
        inner_y = p["eye_level"] - p["brow_gap"]
        outer_y = inner_y - p["brow_slope"] * abs(outer_x - inner_x)
        xs = np.array([inner_x, outer_x, outer_x, inner_x])
        ys = np.array([inner_y, outer_y, outer_y - 0.6 * thickness, inner_y - thickness])
        canvas.fill(_points(xs, ys, 0.07), colour, "brows")


def _draw_nose(canvas: _Canvas, face: _Face) -> None:
    p = face.p
    top, tip, w = p["eye_level"] + 0.015, p["eye_level"] + p["nose_length"], p["nose_width"]
    wedge = np.array([[0.0, top, 0.08], [-w, tip, 0.12], [0.0, tip + 0.006, 0.13], [w, tip, 0.12]])
    canvas.fill(wedge, face.shade(0.86), "nose")
    for side in (-1.0, 1.0):
        canvas.fill(_ellipse(side * 0.5 * w, tip - 0.004, 0.3 * w, 0.17 * w, 0.12, n=12), face.shade(0.45), "nose")


def _draw_mouth(canvas: _Canvas, face: _Face) -> None:
    p = face.p
    centre_y = p["eye_level"] + p["nose_length"] + p["mouth_gap"]
    xs = np.linspace(-p["mouth_width"], p["mouth_width"], 15)
    bulge = 1.0 - (xs / p["mouth_width"]) ** 2
    middle = centre_y + p["mouth_curve"] * bulge
    upper = _points(xs, middle - p["lip_thickness"] * np.sqrt(bulge), 0.07)
    lower = _points(xs[::-1], (middle + 1.2 * p["lip_thickness"] * np.sqrt(bulge))[::-1], 0.07)
    canvas.fill(np.concatenate([upper, lower]), _rgb(0.55 * face.skin + 0.45 * _LIPS), "mouth")
    canvas.line(_points(xs, middle, 0.07), _rgb(face.skin * 0.35), "mouth", 0.005)


def _draw_occluder(canvas: _Canvas, face: _Face, conditions: ImageConditions) -> None:
    """Draw the occluders of ``conditions.occluder``: one of OCCLUDERS, or several joined by ``+`` (e.g.
    ``glasses+hat``, drawn in that order in one colour), which only re-rendered mutations use."""
    for occluder in conditions.occluder.split("+"):
        _draw_one_occluder(canvas, face, occluder, conditions.occluder_colour)


def _draw_one_occluder(canvas: _Canvas, face: _Face, occluder: str, colour: Colour) -> None:
    p = face.p
    if occluder == "glasses":
        rx, ry = 1.5 * p["eye_width"], 1.15 * p["eye_width"]
        for side in (-1.0, 1.0):
            cx = side * p["eye_spacing"]
            canvas.ring(_ellipse(cx, p["eye_level"], rx, ry, 0.09), colour, "glasses", 0.012)
            temple = _points(
                np.array([side * (p["eye_spacing"] + rx), side * p["face_width"]]), np.full(2, p["eye_level"]), 0.05
            )
            canvas.line(temple, colour, "glasses", 0.01)
        bridge_x = p["eye_spacing"] - rx
        bridge = _points(np.array([-bridge_x, bridge_x]), np.full(2, p["eye_level"] - 0.2 * ry), 0.1)
        canvas.line(bridge, colour, "glasses", 0.01)
    elif occluder == "hat":
        brim_y = -0.5 * p["face_height"]
        canvas.fill(face.crown(1.18, 0.95, -brim_y), colour, "hat")
        canvas.fill(_ellipse(0.0, brim_y, 1.55 * p["face_width"], 0.04, 0.02), _rgb(np.array(colour) * 0.8), "hat")


def _draw_face(canvas: _Canvas, face: _Face, conditions: ImageConditions) -> None:
    a, b = face.p["face_width"], face.p["face_height"]
    _draw_hair_behind(canvas, face)
    neck = _points(np.array([-0.4, -0.45, 0.45, 0.4]) * a, np.array([0.5 * b, b + 0.12, b + 0.12, 0.5 * b]), -0.03)
    canvas.fill(neck, face.shade(0.82), "skin")
    canvas.fill(_ellipse(0.0, b + 0.3, 0.45, 0.24, -0.05), conditions.clothing, "background")
    for side in (-1.0, 1.0):
        size = face.p["ear_size"]
        ear = _ellipse(side * 0.97 * a, face.p["eye_level"] + 0.02, 0.55 * size, size, -0.01)
        canvas.fill(ear, face.shade(0.9), "ears")
    canvas.fill(face.outline(), face.shade(1.0), "skin")
    _draw_hair_cap(canvas, face)
    _draw_eyes(canvas, face, _rgb(_palette(_IRIS, face.p["iris_colour"])))
    _draw_brows(canvas, face)
    _draw_nose(canvas, face)
    _draw_mouth(canvas, face)
    _draw_occluder(canvas, face, conditions)


def _apply_photometrics(pixels: np.ndarray, conditions: ImageConditions, rng: np.random.Generator) -> np.ndarray:
    """Contrast about the mean, illumination gain with a linear gradient, additive Gaussian noise; uint8 out."""
    image = pixels.astype(np.float32) / 255.0
    image = image.mean() + conditions.contrast * (image - image.mean())
    side = image.shape[0]
    coords = np.linspace(-1.0, 1.0, side, dtype=np.float32)
    angle = np.radians(conditions.light_angle)
    ramp = np.cos(angle) * coords[None, :] + np.sin(angle) * coords[:, None]
    image = image * (conditions.illumination * (1.0 + conditions.light_gradient * ramp))[:, :, None]
    image = image + rng.normal(0.0, conditions.noise, size=image.shape).astype(np.float32)
    return np.clip(np.round(image * 255.0), 0, 255).astype(np.uint8)


def _majority_labels(labels: Image.Image) -> Image.Image:
    """Downsample a supersampled label image by SUPERSAMPLE: each pixel takes the label most frequent in its
    block, ties going to the larger index (the later part in MASK_PARTS)."""
    width, height = (n // SUPERSAMPLE for n in labels.size)
    parts = len(MASK_PARTS)
    blocks = np.asarray(labels).reshape(height, SUPERSAMPLE, width, SUPERSAMPLE).transpose(0, 2, 1, 3)
    keys = blocks.reshape(height * width, -1) + parts * np.arange(height * width)[:, None]  # (block, label): a bin
    counts = np.bincount(keys.ravel(), minlength=height * width * parts).reshape(height, width, parts)
    return Image.fromarray((parts - 1 - counts[:, :, ::-1].argmax(axis=2)).astype(np.uint8))


def _render(
    parameters: Mapping[str, float],
    conditions: ImageConditions,
    image_size: int,
    rng: np.random.Generator,
    with_mask: bool,
) -> tuple[Image.Image, Image.Image | None]:
    canvas = _Canvas(image_size, conditions, labels=with_mask)
    _draw_face(canvas, _Face.from_parameters(parameters), conditions)
    pixels = np.asarray(canvas.image.reduce(SUPERSAMPLE))
    image = Image.fromarray(_apply_photometrics(pixels, conditions, rng))
    return image, _majority_labels(canvas.labels) if canvas.labels is not None else None  # labels iff with_mask


def render_face(
    parameters: Mapping[str, float], conditions: ImageConditions, image_size: int, rng: np.random.Generator
) -> Image.Image:
    """Render one ``image_size`` x ``image_size`` RGB face of an identity under ``conditions``; ``rng`` draws noise."""
    return _render(parameters, conditions, image_size, rng, with_mask=False)[0]


def render_face_with_mask(
    parameters: Mapping[str, float], conditions: ImageConditions, image_size: int, rng: np.random.Generator
) -> tuple[Image.Image, Image.Image]:
    """:func:`render_face`'s image (the same bytes) and its part mask: an ``image_size`` x ``image_size`` mode-L
    label map whose pixel value is the index in MASK_PARTS of the part covering most of the pixel."""
    image, mask = _render(parameters, conditions, image_size, rng, with_mask=True)
    assert mask is not None  # with_mask=True
    return image, mask
