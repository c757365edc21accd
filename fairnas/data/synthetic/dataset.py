"""Writing a synthetic face set to disk in the generic format, once per spec, atomically."""

from __future__ import annotations

import csv
import dataclasses
import json
import shutil
import uuid
from collections.abc import Iterable, Mapping, Sequence
from os import PathLike
from pathlib import Path

import numpy as np

from fairnas.data.masks import MASK_COLUMN
from fairnas.data.synthetic.identities import FACE_PARAMETERS, FaceIdentity, sample_identities
from fairnas.data.synthetic.rendering import render_face_with_mask, sample_conditions
from fairnas.data.synthetic.spec import RENDERER_VERSION, SyntheticFaceSpec

METADATA_FILE = "metadata.csv"
IDENTITIES_FILE = "identities.csv"
SPEC_FILE = "spec.json"
COMPLETE_MARKER = ".complete"
NUISANCE_COLUMNS = ("illumination", "light_gradient", "contrast", "yaw", "roll", "scale", "occluder", "noise")
METADATA_COLUMNS = ("path", "identity", "split", "group", *NUISANCE_COLUMNS, MASK_COLUMN)


def render_synthetic_faces(spec: SyntheticFaceSpec, cache_dir: str | PathLike[str]) -> Path:
    """Render ``spec`` under ``cache_dir/<spec.cache_key()>`` unless already complete there; return that root.

    The root holds ``images/<identity>/<nnn>.png``, their part masks ``masks/<identity>/<nnn>.png`` (mode-L label
    maps of :data:`fairnas.data.masks.MASK_PARTS` indices, see :mod:`~fairnas.data.synthetic.rendering`),
    ``metadata.csv`` (one row per image: METADATA_COLUMNS; ``mask`` is the mask's path), ``identities.csv``
    (group, split and facial parameters per identity), ``spec.json`` and a completion marker. Rendering happens
    in a hidden sibling directory that is renamed into place at the end, so an interrupted run never leaves a
    root that looks complete.
    """
    cache_dir = Path(cache_dir)
    root = cache_dir / spec.cache_key()
    if (root / COMPLETE_MARKER).is_file():
        return root
    cache_dir.mkdir(parents=True, exist_ok=True)
    staging = cache_dir / f".{root.name}.{uuid.uuid4().hex[:8]}.partial"
    staging.mkdir()
    try:
        _write_dataset(spec, staging)
        _publish(staging, root)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return root


def _publish(staging: Path, root: Path) -> None:
    """Atomically move a finished data set into place; a concurrent writer that finished first wins."""
    if root.exists() and not (root / COMPLETE_MARKER).is_file():
        shutil.rmtree(root)  # not written by this module (it never leaves an unmarked root): stale, replace it
    try:
        staging.rename(root)
    except OSError:
        if not (root / COMPLETE_MARKER).is_file():
            raise


def _write_dataset(spec: SyntheticFaceSpec, root: Path) -> None:
    identities = sample_identities(spec)
    rows = []
    for index, identity in enumerate(identities):
        for folder in ("images", "masks"):
            (root / folder / identity.name).mkdir(parents=True)
        for image_index in range(spec.images_per_identity):
            rng = np.random.default_rng([spec.seed, 1, index, image_index])
            conditions = sample_conditions(spec, identity.group, rng)
            relative_path = f"images/{identity.name}/{image_index:03d}.png"
            mask_path = f"masks/{identity.name}/{image_index:03d}.png"
            image, mask = render_face_with_mask(identity.parameters, conditions, spec.image_size, rng)
            image.save(root / relative_path, "PNG")
            mask.save(root / mask_path, "PNG")
            labels = {"path": relative_path, "identity": identity.name, "split": identity.split}
            rows.append(
                {**labels, "group": spec.group_names[identity.group], **conditions.metadata(), MASK_COLUMN: mask_path}
            )
    _write_csv(root / METADATA_FILE, METADATA_COLUMNS, rows)
    _write_csv(root / IDENTITIES_FILE, _identity_columns(), _identity_rows(spec, identities))
    spec_json = {"renderer_version": RENDERER_VERSION, **dataclasses.asdict(spec)}
    (root / SPEC_FILE).write_text(json.dumps(spec_json, indent=2, sort_keys=True) + "\n")
    (root / COMPLETE_MARKER).write_text(f"{spec.cache_key()}\n")


def _identity_columns() -> tuple[str, ...]:
    return ("identity", "group", "split", *(p.name for p in FACE_PARAMETERS))


def _identity_rows(spec: SyntheticFaceSpec, identities: Sequence[FaceIdentity]) -> list[dict[str, object]]:
    return [
        {
            "identity": identity.name,
            "group": spec.group_names[identity.group],
            "split": identity.split,
            **{name: round(value, 6) for name, value in identity.parameters.items()},
        }
        for identity in identities
    ]


def _write_csv(path: Path, columns: Sequence[str], rows: Iterable[Mapping[str, object]]) -> None:
    with path.open("w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=columns, lineterminator="\n")
        writer.writeheader()
        writer.writerows(rows)
