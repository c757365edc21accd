"""Tiny copies of the real data sets' on-disk layouts (file names, columns, text formats), written by the tests.

No test functions here: the format, evaluation and probe tests import these writers.
"""

from __future__ import annotations

import io
import pickle
from pathlib import Path

import numpy as np
from PIL import Image

CELEBA_ATTRIBUTES = [
    "5_o_Clock_Shadow",
    "Arched_Eyebrows",
    "Attractive",
    "Bags_Under_Eyes",
    "Bald",
    "Bangs",
    "Big_Lips",
    "Big_Nose",
    "Black_Hair",
    "Blond_Hair",
    "Blurry",
    "Brown_Hair",
    "Bushy_Eyebrows",
    "Chubby",
    "Double_Chin",
    "Eyeglasses",
    "Goatee",
    "Gray_Hair",
    "Heavy_Makeup",
    "High_Cheekbones",
    "Male",
    "Mouth_Slightly_Open",
    "Mustache",
    "Narrow_Eyes",
    "No_Beard",
    "Oval_Face",
    "Pale_Skin",
    "Pointy_Nose",
    "Receding_Hairline",
    "Rosy_Cheeks",
    "Sideburns",
    "Smiling",
    "Straight_Hair",
    "Wavy_Hair",
    "Wearing_Earrings",
    "Wearing_Hat",
    "Wearing_Lipstick",
    "Wearing_Necklace",
    "Wearing_Necktie",
    "Young",
]
RACES = ("African", "Asian", "Caucasian", "Indian")


def jpeg_bytes(rng: np.random.Generator, size: tuple[int, int] = (20, 24)) -> bytes:
    """A small random JPEG (width, height = ``size``)."""
    buffer = io.BytesIO()
    Image.fromarray(rng.integers(0, 255, (size[1], size[0], 3), dtype=np.uint8)).save(buffer, format="JPEG")
    return buffer.getvalue()


def write_image(path: Path, rng: np.random.Generator) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(jpeg_bytes(rng))


def write_folders(root: Path, n_identities: int = 24, images_per_identity: int = 5, seed: int = 0) -> Path:
    """``data=folders``: ``<root>/<identity>/<k>.jpg`` and ``attributes.csv`` (identity, then female, male alternating
    in the columns group, the option's default attribute, and gender, as ``experiment=folders_paper`` reads it)."""
    rng = np.random.default_rng(seed)
    for k in range(n_identities):
        for image in range(images_per_identity):
            write_image(root / f"person{k:03d}" / f"{image}.jpg", rng)
    rows = [f"person{k:03d},{('female', 'male')[k % 2]},{('female', 'male')[k % 2]}" for k in range(n_identities)]
    (root / "attributes.csv").write_text("identity,group,gender\n" + "\n".join(rows) + "\n")
    return root


def write_generic(root: Path, n_identities: int = 20, images_per_identity: int = 4, seed: int = 0) -> Path:
    """``data=generic``: ``<root>/images/<identity>_<k>.jpg`` and ``metadata.csv`` (path, identity, split: the first
    60% of identities train, then 20% val, 20% test; group: g0, g1 alternating)."""
    rng = np.random.default_rng(seed)
    rows = []
    for k in range(n_identities):
        split = "train" if k < 0.6 * n_identities else ("val" if k < 0.8 * n_identities else "test")
        for image in range(images_per_identity):
            path = f"images/id{k:03d}_{image}.jpg"
            write_image(root / path, rng)
            rows.append(f"{path},id{k:03d},{split},g{k % 2}")
    (root / "metadata.csv").write_text("path,identity,split,group\n" + "\n".join(rows) + "\n")
    return root


def write_celeba(
    root: Path, n_identities: int = 20, images_per_identity: int = 4, seed: int = 0, landmarks: bool = False
) -> dict:
    """CelebA's four files and ``img_align_celeba/`` (and, with ``landmarks``, the landmark file: eyes at (69, 109)
    and (106, 113) shifted by the image number mod 3, as in the real file's header and column order). Identity
    ``101 + k`` is male for even k; the official partition puts the first 60% of identities in train, then 20% val,
    20% test. Returns ``{identity: male}``."""
    rng = np.random.default_rng(seed)
    identities, attributes, partition = [], [], []
    male = {}
    for k in range(n_identities):
        identity = str(101 + k)
        male[identity] = k % 2 == 0
        code = 0 if k < 0.6 * n_identities else (1 if k < 0.8 * n_identities else 2)
        for _ in range(images_per_identity):
            image = f"{len(identities) + 1:06d}.jpg"
            write_image(root / "img_align_celeba" / image, rng)
            identities.append(f"{image} {identity}")
            values = rng.choice([-1, 1], size=len(CELEBA_ATTRIBUTES))
            values[CELEBA_ATTRIBUTES.index("Male")] = 1 if male[identity] else -1
            attributes.append(f"{image} " + " ".join(f"{value:>2}" for value in values))
            partition.append(f"{image} {code}")
    (root / "identity_CelebA.txt").write_text("\n".join(identities) + "\n")
    (root / "list_attr_celeba.txt").write_text(
        f"{len(attributes)}\n" + " ".join(CELEBA_ATTRIBUTES) + " \n" + "\n".join(attributes) + "\n"
    )
    (root / "list_eval_partition.txt").write_text("\n".join(partition) + "\n")
    if landmarks:
        header = (
            "lefteye_x lefteye_y righteye_x righteye_y nose_x nose_y leftmouth_x leftmouth_y rightmouth_x rightmouth_y"
        )
        rows = [
            f"{line.split()[0]} " + " ".join(str(v + n % 3) for v in (69, 109, 106, 113, 77, 142, 73, 152, 108, 154))
            for n, line in enumerate(identities)
        ]
        (root / "list_landmarks_align_celeba.txt").write_text(f"{len(rows)}\n{header}\n" + "\n".join(rows) + "\n")
    return male


