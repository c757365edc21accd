"""Backbones and the embedding neck: the searchable DPN, the timm wrapper, EmbeddingNeck and FaceEmbedder."""

import pytest
import timm
import torch
from omegaconf import OmegaConf

from fairnas.models import (
    DPN_PRESETS,
    OPERATIONS,
    EmbeddingNeck,
    FaceEmbedder,
    SearchableDPN,
    TimmBackbone,
    build_dpn,
    ops_name,
    parse_ops,
)
from fairnas.models.ops import build_operation


def count_parameters(module: torch.nn.Module) -> int:
    return sum(p.numel() for p in module.parameters())


# --- operations (Table 4.3) -------------------------------------------------------------------------------------


def test_operation_table_matches_thesis_numbering():
    assert [op.name for op in OPERATIONS] == [
        "BnConv1x1",
        "Conv1x1Bn",
        "Conv1x1",
        "BnConv3x3",
        "Conv3x3Bn",
        "Conv3x3",
        "BnConv5x5",
        "Conv5x5Bn",
        "Conv5x5",
    ]


@pytest.mark.parametrize("index", range(9))
@pytest.mark.parametrize("stride", [1, 2])
def test_every_operation_keeps_same_padding(index, stride):
    op = build_operation(index, in_chs=8, out_chs=12, stride=stride, groups=4)
    out = op(torch.randn(2, 8, 7, 7))
    assert out.shape == (2, 12, 4, 4) if stride == 2 else (2, 12, 7, 7)


def test_operation_layer_order():
    pre, post, vanilla = (build_operation(i, 4, 4) for i in (3, 4, 5))
    assert [type(m).__name__ for m in pre] == ["BatchNorm2d", "ReLU", "Conv2d"]
    assert [type(m).__name__ for m in post] == ["Conv2d", "BatchNorm2d", "ReLU"]
    assert [type(m).__name__ for m in vanilla] == ["Conv2d"]
    assert vanilla[0].kernel_size == (3, 3) and vanilla[0].bias is not None
    assert pre[2].bias is None and post[0].bias is None


@pytest.mark.parametrize("ops", [(3, 0, 1), [3, 0, 1], "301", 301, OmegaConf.create({"ops": [3, 0, 1]}).ops])
def test_parse_ops_accepts_all_spellings(ops):
    assert parse_ops(ops) == (3, 0, 1)


def test_parse_ops_zero_pads_ints():
    assert parse_ops(1) == (0, 0, 1)
    assert ops_name([6, 8, 0]) == "SMAC_680"


@pytest.mark.parametrize(
    ("ops", "message"),
    [
        ((3, 9, 1), r"backbone.ops\[1\]=9 is not an operation index; allowed 0-8 \(0=BnConv1x1, 1=Conv1x1Bn"),
        ("391", r"backbone.ops\[1\]=9 is not an operation index"),
        ((3, -1, 1), r"backbone.ops\[1\]=-1 is not an operation index"),
        ((3, 0.5, 1), r"backbone.ops\[1\]=0.5 is not an operation index"),
        ((3, 0), "must name exactly 3 operations, got 2"),
        ("3011", "must name exactly 3 operations, got 4"),
        ("3a1", "must be three digits 0-8"),
        (1000, "must be three digits 0-8"),
        (None, "must be a list of three ints"),
    ],
)
def test_parse_ops_rejects_bad_codes(ops, message):
    with pytest.raises(ValueError, match=message):
        parse_ops(ops)


# --- searchable DPN ------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("ops", ["000", "888", "301", "145", "678", "062"])
def test_tiny_dpn_forward_backward(ops):
    torch.manual_seed(0)
    model = build_dpn("tiny", ops)
    features = model(torch.randn(4, 3, 32, 32))
    assert features.shape == (4, model.num_features)
    features.square().mean().backward()
    grads = [p.grad for p in model.parameters()]
    assert all(g is not None and torch.isfinite(g).all() for g in grads)
    assert model.ops == parse_ops(ops)


def test_tiny_dpn_widths_follow_the_stage_lists():
    model = build_dpn("tiny")
    # Last stage: residual width base_width * 2**3 = 256 plus a dense path of 3 * inc_sec[-1] = 96 channels.
    assert model.num_features == 32 * 8 + 3 * 32
    deeper = build_dpn("tiny", k_sec=(2, 1, 1, 3))
    assert deeper.num_features == 32 * 8 + 3 * 32 + 2 * 32
    assert [name for name, _ in deeper.features.named_children()] == [
        "stem",
        "conv2_1",
        "conv2_2",
        "conv3_1",
        "conv4_1",
        "conv5_1",
        "conv5_2",
        "conv5_3",
        "final_bn_act",
    ]
    assert deeper(torch.randn(2, 3, 32, 32)).shape == (2, deeper.num_features)


def test_dpn_block_grouping_and_stride_sit_in_slot_two():
    block = build_dpn("tiny", "555").features.conv3_1  # first block of stage 2: a downsampling block
    assert block.slot2[0].groups == 4 and block.slot2[0].stride == (2, 2)
    assert block.slot1[0].groups == 1 and block.slot3[0].groups == 1
    assert block.projection[2].stride == (2, 2)


def test_dpn_with_timm_operations_matches_timm_dpn68():
    """ops 0,3,0 (BN-ReLU-conv 1x1, 3x3 grouped, 1x1) is the original DPN block: same widths, same parameters."""
    ours = SearchableDPN(
        ops=(0, 3, 0),
        num_init_features=10,
        k_r=128,
        groups=32,
        k_sec=(3, 4, 12, 3),
        inc_sec=(16, 32, 32, 64),
        base_width=64,
        stem_kernel_size=3,
    )
    reference = timm.create_model("dpn68", num_classes=0)
    assert ours.num_features == reference.num_features == 832
    assert count_parameters(ours) == count_parameters(reference)


