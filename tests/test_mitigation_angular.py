"""Angular: the disadvantaged group's samples get the head's margin plus extra_margin, checked on the logits; the
group named, read, or measured after every epoch and carried through a resumed run."""

from __future__ import annotations

import json
import math
from types import SimpleNamespace

import pandas as pd
import pytest
import torch

from fairnas.mitigations import GroupMargins
from fairnas.training.run import train
from tests.helpers import make_head

SCALE, EXTRA = 10.0, 0.2


def batch_and_module(head_name, **head_kwargs):
    torch.manual_seed(0)
    head = make_head(head_name, 8, 5, scale=SCALE, **head_kwargs)
    embeddings = torch.randn(6, 8) * 20
    batch = {"label": torch.tensor([0, 1, 2, 3, 4, 0]), "group": torch.tensor([0, 1, 0, 1, 1, 0])}
    return head, embeddings, batch, SimpleNamespace(head=head, group_order=["g0", "g1"])


def target_and_rest(logits, labels):
    target = logits.gather(1, labels[:, None]).squeeze(1)
    rest = logits.scatter(1, labels[:, None], float("nan"))
    return target, rest


@pytest.mark.parametrize(
    ("head_name", "target"),
    [
        ("cosface", lambda cos, m: cos - m),
        ("arcface", lambda cos, m: torch.cos(torch.acos(cos) + m)),
    ],
)
def test_disadvantaged_group_gets_the_larger_margin_on_the_logits(head_name, target):
    head, embeddings, batch, module = batch_and_module(head_name, margin=0.3)
    margins = GroupMargins(EXTRA, group="g1")(batch=batch, embeddings=embeddings, module=module)
    assert torch.allclose(margins, torch.tensor([0.3, 0.5, 0.3, 0.5, 0.5, 0.3]))

    logits, labels = head(embeddings, batch["label"], margin=margins).logits, batch["label"]
    cos = head.cosine(embeddings)
    got_target, got_rest = target_and_rest(logits, labels)
    expected_target = SCALE * target(cos.gather(1, labels[:, None]).squeeze(1), margins)
    assert torch.allclose(got_target, expected_target, atol=1e-5)
    _, plain_rest = target_and_rest(SCALE * cos, labels)
    assert torch.allclose(got_rest.nan_to_num(), plain_rest.nan_to_num(), atol=1e-5)  # other classes: no margin


def test_magface_adds_the_extra_margin_to_its_magnitude_margin():
    head, embeddings, batch, module = batch_and_module("magface")
    margins = GroupMargins(EXTRA, group="g0")(batch=batch, embeddings=embeddings, module=module)
    expected = head.default_margin(embeddings) + EXTRA * (batch["group"] == 0)
    assert torch.allclose(margins, expected)
    logits = head(embeddings, batch["label"], margin=margins).logits
    cos = head.cosine(embeddings).gather(1, batch["label"][:, None]).squeeze(1)
    theta = torch.acos(cos.clamp(-1 + 1e-6, 1 - 1e-6))
    expected_target = torch.where(
        theta + expected <= math.pi, torch.cos(theta + expected), cos - expected * torch.sin(expected)
    )
    assert torch.allclose(logits.gather(1, batch["label"][:, None]).squeeze(1), SCALE * expected_target, atol=1e-5)


def test_disadvantaged_group_is_the_lower_validation_accuracy_of_the_reference_run(tmp_path):
    metrics = tmp_path / "metrics.json"
    metrics.write_text(json.dumps({"group_order": ["g0", "g1"], "val": {"accuracy/g0": 0.9, "accuracy/g1": 0.7}}))
    assert GroupMargins(EXTRA, reference_metrics=metrics).group == "g1"


def test_bad_settings_are_named():
    head, embeddings, batch, module = batch_and_module("cosface")
    with pytest.raises(
        ValueError,
        match=r"mitigation.group='g7' is not a protected group of the data; groups: "
        r"\['g0', 'g1'\]",
    ):
        GroupMargins(EXTRA, group="g7")(batch=batch, embeddings=embeddings, module=module)
    with pytest.raises(ValueError, match="mitigation.extra_margin=-0.1 must be non-negative"):
        GroupMargins(-0.1, group="g0")
    with pytest.raises(ValueError, match="mitigation.warmup_epochs=0 must be a positive integer"):
        GroupMargins(EXTRA, warmup_epochs=0)


def test_before_the_group_is_measured_every_sample_gets_the_heads_margin():
    head, embeddings, batch, module = batch_and_module("cosface")
    policy = GroupMargins(EXTRA)
    assert policy.group is None and policy.measures
    assert torch.equal(policy(batch=batch, embeddings=embeddings, module=module), head.default_margin(embeddings))


@pytest.mark.filterwarnings(r"ignore:You are trying to `self.log\(\)`")
def test_training_step_passes_the_policy_margins_to_the_head(tiny_config):
    from fairnas.training.build import build_model

    cfg = tiny_config("mitigation=angular", "mitigation.group=g1", f"mitigation.extra_margin={EXTRA}")
    module, data = build_model(cfg)
    seen = {}
    module.head.register_forward_hook(lambda head, args, kwargs, output: seen.update(kwargs), with_kwargs=True)
    batch = data.on_after_batch_transfer(next(iter(data.train_dataloader())), 0)
    module.training_step(batch, 0)

    expected = module.head.margin + EXTRA * (batch["group"] == data.group_order.index("g1")).float()
    assert torch.allclose(seen["margin"], expected)
    assert 0 < (batch["group"] == 1).sum() < len(batch["group"])  # both groups in the batch


def test_without_a_group_the_worse_group_is_measured_after_every_epoch(tiny_config, tmp_path):
    metrics = train(tiny_config("mitigation=angular", "trainer.max_epochs=3", output_dir=tmp_path / "run"))
    logged = pd.read_csv(tmp_path / "run" / "csv" / "version_0" / "metrics.csv")
    accuracies = logged.dropna(subset=["val/accuracy/g0"])[["val/accuracy/g0", "val/accuracy/g1"]].to_numpy()
    expected = [
        {"epoch": epoch, "group": ["g0", "g1"][int(g1 < g0)]}  # the lower accuracy; ties: the first
        for epoch, (g0, g1) in enumerate(accuracies, start=1)
    ]
    assert len(expected) == 3 and metrics["mitigation"]["measurements"] == expected
    assert metrics["mitigation"]["group"] == expected[-1]["group"]
    assert logged["mitigation/group"].dropna().tolist() == [float(m["group"] == "g1") for m in expected]


def test_a_continued_run_goes_on_with_the_measured_groups(tiny_config, tmp_path):
    """The measured group travels in the checkpoint: 1 epoch + 2 more equals 3 epochs in one go."""
    common = ("mitigation=angular", "mitigation.extra_margin=0.3", "scheduler.horizon_epochs=3", "logger=none")
    direct = train(tiny_config(*common, "trainer.max_epochs=3", output_dir=tmp_path / "direct"))
    train(tiny_config(*common, "trainer.max_epochs=1", output_dir=tmp_path / "short"))
    continued = train(
        tiny_config(
            *common,
            "trainer.max_epochs=3",
            f"resume_from={tmp_path / 'short' / 'checkpoints' / 'last.ckpt'}",
            output_dir=tmp_path / "continued",
        )
    )
    assert continued["mitigation"] == direct["mitigation"]
    for stage in ("val", "test"):
        assert continued[stage] == pytest.approx(direct[stage], rel=1e-5)
