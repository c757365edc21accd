"""Attention-IoU (Serianni et al., Sec. 2): does the model look at different facial regions for different groups?

Attention maps are Grad-CAM maps (``pytorch-grad-cam``) of the embedder's last feature map (the last module
whose output is a spatial map before global pooling: the searchable DPN's final BN-act, a timm model's last
stage), upsampled to the image as the library returns them. Two targets per probe:

- identity: the cosine similarity of the probe's embedding with its identity's clean gallery template;
- protected attribute: |logit| of a linear probe of the group (logistic regression on frozen normalised
  embeddings of training images; with more than two groups the logit of the probe's own group).

Attention-IoU of two maps (Eq. 1): B(M1, M2) = <M̂1, M̂2>_F / ||(M̂1 + M̂2) / 2||²_F with M̂ = M / ||M||_1; it
is 1 for identical maps, 0 for disjoint ones, invariant to scaling a map and to integer nearest-neighbour
resizing of both, and NaN when a map is all zero. The **heatmap score** is B(identity map, attribute map); the
**mask score** of a region is B(identity map, region mask), with region masks from the data set's ``mask``
column or, for CelebA, soft masks from its five landmarks (:mod:`fairnas.data.masks`; the paper downsamples
masks to the map's size, here maps are compared at the image's size). Scores are averaged per group and per
correct/incorrect identification with bootstrap 95% CIs.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import torch
import torch.nn.functional as F
from matplotlib.figure import Figure
from omegaconf import DictConfig
from PIL import Image
from pytorch_grad_cam import GradCAM
from scipy import stats
from sklearn.linear_model import LogisticRegression
from torch import nn
from torchvision.transforms import InterpolationMode, v2

from fairnas.audits.base import Audit, AuditData, AuditResult, progress, register
from fairnas.audits.gallery import PixelPipeline, cap_per_group, embed_arrays, enrol_gallery
from fairnas.data.masks import (
    LANDMARK_COLUMNS,
    MASK_COLUMN,
    MASK_PARTS,
    landmark_region_maps,
    read_label_map,
    region_maps,
)
from fairnas.validation import Settings

POOLING = (nn.AdaptiveAvgPool2d, nn.AdaptiveMaxPool2d)


def attention_iou(first: np.ndarray, second: np.ndarray) -> np.ndarray:
    """B(M1, M2) of Eq. 1 over the last two axes (leading axes are batches); NaN where a map sums to zero."""
    first, second = np.abs(np.asarray(first, float)), np.abs(np.asarray(second, float))
    with np.errstate(invalid="ignore", divide="ignore"):
        first = first / first.sum(axis=(-2, -1), keepdims=True)
        second = second / second.sum(axis=(-2, -1), keepdims=True)
        return (first * second).sum(axis=(-2, -1)) / (((first + second) / 2) ** 2).sum(axis=(-2, -1))


def feature_map_layer(embedder: nn.Module, image_size: int) -> nn.Module:
    """The last module (in execution order) whose output is a spatial map [B, C, H, W] before the first global
    pooling; a backbone that turns its maps into tokens after that (a ViT) is refused."""
    outputs: list[tuple[nn.Module, object]] = []
    hooks = [
        module.register_forward_hook(lambda module, _, output: outputs.append((module, output)))
        for module in embedder.modules()
        if module is not embedder
    ]
    try:
        with torch.no_grad():
            embedder(torch.zeros(1, 3, image_size, image_size, device=next(embedder.parameters()).device))
    finally:
        for hook in hooks:
            hook.remove()
    pooled = next((i for i, (module, _) in enumerate(outputs) if isinstance(module, POOLING)), len(outputs))
    maps = [
        i for i, (_, output) in enumerate(outputs[:pooled]) if isinstance(output, torch.Tensor) and output.ndim == 4
    ]
    tokens = [i for i, (_, output) in enumerate(outputs) if isinstance(output, torch.Tensor) and output.ndim == 3]
    if not maps or (tokens and tokens[-1] > maps[-1]):
        raise ValueError(
            f"attention_iou: {type(embedder).__name__} has no spatial feature map before its "
            "embedding (token backbones such as ViTs are not supported)"
        )
    return outputs[maps[-1]][0]


class CosineTarget:
    """Grad-CAM target: cosine similarity of the embedding with a template."""

    def __init__(self, template: torch.Tensor):
        self.template = template

    def __call__(self, embedding: torch.Tensor) -> torch.Tensor:
        return F.normalize(embedding, dim=-1) @ self.template.to(embedding.device)


class ProbeLogitTarget:
    """Grad-CAM target: |logit| of the group probe (w . e + b) on the normalised embedding."""

    def __init__(self, weight: torch.Tensor, bias: float):
        self.weight, self.bias = weight, bias

    def __call__(self, embedding: torch.Tensor) -> torch.Tensor:
        return (F.normalize(embedding, dim=-1) @ self.weight.to(embedding.device) + self.bias).abs()


def check_config(config: DictConfig) -> None:
    """Image and bootstrap counts, before any model is loaded."""
    check = Settings("attention_iou.")
    for key in ("gallery_images", "n_bootstrap", "probe_images"):
        check.integer(key, config[key], minimum=1)
    check.integer("max_probes_per_group", config.max_probes_per_group, minimum=1, null="all")


def audit(model, data: AuditData, config: DictConfig) -> AuditResult:
    """Heatmap and mask scores of ``data``'s probes under ``model`` (needs ``model.embedder``, an nn.Module)."""
    check_config(config)
    pipeline = PixelPipeline(data.transforms)
    gallery = enrol_gallery(
        model, data, pipeline, gallery_images=config.gallery_images, max_probes_per_group=config.max_probes_per_group
    )
    predicted, _ = gallery.identify(gallery.clean_embeddings, gallery.probe_rows)
    groups = data.datamodule.group_index(data.frame)[gallery.probe_rows]
    weight, bias = _group_probe(model, data, pipeline, config.probe_images)
    cam = GradCAM(model=model.embedder, target_layers=[feature_map_layer(model.embedder, gallery.clean[0].shape[0])])
    identity_maps, group_maps = [], []
    for start in progress(range(0, len(gallery.clean), data.batch_size), desc="attention_iou: Grad-CAM"):
        rows = slice(start, start + data.batch_size)
        images = pipeline.to_tensor(gallery.clean[rows]).to(model.device)
        labels = gallery.labels[gallery.probe_rows[rows]]
        identity_maps.append(cam(images, [CosineTarget(gallery.templates[label]) for label in labels]))
        group_maps.append(cam(images, [ProbeLogitTarget(weight[g], bias[g]) for g in groups[rows]]))
    identity_maps, group_maps = np.concatenate(identity_maps), np.concatenate(group_maps)

    frame = data.frame.iloc[gallery.probe_rows]
    probes = pd.DataFrame(
        {
            "path": frame["path"].to_numpy(),
            "identity": frame["identity"].astype(str).to_numpy(),
            "group": np.asarray(data.group_order)[groups],
            "correct": predicted == gallery.labels[gallery.probe_rows],
            "heatmap_score": attention_iou(identity_maps, group_maps),
        }
    )
    masks = _probe_masks(frame, data.root, pipeline)
    if masks is not None:
        for index, part in enumerate(MASK_PARTS):
            probes[f"mask_{part}"] = attention_iou(identity_maps, masks[:, index])
    scores = _score_table(probes, data.group_order, config.n_bootstrap, data.seed)
    figures = {
        "heatmaps": _heatmap_figure(
            identity_maps, group_maps, np.stack(gallery.clean), probes["group"].to_numpy(), data.group_order
        )
    }
    if masks is not None:
        figures["mask_scores"] = _mask_figure(scores, data.group_order)
    summary = _summary(scores, probes)
    return AuditResult({"probes": probes, "scores": scores}, figures, summary, _finding(summary, data.group_order))


