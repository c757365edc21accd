"""Face-identification metrics (fairnas.metrics) against hand-computed cases and a naive reference."""

import math

import numpy as np
import pytest
import torch

from fairnas.metrics import (
    OUTSIDE_GROUP_ORDER,
    NonFiniteEmbeddingsError,
    face_identification_metrics,
    group_disparities,
    group_names,
    probe_ranks,
)


def _line(positions):
    """1-D embeddings: squared distances are exact integers, so ties are exact."""
    return np.asarray(positions, dtype=np.float32)[:, None]


# Two groups on a line (normalize=False). Identities A, B have two images; C, D are singletons (gallery only).
#   x:  0   5   1   2   3   -1
#   id: A   A   B   B   C   D
#   g:  m   m   f   f   f   m
# Probe x=0: d+ = 5; closer: B(1), B(2), C(3), D(1) -> by identity 3 (B, C, D), by image 4.
# Probe x=5: d+ = 5; closer: B(4), B(3), C(2)       -> by identity 2, by image 3.
# Probe x=1: d+ = 1; A at x=0 is also at 1 (tie -> genuine wins)  -> 0.
# Probe x=2: d+ = 1; C at x=3 is also at 1 (tie)                  -> 0.
TWO_GROUPS = dict(
    embeddings=_line([0, 5, 1, 2, 3, -1]),
    identities=["A", "A", "B", "B", "C", "D"],
    groups=["m", "m", "f", "f", "f", "m"],
)

# Three groups, each built from patterns placed far apart on a line (normalize=False).
#   "one bad" at o: A {o, o+1}, B {o+3, o+6}: probe o+3 has d+ = 3 and only A's o+1 (2) strictly closer
#                   (A's o at 3 ties) -> ranks [0, 0, 1, 0] by identity and by image.
#   "clean"   at o: A {o, o+1}, B {o+3, o+4} -> ranks [0, 0, 0, 0].
#   "spread"  at o: A {o, o+10}, B {o+4, o+5}, C {o+6, o+7}: probes o and o+10 have d+ = 10 with B and C (4 images)
#                   closer -> identity ranks [2, 2, 0, 0, 0, 0], image ranks [4, 4, 0, 0, 0, 0]; the other
#                   probes have d+ = 1 and only ties at 1.
# Group a = one bad (R 1/4, E 1/4), b = clean + one bad (R 1/8, E 1/8), c = spread (R 2/3, E 1/3).
THREE_GROUPS = dict(
    embeddings=_line([0, 1, 3, 6] + [100, 101, 103, 104, 200, 201, 203, 206] + [300, 310, 304, 305, 306, 307]),
    identities=[0, 0, 1, 1] + [2, 2, 3, 3, 4, 4, 5, 5] + [6, 6, 7, 7, 8, 8],
    groups=["a"] * 4 + ["b"] * 8 + ["c"] * 6,
)


def test_two_groups_rank_by_identity_with_ties_and_zero_denominators():
    metrics = face_identification_metrics(**TWO_GROUPS, normalize=False)
    expected = {
        "n_probes": 4.0,
        "rank": 5 / 4,
        "error": 0.5,
        "accuracy": 0.5,
        "n_probes/m": 2.0,
        "rank/m": 2.5,
        "error/m": 1.0,
        "accuracy/m": 0.0,
        "n_probes/f": 2.0,
        "rank/f": 0.0,
        "error/f": 0.0,
        "accuracy/f": 1.0,
        # default order is sorted: g0 = f, g1 = m
        "rank_disparity": 2.5,
        "disparity": 1.0,
        "ratio": math.inf,  # |1 - A_f / A_m| = |1 - 1 / 0|
        "rank_ratio": 1.0,  # |1 - 0 / 2.5|
        "error_ratio": 1.0,  # |1 - 0 / 1|
    }
    assert metrics == pytest.approx(expected)


def test_group_order_sets_numerator_group():
    metrics = face_identification_metrics(**TWO_GROUPS, normalize=False, group_order=["m", "f"])
    assert metrics["ratio"] == pytest.approx(1.0)  # |1 - 0 / 1|
    assert metrics["rank_ratio"] == math.inf  # |1 - 2.5 / 0|
    assert metrics["error_ratio"] == math.inf  # |1 - 1 / 0|
    assert metrics["rank_disparity"] == pytest.approx(2.5)