def write_vggface2(root: Path, n_train: int = 16, n_test: int = 8, images_per_identity: int = 4, seed: int = 0) -> None:
    """``train/``, ``test/`` and ``identity_meta.csv`` (one name with an unquoted comma, as in the real file).
    Identities alternate m / f; train identities come first (n000001...), then test identities."""
    rng = np.random.default_rng(seed)
    meta = ["Class_ID, Name, Sample_Num, Flag, Gender"]
    for k in range(n_train + n_test):
        identity, folder = f"n{k + 1:06d}", "train" if k < n_train else "test"
        for image in range(images_per_identity):
            write_image(root / folder / identity / f"{image + 1:04d}_01.jpg", rng)
        name = "Smith, Jr._John" if k == 0 else f'"Person_{k}"'
        meta.append(f"{identity}, {name}, {images_per_identity}, {int(folder == 'train')}, {'mf'[k % 2]}")
    (root / "identity_meta.csv").write_text("\n".join(meta) + "\n")


def write_rfw(root: Path, identities_per_race: int = 6, images_per_identity: int = 3, seed: int = 0) -> None:
    """RFW's ``test/`` folder: ``data/<race>/<id>/<id>_000i.jpg`` and ``txts/<race>/<race>_pairs.txt`` with 10
    folds of 2 matched then 2 mismatched pairs (no header)."""
    rng = np.random.default_rng(seed)
    for race in RACES:
        names = [f"m.0{race[:2].lower()}{k}" for k in range(identities_per_race)]
        for name in names:
            for image in range(images_per_identity):
                write_image(root / "data" / race / name / f"{name}_{image + 1:04d}.jpg", rng)
        lines = []
        for fold in range(10):
            first, second = names[fold % len(names)], names[(fold + 1) % len(names)]
            lines += [f"{first}\t1\t2", f"{second}\t2\t3", f"{first}\t1\t{second}\t2", f"{second}\t3\t{first}\t3"]
        (root / "txts" / race).mkdir(parents=True, exist_ok=True)
        (root / "txts" / race / f"{race}_pairs.txt").write_text("\n".join(lines) + "\n")


def write_lfw(root: Path, seed: int = 0) -> None:
    """LFW: ``lfw/<name>/<name>_000i.jpg`` and ``pairs.txt`` with the header ``2 3`` (2 folds of 3 + 3 pairs)."""
    rng = np.random.default_rng(seed)
    names = ["Aaron_Peirsol", "Abel_Pacheco", "Akhmed_Zakayev", "Amber_Tamblyn"]
    for name in names:
        for image in range(3):
            write_image(root / "lfw" / name / f"{name}_{image + 1:04d}.jpg", rng)
    lines = ["2\t3"]
    for fold in range(2):
        a, b = names[2 * fold], names[2 * fold + 1]
        lines += [f"{a}\t1\t2", f"{a}\t2\t3", f"{b}\t1\t3", f"{a}\t1\t{b}\t1", f"{a}\t3\t{b}\t2", f"{b}\t3\t{a}\t2"]
    (root / "pairs.txt").write_text("\n".join(lines) + "\n")


def write_bin(path: Path, n_pairs: int = 20, broken: tuple[int, ...] = (), seed: int = 0) -> list[bool]:
    """An insightface-style packed benchmark: pickled (encoded images, is-same list), pairs alternating
    same/different; images listed in ``broken`` are garbage bytes. Returns the is-same list."""
    rng = np.random.default_rng(seed)
    images = [b"not an image" if index in broken else jpeg_bytes(rng) for index in range(2 * n_pairs)]
    same = [pair % 2 == 0 for pair in range(n_pairs)]
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(pickle.dumps((images, same), protocol=2))
    return same