def test_paper_preset_builds_and_runs():
    model = build_dpn("paper", "301").eval()
    assert DPN_PRESETS["paper"]["k_r"] == 200 and DPN_PRESETS["paper"]["groups"] == 50
    assert model.num_features == 2048 + 3 * 128
    assert count_parameters(model) == 32_553_224  # regression anchor for SMAC_301 at paper size
    with torch.no_grad():
        assert model(torch.randn(1, 3, 64, 64)).shape == (1, 2432)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"preset": "huge"}, "backbone.preset='huge' is not a DPN preset; allowed: paper, tiny"),
        ({"depth": 3}, "backbone.depth is not a DPN argument; allowed: base_width, groups, in_chans"),
        ({"groups": 5}, "backbone.groups=5 must divide backbone.k_r=16"),
        ({"k_sec": (1, 1)}, "must be non-empty and equally long"),
        ({"inc_sec": (8, 0, 16, 32)}, "must hold positive integers"),
        ({"k_r": 0}, "backbone.k_r=0 must be a positive integer"),
        ({"ops": "309"}, r"backbone.ops\[2\]=9 is not an operation index"),
    ],
)
def test_build_dpn_rejects_bad_arguments(kwargs, message):
    with pytest.raises(ValueError, match=message):
        build_dpn(**kwargs)


# --- timm backbone -------------------------------------------------------------------------------------------------


def test_timm_backbone_returns_pooled_features():
    backbone = TimmBackbone("resnet18")
    assert backbone.num_features == 512
    assert backbone(torch.randn(2, 3, 32, 32)).shape == (2, 512)


@pytest.mark.parametrize("name", ["resnet18", "lcnet_050", "mobilenetv3_small_100", "ghostnet_100"])
def test_timm_backbone_num_features_is_the_width_it_returns(name):
    # MobileNetV3-style models end in a pre-logits conv wider than the trunk's num_features (lcnet_050: 1280 vs
    # 256); the neck is built from num_features, so it must be the returned width.
    backbone = TimmBackbone(name)
    assert backbone(torch.zeros(2, 3, 32, 32)).shape == (2, backbone.num_features)


def test_timm_backbone_passes_kwargs_through():
    backbone = TimmBackbone("resnet18", in_chans=1, drop_rate=0.2)
    assert backbone.model.conv1.in_channels == 1 and backbone.model.drop_rate == 0.2


def test_timm_backbone_unknown_name_suggests_close_names():
    with pytest.raises(ValueError, match=r"backbone.name='resnet181' is not a timm model; see timm.list_models\(\)"):
        TimmBackbone("resnet181")
    with pytest.raises(ValueError, match=r"did you mean .*resnet18"):
        TimmBackbone("resnet181")


# --- neck and embedder ---------------------------------------------------------------------------------------------


def test_embedding_neck_layers_and_shape():
    neck = EmbeddingNeck(64, embedding_dim=32, dropout=0.1)
    assert [type(m).__name__ for m in neck.layers] == ["BatchNorm1d", "Dropout", "Linear", "BatchNorm1d"]
    assert neck(torch.randn(8, 64)).shape == (8, 32)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [({"dropout": 1.0}, r"model.dropout=1.0 must lie in \[0, 1\)"), ({"embedding_dim": 0}, "positive integers")],
)
def test_embedding_neck_rejects_bad_arguments(kwargs, message):
    with pytest.raises(ValueError, match=message):
        EmbeddingNeck(64, **kwargs)


@pytest.mark.parametrize("backbone", [lambda: build_dpn("tiny"), lambda: TimmBackbone("resnet18")])
def test_face_embedder_returns_neck_embeddings(backbone):
    embedder = FaceEmbedder(backbone())
    embeddings = embedder(torch.randn(4, 3, 32, 32))
    assert embeddings.shape == (4, 512)
    # The embedding is the neck's output: it ends in the neck's BatchNorm1d, not a classifier.
    assert embedder.neck.layers[-1].num_features == 512


@pytest.mark.parametrize("backbone", [lambda: build_dpn("tiny"), lambda: TimmBackbone("resnet18")])
def test_channels_last_embedder_keeps_nhwc_and_computes_the_same_embeddings_and_input_gradients(backbone):
    torch.manual_seed(0)
    nchw = FaceEmbedder(backbone(), embedding_dim=16).eval()
    nhwc = FaceEmbedder(backbone(), embedding_dim=16, channels_last=True).eval()
    nhwc.load_state_dict(nchw.state_dict())  # copied into the NHWC weights, which stay NHWC
    convolutions = [m.weight for m in nhwc.modules() if isinstance(m, torch.nn.Conv2d)]
    assert convolutions and all(w.is_contiguous(memory_format=torch.channels_last) for w in convolutions)
    assert not all(w.is_contiguous() for w in convolutions)
    images = [torch.randn(3, 3, 32, 32, requires_grad=True) for _ in range(2)]
    images[1].data.copy_(images[0].data)
    outputs = [model(image) for model, image in zip((nchw, nhwc), images, strict=True)]
    torch.testing.assert_close(outputs[1], outputs[0], rtol=1e-4, atol=1e-4)
    for output in outputs:
        output.pow(2).sum().backward()
    torch.testing.assert_close(images[1].grad, images[0].grad, rtol=1e-3, atol=1e-4)


def test_face_embedder_requires_num_features():
    with pytest.raises(ValueError, match="must expose an int attribute num_features"):
        FaceEmbedder(torch.nn.Identity())