def test_two_groups_rank_by_image_counts_images():
    metrics = face_identification_metrics(**TWO_GROUPS, normalize=False, rank_by="image")
    assert metrics["rank"] == pytest.approx(7 / 4)
    assert metrics["rank/m"] == pytest.approx(3.5)
    assert metrics["error"] == pytest.approx(0.5)
    assert metrics["rank_disparity"] == pytest.approx(3.5)


def test_singletons_are_gallery_but_not_probes():
    embeddings = _line([0, 5, 1, 2, 3, -1])
    ranks = probe_ranks(
        torch.as_tensor(embeddings), torch.tensor([0, 0, 1, 1, 2, 3]), torch.tensor([0, 1, 2, 3]), normalize=False
    )
    assert ranks.tolist() == [3, 2, 0, 0]
    without_singletons = face_identification_metrics(
        embeddings[:4], ["A", "A", "B", "B"], ["m", "m", "f", "f"], normalize=False
    )
    assert without_singletons["rank/m"] == pytest.approx(1.0)  # only B remains closer for both A probes


def test_three_groups_use_max_min_forms():
    metrics = face_identification_metrics(**THREE_GROUPS, normalize=False)
    expected = {
        "n_probes": 18.0,
        "rank": 6 / 18,
        "error": 4 / 18,
        "accuracy": 14 / 18,
        "rank/a": 1 / 4,
        "error/a": 1 / 4,
        "accuracy/a": 3 / 4,
        "n_probes/a": 4.0,
        "rank/b": 1 / 8,
        "error/b": 1 / 8,
        "accuracy/b": 7 / 8,
        "n_probes/b": 8.0,
        "rank/c": 2 / 3,
        "error/c": 1 / 3,
        "accuracy/c": 2 / 3,
        "n_probes/c": 6.0,
        "rank_disparity": 2 / 3 - 1 / 8,
        "disparity": 7 / 8 - 2 / 3,
        "ratio": (7 / 8) / (2 / 3) - 1,
        "rank_ratio": (2 / 3) / (1 / 8) - 1,
        "error_ratio": (1 / 3) / (1 / 8) - 1,
    }
    assert metrics == pytest.approx(expected)


def test_three_groups_rank_by_image_differs_from_identity():
    by_image = face_identification_metrics(**THREE_GROUPS, normalize=False, rank_by="image")
    assert by_image["rank/c"] == pytest.approx(8 / 6)
    assert by_image["rank"] == pytest.approx(10 / 18)
    assert by_image["error"] == pytest.approx(4 / 18)
    assert by_image["rank_disparity"] == pytest.approx(8 / 6 - 1 / 8)


def test_group_order_subset_compares_only_named_groups():
    metrics = face_identification_metrics(**THREE_GROUPS, normalize=False, group_order=["c", "a"])
    assert "rank/b" not in metrics
    assert metrics["rank_disparity"] == pytest.approx(2 / 3 - 1 / 4)
    assert metrics["rank_ratio"] == pytest.approx(abs(1 - (2 / 3) / (1 / 4)))
    assert metrics["n_probes"] == 18.0  # overall metrics still use every probe


def test_integer_group_labels_are_keyed_by_str_and_matched_in_group_order():
    groups = [0, 0, 1, 1, 1, 0]  # m -> 0, f -> 1
    metrics = face_identification_metrics(
        TWO_GROUPS["embeddings"], TWO_GROUPS["identities"], groups, normalize=False, group_order=[1, 0]
    )
    assert metrics["rank/0"] == pytest.approx(2.5)
    assert metrics["ratio"] == math.inf  # g0 = 1 (accuracy 1), g1 = 0 (accuracy 0)


