"""Bias-mitigation baselines of face identification (thesis Sec. 4.5.3) and their comparison (Tables 4.4/4.6).

Flipped and Angular act on one group, named, read from an earlier run or measured during training
(:mod:`fairnas.mitigations.target_group`). Each mitigation is a config choice,
``mitigation=none|flipped|angular|sensitivenets`` (conf/mitigation/), that plugs into an extension point of
training and so composes with any backbone, head, data set and regulariser:

- Flipped: a training callback that relabels each batch (:class:`FlipGroupLabels`);
- Angular: the training step's per-sample ``margin_policy`` (:class:`GroupMargins`), also a callback;
- SensitiveNets: an ``embedder`` wrapped around the frozen pre-trained one (:class:`SensitiveNetsEmbedder`) plus
  a regulariser (:class:`SensitiveAttributeAdversary`).
"""

from fairnas.mitigations.angular import GroupMargins
from fairnas.mitigations.flipped import FlipGroupLabels
from fairnas.mitigations.sensitivenets import SensitiveAttributeAdversary, SensitiveNetsEmbedder
from fairnas.mitigations.target_group import GroupMeasurement, group_by_accuracy, pick_group

__all__ = [
    "FlipGroupLabels",
    "GroupMargins",
    "GroupMeasurement",
    "SensitiveAttributeAdversary",
    "SensitiveNetsEmbedder",
    "group_by_accuracy",
    "pick_group",
]
