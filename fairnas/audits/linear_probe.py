"""Linear probes of the protected attribute on frozen features (thesis Sec. 4.5.7, Table 4.9; Alain & Bengio, 2016).

A probe is a softmax classifier g = softmax(W y_k + b) fitted to predict an image's protected group from the
representation y_k of layer k, for the backbone's last two stages k = N - 1 and N (their feature maps, globally
average-pooled) and for the face embedding itself. Its accuracy on held-out images measures how linearly
separable the groups are there: lower means the representation exposes less of the attribute. Probe training and
test images come from disjoint identities, so a probe cannot score by recognising people; the chance level (the
majority group's share of the test images) is reported beside it.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import pandas as pd
import torch
from omegaconf import DictConfig
from sklearn.linear_model import LogisticRegression
from sklearn.model_selection import StratifiedGroupKFold
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler
from torch import nn
from torch.utils.data import DataLoader

from fairnas.audits.base import Audit, AuditData, AuditResult, register, settings_with_defaults
from fairnas.data.dataset import FaceImageDataset
from fairnas.models import FaceEmbedder, SearchableDPN, TimmBackbone

LAYERS = ("layer_N-1", "layer_N", "embedding")


def stage_features(backbone: nn.Module, images: torch.Tensor) -> list[torch.Tensor]:
    """Pooled features [B, C] of the backbone's last two stages (N - 1, then N).

    timm models through ``forward_intermediates`` (the last stage after the model's final norm, as its pooled
    features are), the searchable DPN through :meth:`~fairnas.models.dpn.SearchableDPN.stage_features`.
    """
    if isinstance(backbone, TimmBackbone):
        maps = backbone.model.forward_intermediates(images, indices=2, norm=True, intermediates_only=True)
    elif isinstance(backbone, SearchableDPN):
        maps = backbone.stage_features(images, last=2)
    else:
        raise ValueError(
            f"linear probes support TimmBackbone and SearchableDPN backbones, not {type(backbone).__name__}"
        )
    return [feature.flatten(2).mean(dim=2) if feature.ndim > 2 else feature for feature in maps]


@torch.no_grad()
def probe_features(
    embedder: FaceEmbedder, loader: DataLoader, device: str | torch.device = "cpu"
) -> tuple[dict[str, np.ndarray], np.ndarray, np.ndarray]:
    """Features of every layer in :data:`LAYERS` for the loader's images, with their groups and identity labels.

    ``loader`` yields the data module's batches (``image``, ``label`` = identity, ``group``).
    """
    embedder = embedder.eval().to(device)
    features: dict[str, list[torch.Tensor]] = {layer: [] for layer in LAYERS}
    groups, identities = [], []
    for batch in loader:
        images = batch["image"].to(device)
        penultimate, last = stage_features(embedder.backbone, images)
        for layer, value in zip(LAYERS, (penultimate, last, embedder(images)), strict=True):
            features[layer].append(value.float().cpu())
        groups.append(batch["group"])
        identities.append(batch["label"])
    return (
        {layer: torch.cat(values).numpy() for layer, values in features.items()},
        torch.cat(groups).numpy(),
        torch.cat(identities).numpy(),
    )


def linear_probe(
    features: Mapping[str, np.ndarray], groups: np.ndarray, identities: np.ndarray, seed: int = 0
) -> dict[str, float]:
    """Held-out accuracy of a logistic-regression probe of ``groups`` on each feature set.

    Images are divided in two halves of disjoint identities, stratified by group (the probe trains on one and is
    tested on the other). Returns the accuracy per feature name, ``chance`` (the test set's majority-group share),
    ``n_train`` and ``n_test``.
    """
    if len(np.unique(groups)) < 2:
        raise ValueError("a linear probe needs images of at least two protected groups")
    splitter = StratifiedGroupKFold(n_splits=2, shuffle=True, random_state=seed)
    train, test = next(splitter.split(np.zeros(len(groups)), groups, identities))
    if len(np.unique(groups[train])) < 2:
        raise ValueError("the probe's training half holds a single protected group; use more identities per group")
    result = {}
    for name, values in features.items():
        probe = make_pipeline(StandardScaler(), LogisticRegression(max_iter=2000))
        probe.fit(values[train], groups[train])
        result[name] = float(probe.score(values[test], groups[test]))
    result["chance"] = float(np.unique(groups[test], return_counts=True)[1].max() / len(test))
    result.update(n_train=float(len(train)), n_test=float(len(test)))
    return result


def probe_accuracy(
    embedder: FaceEmbedder,
    dataset: FaceImageDataset,
    *,
    device: str | torch.device = "cpu",
    batch_size: int = 64,
    num_workers: int = 0,
    seed: int = 0,
) -> dict[str, float]:
    """:func:`linear_probe` of every layer on the images of ``dataset`` inside the group order."""
    loader = DataLoader(dataset, batch_size=batch_size, num_workers=num_workers)
    features, groups, identities = probe_features(embedder, loader, device)
    inside = groups >= 0
    return linear_probe(
        {layer: values[inside] for layer, values in features.items()}, groups[inside], identities[inside], seed=seed
    )


def check_config(config: DictConfig | dict | None) -> None:
    """The audit has no settings: its section ``linear_probe: {}`` refuses any key."""
    settings_with_defaults("linear_probe", config, {})


def audit(model, data: AuditData, config: object = None) -> AuditResult:
    """The audit-command form: probe accuracy per layer on ``data``'s split, beside the chance level."""
    result = probe_accuracy(
        model.embedder, data.dataset, device=model.device, batch_size=data.batch_size, seed=data.seed
    )
    table = pd.DataFrame({"layer": [*LAYERS, "chance"], "accuracy": [result[name] for name in (*LAYERS, "chance")]})
    lift = result["embedding"] - result["chance"]
    finding = (
        f"A linear probe predicts the protected group from the face embedding with accuracy "
        f"{result['embedding']:.1%} on held-out identities (chance {result['chance']:.1%}, "
        f"{lift:+.1%} above it; last stage {result['layer_N']:.1%}, stage N-1 {result['layer_N-1']:.1%}): "
        "the higher above chance, the more linearly the representation exposes the attribute "
        "(thesis Sec. 4.5.7)."
    )
    return AuditResult(tables={"accuracy": table}, figures={}, summary=result, finding=finding)


register(
    Audit(
        "linear_probe",
        "how linearly the representation exposes the group (thesis Sec. 4.5.7)",
        audit,
        check=check_config,
        splits=("train", "val", "test"),
        title="linear probes",
    )
)