def test_normalize_flag_changes_distances():
    # a=(1,0) and b=(10,0) share identity 0; c=(0,1) and c2=(0,3) share identity 1.
    # Raw: probe a has d+ = 9 but c at sqrt(2) -> rank 1; probe c has d+ = 2 but a at sqrt(2) -> rank 1.
    # Normalised: a == b and c == c2, every d+ = 0 -> all ranks 0.
    embeddings = np.array([[1, 0], [10, 0], [0, 1], [0, 3]], dtype=np.float32)
    args = (embeddings, [0, 0, 1, 1], ["x", "x", "y", "y"])
    raw = face_identification_metrics(*args, normalize=False)
    assert raw["rank"] == pytest.approx(0.5)
    assert raw["error/x"] == pytest.approx(0.5)
    normalised = face_identification_metrics(*args)
    assert normalised["rank"] == 0.0
    assert normalised["error"] == 0.0


def test_numpy_and_torch_inputs_agree():
    from_numpy = face_identification_metrics(**THREE_GROUPS, normalize=False)
    from_torch = face_identification_metrics(
        torch.as_tensor(THREE_GROUPS["embeddings"], dtype=torch.float64),
        torch.tensor(THREE_GROUPS["identities"]),
        THREE_GROUPS["groups"],
        normalize=False,
    )
    assert from_torch == pytest.approx(from_numpy)


@pytest.mark.parametrize("block_size", [1, 3, 18])
def test_block_size_does_not_change_result(block_size):
    reference = face_identification_metrics(**THREE_GROUPS, normalize=False, block_size=1024)
    assert face_identification_metrics(**THREE_GROUPS, normalize=False, block_size=block_size) == reference


@pytest.mark.gpu
def test_cuda_embeddings_match_cpu():
    cpu = face_identification_metrics(**THREE_GROUPS, normalize=False)
    cuda = face_identification_metrics(
        torch.as_tensor(THREE_GROUPS["embeddings"], device="cuda"),
        torch.tensor(THREE_GROUPS["identities"], device="cuda"),
        THREE_GROUPS["groups"],
        normalize=False,
    )
    assert cuda == pytest.approx(cpu)


def _naive_ranks(embeddings, identities, rank_by):
    """Reference: full distance matrix and a Python loop per probe, straight from the definitions."""
    distances = np.linalg.norm(embeddings[:, None, :] - embeddings[None, :, :], axis=-1)
    ranks = {}
    for i in range(len(embeddings)):
        same = (identities == identities[i]) & (np.arange(len(embeddings)) != i)
        if not same.any():
            continue
        genuine = distances[i, same].min()
        closer = (identities != identities[i]) & (distances[i] < genuine)
        ranks[i] = len(set(identities[closer])) if rank_by == "identity" else int(closer.sum())
    return ranks


@pytest.mark.parametrize("rank_by", ["identity", "image"])
@pytest.mark.parametrize("normalize", [True, False])
def test_matches_naive_reference_on_random_data(rank_by, normalize):
    rng = np.random.default_rng(0)
    n_identities = 60
    images_per_identity = rng.integers(1, 10, size=n_identities)
    identities = np.repeat(np.arange(n_identities), images_per_identity)[:300]
    centres = rng.normal(size=(n_identities, 16))
    embeddings = centres[identities] + 0.9 * rng.normal(size=(len(identities), 16))
    groups = np.array(["g0", "g1", "g2"])[identities % 3]

    metrics = face_identification_metrics(
        embeddings, identities, groups, rank_by=rank_by, normalize=normalize, block_size=37
    )

    unit = embeddings / np.linalg.norm(embeddings, axis=1, keepdims=True) if normalize else embeddings
    ranks = _naive_ranks(unit, identities, rank_by)
    probes = np.array(sorted(ranks))
    probe_ranks_ = np.array([ranks[i] for i in probes])
    assert metrics["n_probes"] == len(probes)
    assert metrics["rank"] == pytest.approx(probe_ranks_.mean())
    assert metrics["error"] == pytest.approx((probe_ranks_ > 0).mean())
    assert 0 < metrics["error"] < 1
    per_group = {}
    for g in ["g0", "g1", "g2"]:
        in_group = groups[probes] == g
        per_group[g] = {
            "rank": probe_ranks_[in_group].mean(),
            "error": (probe_ranks_[in_group] > 0).mean(),
            "accuracy": 1 - (probe_ranks_[in_group] > 0).mean(),
        }
        assert metrics[f"rank/{g}"] == pytest.approx(per_group[g]["rank"])
        assert metrics[f"error/{g}"] == pytest.approx(per_group[g]["error"])
    ranks_by_group = [per_group[g]["rank"] for g in per_group]
    assert metrics["rank_disparity"] == pytest.approx(max(ranks_by_group) - min(ranks_by_group))


