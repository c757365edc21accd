"""SensitiveNets: a frozen extractor, a removal network, an adversary routed to each side, and the removal effect."""

from __future__ import annotations

import json
import shutil

import numpy as np
import pandas as pd
import pytest
import torch
import torch.nn.functional as F
from omegaconf import OmegaConf

from fairnas.audits.linear_probe import linear_probe
from fairnas.config import compose_config
from fairnas.evaluation import embed_images
from fairnas.mitigations import SensitiveAttributeAdversary, SensitiveNetsEmbedder
from fairnas.training.build import build_embedder, build_model, load_run
from fairnas.training.run import train
from tests.conftest import TINY_DATA


@pytest.fixture
def pretrained(trained_run, cache_dir):
    """The shared tiny trained run (the frozen extractor): its checkpoint and the overrides that made it."""
    return trained_run / "checkpoints" / "last.ckpt", [*TINY_DATA, f"paths.cache_dir={cache_dir}", "logger=none"]


def test_adversary_trains_the_discriminator_on_its_loss_and_the_embedding_on_delta():
    torch.manual_seed(0)
    adversary = SensitiveAttributeAdversary(embedding_dim=8, n_groups=2, weight=0.5, hidden_layers=1)
    embeddings = torch.randn(12, 8, requires_grad=True)
    groups = torch.tensor([0, 1] * 5 + [-1, -1])  # the last two lie outside the group order: ignored
    loss = adversary(batch={"group": groups}, embeddings=embeddings, logits=None, module=None)
    loss.backward()

    known = groups >= 0
    features = F.normalize(embeddings[known].detach(), dim=1)
    discriminator_loss = F.cross_entropy(adversary.discriminator(features), groups[known])
    parameters = list(adversary.discriminator.parameters())
    for got, expected in zip(parameters, torch.autograd.grad(discriminator_loss, parameters), strict=True):
        assert torch.allclose(got.grad, expected, atol=1e-6)

    leaf = embeddings.detach().requires_grad_(True)
    probabilities = adversary.discriminator(F.normalize(leaf[known], dim=1)).softmax(dim=1)
    delta = torch.log1p((probabilities - 0.5).abs()).mean()
    assert torch.allclose(embeddings.grad, torch.autograd.grad(delta, leaf)[0], atol=1e-6)
    assert float(loss) == pytest.approx(float(delta + discriminator_loss), rel=1e-5)
    assert not embeddings.grad[~known].any()
    assert adversary.weight == 0.5  # applied by the training module, like every regulariser's weight


def test_discriminator_has_one_output_per_group_of_the_data(pretrained, tmp_path):
    checkpoint, overrides = pretrained
    cfg = compose_config(
        "train",
        [
            *overrides,
            "data.table.n_groups=3",
            "data.table.n_identities=36",
            "mitigation=sensitivenets",
            f"mitigation.checkpoint={checkpoint}",
        ],
        output_dir=tmp_path,
    )
    module, _ = build_model(cfg)
    assert module.regularizers["sensitivenets"].discriminator[-1].out_features == 3 == cfg.data_info.n_groups
    with pytest.raises(ValueError, match="the data has 1 protected group"):
        SensitiveAttributeAdversary(embedding_dim=4, n_groups=1)


def test_embedder_starts_as_the_frozen_pretrained_embedding(pretrained):
    checkpoint, overrides = pretrained
    cfg = compose_config("train", [*overrides, "mitigation=sensitivenets", f"mitigation.checkpoint={checkpoint}"])
    embedder = build_embedder(cfg)
    assert isinstance(embedder, SensitiveNetsEmbedder)
    images = torch.randn(4, 3, 32, 32)
    reference = load_run(checkpoint).embedder
    assert torch.allclose(embedder.eval()(images), reference(images), atol=1e-5)  # zero-initialised residual

    embedder.train()
    assert not embedder.extractor.training and embedder.removal.training
    assert not any(p.requires_grad for p in embedder.extractor.parameters())
    assert all(p.requires_grad for p in embedder.removal.parameters())


def test_checkpoint_of_another_architecture_is_named(pretrained):
    checkpoint, overrides = pretrained
    cfg = compose_config(
        "train", [*overrides, "embedding_dim=32", "mitigation=sensitivenets", f"mitigation.checkpoint={checkpoint}"]
    )
    with pytest.raises(ValueError, match="init_from: .* does not match the model of this config"):
        build_embedder(cfg)


