"""Procedurally rendered synthetic faces: the embedded default data set, with controllable group bias.

``render_synthetic_faces(SyntheticFaceSpec(...), cache_dir)`` draws cartoon faces with numpy + PIL and writes
them in the generic on-disk format (``metadata.csv`` with ``path, identity, split, group``, nuisance columns and
``mask``). Every image ``images/<identity>/<nnn>.png`` has a part mask ``masks/<identity>/<nnn>.png``: a mode-L
label map of the image's size whose pixel value indexes :data:`fairnas.data.masks.MASK_PARTS` (background, skin,
hair, ears, eyes, brows, nose, mouth, glasses, hat), drawn with the same shapes as the image, which the
Attention-IoU audit reads for its mask scores. Same spec, same bytes; each spec is rendered once into
``cache_dir/<hash of the spec>``.

What makes an identity: face width/height and jaw, skin tone and warmth, eye spacing/level/size/openness and
iris colour, brow thickness/slope/gap, nose length/width, mouth position/width/lips/curvature, hair style,
colour and hairline, ear size (see ``identities.FACE_PARAMETERS``). What varies per image (recorded in
``metadata.csv``): yaw, roll, scale, illumination gain and gradient, contrast, Gaussian noise sigma and an
occluder (none/glasses/hat); background and clothing colours vary too but are not recorded.

Protected attribute. Every identity belongs to one of ``n_groups`` groups ``g0 .. g{K-1}``. Skin tone, hair
colour and iris colour have group-dependent means (overlapping ranges), so the attribute is visible, as a
demographic attribute is in real photos. With all bias knobs at their defaults the groups are equally hard.

Bias knobs (what a fairness experiment turns):

- ``train_group_share``: the share of each group among *training* identities, e.g. ``(0.8, 0.2)`` makes g1 a
  minority in training. Validation and test identities stay balanced across groups, so per-group metrics are
  comparable. Default ``None`` = balanced. This models under-representation; it only matters to trained models.
- ``hard_group`` and ``difficulty`` in [0, 1]: the hard group is intrinsically harder to identify.
  At difficulty d its identities are drawn closer to their group mean (between-identity spread scaled by
  ``1 - 0.8 d``: people look more alike), and its images get lower contrast (scaled by ``1 - 0.5 d``) and
  stronger noise (sigma scaled by ``1 + 2 d``). ``difficulty = 0`` has no effect. This models a group the
  capture pipeline or the face space serves badly; it shows up even in raw-pixel nearest-neighbour ranks.

With ``difficulty`` around 0.7 the hard group's mean rank is clearly larger than the other group's even for
raw-pixel embeddings; a skewed ``train_group_share`` adds the effect of under-representation on top for any
trained model.
"""

from fairnas.data.synthetic.dataset import METADATA_COLUMNS, METADATA_FILE, render_synthetic_faces
from fairnas.data.synthetic.identities import FACE_PARAMETERS, FaceIdentity, sample_identities
from fairnas.data.synthetic.spec import SyntheticFaceSpec

__all__ = [
    "FACE_PARAMETERS",
    "METADATA_COLUMNS",
    "METADATA_FILE",
    "FaceIdentity",
    "SyntheticFaceSpec",
    "render_synthetic_faces",
    "sample_identities",
]