def test_group_disparities_two_groups():
    per_group = {
        "male": {"rank": 2.0, "accuracy": 0.9, "error": 0.1},
        "female": {"rank": 4.0, "accuracy": 0.6, "error": 0.4},
    }
    assert group_disparities(per_group, ["male", "female"]) == pytest.approx(
        {"rank_disparity": 2.0, "disparity": 0.3, "ratio": 0.5, "rank_ratio": 0.5, "error_ratio": 0.75}
    )


@pytest.mark.parametrize("order", [["a", "b"], ["a", "b", "c"]])
def test_group_disparities_zero_denominator_rules(order):
    # a and b are equal with all-zero rank and error (0/0 -> 0); c adds a non-zero rank over a zero minimum.
    per_group = {
        "a": {"rank": 0.0, "accuracy": 1.0, "error": 0.0},
        "b": {"rank": 0.0, "accuracy": 1.0, "error": 0.0},
        "c": {"rank": 0.5, "accuracy": 1.0, "error": 0.0},
    }
    result = group_disparities(per_group, order)
    assert result["error_ratio"] == 0.0
    assert result["ratio"] == 0.0
    assert result["rank_ratio"] == (0.0 if order == ["a", "b"] else math.inf)


def test_a_disparity_over_one_group_is_refused_not_zero():
    """Over one group there is nothing to compare: a disparity of 0 would read as a fair model."""
    with pytest.raises(ValueError, match=r"a disparity needs at least two groups, not 1: \['a'\]"):
        group_disparities({"a": {"rank": 3.0, "accuracy": 0.5, "error": 0.5}}, ["a"])


@pytest.mark.parametrize(
    ("per_group", "order", "message"),
    [
        ({"a": {"rank": 0.0, "accuracy": 1.0, "error": 0.0}}, [], "at least one group"),
        ({"a": {"rank": 0.0, "accuracy": 1.0, "error": 0.0}}, ["a", "z"], "group 'z' in group_order is missing"),
        (
            {"a": {"rank": 0.0, "accuracy": 1.0}, "b": {"rank": 0.0, "accuracy": 1.0, "error": 0.0}},
            ["a", "b"],
            r"lacks \['error'\]",
        ),
        ({"a": {"rank": 0.0, "accuracy": 1.0, "error": 0.0}}, ["a", "a"], "duplicate"),
    ],
)
def test_group_disparities_errors(per_group, order, message):
    with pytest.raises(ValueError, match=message):
        group_disparities(per_group, order)


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"identities": ["A", "A", "B", "B", "C"]}, "identities has 5 labels but embeddings has 6 rows"),
        ({"groups": ["m", "m", "f"]}, "groups has 3 labels but embeddings has 6 rows"),
        ({"embeddings": np.zeros(6, dtype=np.float32)}, "embeddings must be 2-D"),
        ({"identities": list("ABCDEF")}, "no probes"),
        ({"groups": ["m", "m", "f", "f", "z", "z"]}, "group 'z' has no probes"),
        ({"group_order": ["m", "x"]}, "group 'x' in group_order is not among the group labels"),
        ({"group_order": []}, "at least one group"),
        ({"group_order": ["m"]}, r"a disparity needs at least two groups, not 1: \['m'\]"),
        ({"groups": ["m"] * 6}, r"a disparity needs at least two groups, not 1: \['m'\]"),
        ({"rank_by": "distance"}, "rank_by must be one of"),
        ({"block_size": 0}, "block_size=0 must be a positive integer"),
    ],
)
def test_bad_input_raises(changes, message):
    with pytest.raises(ValueError, match=message):
        face_identification_metrics(**{**TWO_GROUPS, **changes})


