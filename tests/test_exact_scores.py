"""Exact ranks from fast similarity products (fairnas.metrics.exact_scores, genuine_band) on tied and near-tied data."""

import math

import pytest
import torch
import torch.nn.functional as F

from fairnas.metrics import face_identification_metrics, probe_ranks
from fairnas.metrics.exact_scores import ExactScorer, score_dtype

PRECISIONS = ("float32", "bfloat16")
GAPS = (-1e-3, -1e-4, -1e-5, 1e-5, 1e-4, 1e-3)  # far below bfloat16's resolution, far above float32 rounding


def _reference_ranks(unit, identities, rank_by):
    """float64 ranks of the stored (float32) vectors, one probe at a time, straight from the definition."""
    unit = unit.double().cpu()
    identities = identities.cpu()
    ranks = []
    for probe in range(len(unit)):
        scores = unit @ unit[probe]
        scores[probe] = -math.inf
        same = identities == identities[probe]
        genuine = scores[same].max()
        closer = (~same) & (scores > genuine)
        ranks.append(len(set(identities[closer].tolist())) if rank_by == "identity" else int(closer.sum()))
    return torch.tensor(ranks)


def _near_ties(dim=64, seed=0):
    """Probes whose genuine score is 0.6 and impostors at 0.6 + gap for every gap in GAPS, randomly rotated."""
    generator = torch.Generator().manual_seed(seed)
    rows, identities = [], []
    for probe_identity in range(6):
        probe = torch.zeros(dim, dtype=torch.float64)
        probe[0] = 1.0
        # Genuine match at cosine 0.6, impostors at 0.6 + gap, their other components spread over random axes.
        for identity_offset, cosine in enumerate([0.6, *(0.6 + gap for gap in GAPS)]):
            rest = torch.randn(dim - 1, generator=generator, dtype=torch.float64)
            side = rest / rest.norm() * math.sqrt(1 - cosine**2)
            rows.append(torch.cat([torch.tensor([cosine], dtype=torch.float64), side]))
            identities.append(probe_identity if identity_offset == 0 else 100 + 10 * probe_identity + identity_offset)
        rows.append(probe)
        identities.append(probe_identity)
    rotation, _ = torch.linalg.qr(torch.randn(dim, dim, generator=generator, dtype=torch.float64))
    embeddings = F.normalize((torch.stack(rows) @ rotation).float(), dim=1)
    return embeddings, torch.tensor(identities)


def _probes(identities):
    counts = torch.bincount(torch.unique(identities, return_inverse=True)[1])
    codes = torch.unique(identities, return_inverse=True)[1]
    return codes, torch.nonzero(counts[codes] >= 2).squeeze(1)


@pytest.mark.parametrize("precision", PRECISIONS)
@pytest.mark.parametrize("rank_by", ["identity", "image"])
@pytest.mark.parametrize("block_size", [1, 4, 1024])
def test_near_ties_rank_exactly_at_every_precision(precision, rank_by, block_size):
    embeddings, identities = _near_ties()
    codes, probes = _probes(identities)
    expected = _reference_ranks(embeddings, codes, rank_by)[probes]
    assert set(expected.tolist()) > {0}  # three impostors per probe are closer, by at most 1e-3
    ranks = probe_ranks(embeddings, codes, probes, rank_by=rank_by, block_size=block_size, score_precision=precision)
    assert torch.equal(ranks, expected)


def test_bfloat16_scores_alone_misorder_the_near_ties():
    """The test above can fail: bfloat16's own scores put impostors on the wrong side of the genuine score."""
    embeddings, identities = _near_ties()
    scorer = ExactScorer(embeddings, normalize=True, dtype=torch.bfloat16)
    exact = embeddings.double() @ embeddings.double().T
    fast = scorer.scores(torch.arange(len(embeddings))).double()
    genuine_probe, genuine_image = 7, 0  # the first probe and its genuine match
    fast_order = fast[:7, genuine_probe] > fast[genuine_image, genuine_probe]
    exact_order = exact[:7, genuine_probe] > exact[genuine_image, genuine_probe]
    assert not torch.equal(fast_order, exact_order)
    bound = scorer.tolerance(torch.tensor([genuine_probe]))
    assert bool(((fast - exact).abs()[:, genuine_probe] <= bound).all())  # the bound holds