def test_sensitivenets_run_is_trained_and_evaluated_like_any_other(pretrained, tmp_path):
    checkpoint, overrides = pretrained
    baseline_copy = tmp_path / "baseline"
    shutil.copytree(checkpoint.parents[1], baseline_copy)
    cfg = compose_config(
        "train",
        [*overrides, "mitigation=sensitivenets", f"mitigation.checkpoint={baseline_copy}", "logger=csv"],
        output_dir=tmp_path / "run",
    )
    metrics = train(cfg)

    saved = json.loads((tmp_path / "run" / "metrics.json").read_text())
    baseline = json.loads((checkpoint.parents[1] / "metrics.json").read_text())
    assert set(saved["test"]) == set(baseline["test"]) and saved["num_classes"] == baseline["num_classes"]
    assert metrics["test"]["error"] == pytest.approx(saved["test"]["error"])
    assert (
        saved["init_from"] == str(baseline_copy) and not (tmp_path / "run" / "baseline").exists()
    )  # no baseline stage
    header = (tmp_path / "run" / "csv" / "version_0" / "metrics.csv").read_text().splitlines()[0].split(",")
    assert "train/sensitivenets" in header
    shutil.rmtree(baseline_copy)  # the run is self-contained: it holds the frozen extractor's weights
    reloaded = load_run(tmp_path / "run")  # as evaluate.py and audit.py load it
    assert isinstance(reloaded.embedder, SensitiveNetsEmbedder) and reloaded.embedder.removal[-1].weight.any()
    images = torch.randn(2, 3, 32, 32)
    trained = torch.load(tmp_path / "run" / "checkpoints" / "last.ckpt", weights_only=True)["state_dict"]
    assert torch.equal(
        reloaded.embedder.extractor.state_dict()["neck.layers.2.weight"],
        trained["embedder.extractor.neck.layers.2.weight"],
    )
    assert reloaded.embedder(images).shape == (2, 64)


PROBE_SEEDS = (0, 1, 2)
MIN_PROBE_DROP = 0.05  # mean held-out probe accuracy on the protected attribute falls by at least this much
MAX_ERROR_RISE = 0.15  # while the test identification error rises by at most this much


@pytest.mark.slow
def test_removal_lowers_attribute_probe_accuracy_within_an_error_bound(tmp_path, cache_dir):
    data = [
        *TINY_DATA,
        f"paths.cache_dir={cache_dir}",
        "logger=none",
        "data.table.n_identities=60",
        "data.table.images_per_identity=10",
        "embedding_dim=16",
        "trainer.check_val_every_n_epoch=1000",
    ]
    baseline = train(compose_config("train", [*data, "trainer.max_epochs=2"], output_dir=tmp_path / "baseline"))
    cfg = compose_config(
        "train",
        [
            *data,
            "mitigation=sensitivenets",
            f"mitigation.checkpoint={tmp_path / 'baseline/checkpoints/last.ckpt'}",
            "optimizer=adamw",
            "optimizer.lr=0.01",
            "scheduler=constant",
            "data.batch_size=32",
            "trainer.max_epochs=60",
        ],
        output_dir=tmp_path / "sensitivenets",
    )
    mitigated = train(cfg)

    module, data_module = build_model(cfg)
    checkpoint = torch.load(tmp_path / "sensitivenets/checkpoints/last.ckpt", weights_only=True)
    module.load_state_dict(checkpoint["state_dict"])
    held_out = pd.concat([data_module.splits["val"], data_module.splits["test"]])
    transforms = OmegaConf.to_container(cfg.data.transforms, resolve=True)
    features = {
        name: embed_images(embedder, data_module.table.root, held_out["path"].tolist(), transforms)
        for name, embedder in (("frozen", module.embedder.extractor), ("sensitivenets", module.embedder))
    }
    probes = pd.DataFrame(
        [
            linear_probe(features, held_out["group"].to_numpy(), held_out["identity"].to_numpy(), seed=seed)
            for seed in PROBE_SEEDS
        ]
    )
    assert probes["frozen"].mean() > probes["chance"].mean() + 0.2  # the extractor exposes the attribute
    assert probes["sensitivenets"].mean() <= probes["frozen"].mean() - MIN_PROBE_DROP
    assert mitigated["test"]["error"] <= baseline["test"]["error"] + MAX_ERROR_RISE
    assert np.isfinite(mitigated["test"]["rank_disparity"])