def _group_probe(model, data: AuditData, pipeline: PixelPipeline, n_images: int) -> tuple[torch.Tensor, np.ndarray]:
    """Per group (weight [D], bias) of a logistic-regression probe of the group on training embeddings."""
    train = data.datamodule.splits["train"]
    groups = data.datamodule.group_index(train)
    rows = cap_per_group(np.flatnonzero(groups >= 0), groups[groups >= 0], n_images // len(data.group_order), data.seed)
    images = [pipeline.load(data.root / path) for path in train["path"].iloc[rows]]
    embeddings = embed_arrays(model, pipeline, images, data.batch_size).numpy()
    probe = LogisticRegression(max_iter=2000).fit(embeddings, groups[rows])
    weight, bias = probe.coef_, probe.intercept_
    if len(probe.classes_) == 2:  # one decision function: its sign says the group, |logit| serves both
        weight, bias = np.repeat(weight, 2, axis=0), np.repeat(bias, 2)
    return torch.as_tensor(weight, dtype=torch.float32), bias.astype(float)


def _probe_masks(frame: pd.DataFrame, root, pipeline: PixelPipeline) -> np.ndarray | None:
    """[n, len(MASK_PARTS), H, W] region masks aligned with the model's input: label maps from the ``mask``
    column (nearest-neighbour resize, so labels stay labels), else soft maps from the five landmark columns
    (bilinear), else None."""
    resize = (pipeline.resize, pipeline.resize)
    if MASK_COLUMN in frame.columns:
        geometry = v2.Compose(
            [v2.Resize(resize, interpolation=InterpolationMode.NEAREST), v2.CenterCrop(pipeline.image_size)]
        )
        return np.stack([region_maps(np.asarray(geometry(read_label_map(root / path)))) for path in frame[MASK_COLUMN]])
    if set(LANDMARK_COLUMNS) <= set(frame.columns):
        geometry = v2.Compose([v2.Resize(resize, antialias=True), v2.CenterCrop(pipeline.image_size)])
        maps = []
        for path, landmarks in zip(frame["path"], frame[list(LANDMARK_COLUMNS)].to_numpy(), strict=True):
            with Image.open(root / path) as image:
                width, height = image.size
            maps.append(geometry(torch.from_numpy(landmark_region_maps(landmarks, width, height))).numpy())
        return np.stack(maps)
    return None


def _score_table(probes: pd.DataFrame, group_order: list[str], n_bootstrap: int, seed: int) -> pd.DataFrame:
    """Mean and bootstrap 95% CI of every score per group and outcome (all / correct / incorrect probes)."""
    rows = []
    columns = [c for c in probes.columns if c == "heatmap_score" or c.startswith("mask_")]
    for group in group_order:
        for outcome, selected in (("all", None), ("correct", True), ("incorrect", False)):
            subset = probes[
                (probes["group"] == group) & ((probes["correct"] == selected) if selected is not None else True)
            ]
            for column in columns:
                values = subset[column].dropna().to_numpy()
                low, high = _bootstrap_ci(values, n_bootstrap, seed)
                rows.append(
                    {
                        "score": column,
                        "group": group,
                        "outcome": outcome,
                        "n": len(values),
                        "mean": values.mean() if len(values) else np.nan,
                        "ci_low": low,
                        "ci_high": high,
                    }
                )
    return pd.DataFrame(rows)


def _bootstrap_ci(values: np.ndarray, n_bootstrap: int, seed: int) -> tuple[float, float]:
    if len(values) < 2 or np.ptp(values) == 0:
        return (float(values[0]),) * 2 if len(values) else (np.nan, np.nan)
    result = stats.bootstrap(
        (values,), np.mean, n_resamples=n_bootstrap, method="percentile", random_state=np.random.default_rng(seed)
    )
    return float(result.confidence_interval.low), float(result.confidence_interval.high)


def _heatmap_figure(
    identity_maps: np.ndarray, group_maps: np.ndarray, images: np.ndarray, groups: np.ndarray, group_order: list[str]
) -> Figure:
    """Average identity and group-probe heatmaps per group over the group's average probe image (rows: target,
    columns: group)."""
    figure = Figure(figsize=(2.4 * len(group_order), 5), layout="constrained")
    axes = figure.subplots(2, len(group_order), squeeze=False)
    for column, group in enumerate(group_order):
        for row, (maps, target) in enumerate(((identity_maps, "identity"), (group_maps, "group probe"))):
            axis = axes[row, column]
            if (groups == group).any():
                axis.imshow(images[groups == group].mean(axis=0).astype(np.uint8))
                axis.imshow(maps[groups == group].mean(axis=0), cmap="inferno", alpha=0.55)
            axis.set(title=f"{group}: {target}", xticks=[], yticks=[])
    return figure


def _mask_figure(scores: pd.DataFrame, group_order: list[str]) -> Figure:
    """Mask score per region and group (all probes) with bootstrap CIs."""
    table = scores[(scores["outcome"] == "all") & scores["score"].str.startswith("mask_")]
    figure = Figure(figsize=(8, 3.4), layout="constrained")
    axis = figure.subplots()
    width = 0.8 / len(group_order)
    for offset, group in enumerate(group_order):
        rows = table[table["group"] == group]
        x = np.arange(len(rows)) + offset * width
        axis.bar(
            x,
            rows["mean"],
            width,
            yerr=[rows["mean"] - rows["ci_low"], rows["ci_high"] - rows["mean"]],
            label=group,
            capsize=2,
        )
    axis.set_xticks(np.arange(len(MASK_PARTS)) + 0.4 - width / 2, MASK_PARTS, rotation=30)
    axis.set(ylabel="mask score B(identity map, region)", title="Where the identity map looks")
    axis.legend(title="group")
    return figure


def _summary(scores: pd.DataFrame, probes: pd.DataFrame) -> dict:
    overall = scores[scores["outcome"] == "all"]
    heatmap = overall[overall["score"] == "heatmap_score"].set_index("group")["mean"]
    summary = {"n_probes": len(probes), "heatmap_score": {g: float(v) for g, v in heatmap.items()}}
    masks = overall[overall["score"].str.startswith("mask_")]
    if len(masks):
        summary["top_region"] = {
            group: rows.loc[rows["mean"].idxmax(), "score"].removeprefix("mask_")
            for group, rows in masks.dropna(subset=["mean"]).groupby("group")
        }
        summary["mask_score"] = {
            f"{row.group}/{row.score.removeprefix('mask_')}": float(row.mean) for row in masks.itertuples()
        }
    return summary


def _finding(summary: dict, group_order: list[str]) -> str:
    heatmap = ", ".join(f"{g} {summary['heatmap_score'].get(g, float('nan')):.2f}" for g in group_order)
    text = f"Heatmap score (overlap of where identification and the group probe look; 1 = the same regions): {heatmap}."
    if "top_region" in summary:
        regions = ", ".join(f"{g}: {r}" for g, r in summary["top_region"].items())
        text += f" The identity map overlaps most with the region ({regions})."
        if len(set(summary["top_region"].values())) > 1:
            text += " The groups are identified from different regions."
    return text


register(
    Audit(
        "attention_iou",
        "where the model looks, per group: Grad-CAM heatmap and region mask scores (Attention-IoU)",
        audit,
        check=check_config,
        title="Attention-IoU",
    )
)