@pytest.mark.parametrize("precision", PRECISIONS)
def test_exact_ties_go_to_the_genuine_match(precision):
    """Three impostors score exactly the genuine score of probe 0: one mirrored about the probe's axis, one turned
    onto another axis, one a bitwise-identical copy of the genuine image. Probe 0 wins every tie (rank 0) although
    the fast scores round; probe 1 (the genuine image) has its copy strictly closer than probe 0 (rank 1)."""
    dim, cosine = 8, 0.612345678
    probe = torch.zeros(dim)
    probe[0] = 1.0
    genuine = torch.zeros(dim)
    genuine[0], genuine[1] = cosine, math.sqrt(1 - cosine**2)
    mirrored = genuine.clone()
    mirrored[1] = -mirrored[1]
    rotated = torch.zeros(dim)
    rotated[0], rotated[5] = cosine, math.sqrt(1 - cosine**2)
    embeddings = torch.stack([probe, genuine, mirrored, rotated, genuine.clone()])
    identities = torch.tensor([0, 0, 1, 2, 3])
    codes, probes = _probes(identities)
    for rank_by in ("identity", "image"):
        ranks = probe_ranks(embeddings, codes, probes, rank_by=rank_by, score_precision=precision)
        assert ranks.tolist() == [0, 1], rank_by


@pytest.mark.parametrize("normalize", [True, False])
def test_metrics_are_identical_for_every_precision_on_random_data(normalize):
    generator = torch.Generator().manual_seed(1)
    identities = torch.randint(0, 40, (400,), generator=generator)
    centres = torch.randn(40, 32, generator=generator)
    embeddings = centres[identities] + 1.5 * torch.randn(400, 32, generator=generator)
    groups = (identities % 2).tolist()
    results = [
        face_identification_metrics(
            embeddings, identities, groups, normalize=normalize, block_size=64, score_precision=precision
        )
        for precision in PRECISIONS
    ]
    assert 0.05 < results[0]["error"] < 0.95
    assert results[1] == results[0]


@pytest.mark.parametrize("rank_by", ["identity", "image"])
def test_structureless_embeddings_switch_bfloat16_to_float32_and_stay_exact(rank_by, monkeypatch):
    """Chance-level embeddings (an untrained model) put most impostors within bfloat16's bound of the genuine score:
    after the first such block the engine multiplies in float32, and the ranks do not change."""
    from fairnas.metrics import identification

    built = []
    monkeypatch.setattr(
        identification,
        "ExactScorer",
        lambda *args, **kwargs: built.append(kwargs["dtype"]) or ExactScorer(*args, **kwargs),
    )
    generator = torch.Generator().manual_seed(2)
    embeddings = F.normalize(torch.randn(600, 256, generator=generator), dim=1)
    codes, probes = _probes(torch.randint(0, 120, (600,), generator=generator))
    ranks = probe_ranks(embeddings, codes, probes, rank_by=rank_by, block_size=128, score_precision="bfloat16")
    assert built == [torch.bfloat16, torch.float32]
    assert torch.equal(ranks, _reference_ranks(embeddings, codes, rank_by)[probes])


def test_the_default_product_is_bfloat16_on_the_cpu_and_float32_on_a_gpu(monkeypatch):
    from fairnas.metrics import identification

    built = []
    monkeypatch.setattr(
        identification,
        "ExactScorer",
        lambda *args, **kwargs: built.append(kwargs["dtype"]) or ExactScorer(*args, **kwargs),
    )
    embeddings, identities = _near_ties()
    codes, probes = _probes(identities)
    probe_ranks(embeddings, codes, probes)
    assert built[0] == torch.bfloat16  # (these near ties then fall back to float32)
    assert score_dtype("auto", torch.device("cuda")) == torch.float32 and score_dtype("float32") == torch.float32


def test_unknown_precision_is_refused_before_any_work():
    embeddings, identities = _near_ties()
    with pytest.raises(
        ValueError, match=r"^score_precision must be one of \['auto', 'float32', 'bfloat16'\], got 'fp8'$"
    ):
        face_identification_metrics(embeddings, identities, identities, score_precision="fp8")


@pytest.mark.gpu
@pytest.mark.parametrize("precision", PRECISIONS)
def test_near_ties_rank_exactly_on_cuda(precision):
    embeddings, identities = _near_ties()
    codes, probes = _probes(identities)
    expected = _reference_ranks(embeddings, codes, "identity")[probes]
    ranks = probe_ranks(embeddings.cuda(), codes.cuda(), probes.cuda(), score_precision=precision)
    assert torch.equal(ranks.cpu(), expected)