def test_read_only_numpy_embeddings_are_accepted_without_warning(recwarn):
    embeddings = TWO_GROUPS["embeddings"].copy()
    embeddings.flags.writeable = False  # as from np.load(..., mmap_mode="r")
    metrics = face_identification_metrics(**{**TWO_GROUPS, "embeddings": embeddings}, normalize=False)
    assert metrics["rank"] == pytest.approx(5 / 4)
    assert not [w for w in recwarn if "not writable" in str(w.message)]


@pytest.mark.parametrize("bad", [math.nan, math.inf, -math.inf])
@pytest.mark.parametrize("rows", ["one", "all"])
def test_non_finite_embeddings_are_refused_not_ranked(bad, rows):
    """NaN compares False with everything: ranked, it would score error 0 and rank disparity 0."""
    embeddings = TWO_GROUPS["embeddings"].astype(np.float32).copy()
    embeddings[: 1 if rows == "one" else None] = bad
    with pytest.raises(NonFiniteEmbeddingsError, match=r"rows hold NaN or inf values"):
        face_identification_metrics(**{**TWO_GROUPS, "embeddings": embeddings})


def test_probes_of_groups_outside_the_order_are_reported_under_no_group():
    """Group codes as the training module holds them: -1 for a group that data.group_order does not list."""
    codes = np.array([{"a": 0, "b": 1}.get(group, -1) for group in THREE_GROUPS["groups"]])
    names = group_names(codes, ["a", "b"])
    assert set(names) == {"a", "b", OUTSIDE_GROUP_ORDER}
    listed = face_identification_metrics(
        THREE_GROUPS["embeddings"], THREE_GROUPS["identities"], names, group_order=["a", "b"], normalize=False
    )
    everything = face_identification_metrics(**THREE_GROUPS, normalize=False)
    for key in ("error", "rank", "n_probes"):
        assert listed[key] == everything[key]  # every probe counts overall and every image is in the gallery
        for group in ("a", "b"):
            assert listed[f"{key}/{group}"] == everything[f"{key}/{group}"]
    assert (listed["n_probes/a"], listed["n_probes/b"], listed["n_probes"]) == (4, 8, 18)
    assert not any(OUTSIDE_GROUP_ORDER in key for key in listed)
    assert listed["rank_disparity"] == pytest.approx(abs(everything["rank/a"] - everything["rank/b"]))


def _exact_ranks(embeddings, identities):
    """Reference with one float64 reduction per gallery row: bitwise-identical rows get identical scores."""
    unit = embeddings.double() / embeddings.double().norm(dim=1, keepdim=True)
    ranks = []
    for probe in range(len(unit)):
        scores = (unit * unit[probe]).sum(dim=1)
        scores[probe] = -math.inf
        same = identities == identities[probe]
        genuine = scores[same].max()
        ranks.append(len(set(identities[(~same) & (scores > genuine)].tolist())))
    return torch.tensor(ranks)


@pytest.mark.parametrize("dim", [17, 64])
def test_duplicated_images_tie_with_the_genuine_match_for_every_block_size(dim):
    """Each identity's second image also appears (bitwise identical) under the next identity: a tie with the genuine
    match, which the probe wins. Blocks of one probe (n_probes % block_size == 1) used a matrix-vector kernel and
    edge tiles of matrix products can score identical rows differently; ranks must not depend on block_size."""
    torch.manual_seed(0)
    n_identities = 13
    base = torch.randn(2 * n_identities, dim)
    embeddings = torch.cat([base, base[1::2]])
    identities = torch.cat([torch.arange(n_identities).repeat_interleave(2), (torch.arange(n_identities) + 1) % 13])
    probes = torch.arange(len(identities))
    expected = _exact_ranks(embeddings, identities)
    unit = torch.nn.functional.normalize(embeddings, dim=1)
    block_sizes = range(1, len(probes) + 2)
    assert any(len(probes) % size == 1 for size in block_sizes)
    for block_size in block_sizes:
        assert torch.equal(probe_ranks(unit, identities, probes, block_size=block_size), expected), block_size
