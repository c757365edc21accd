"""The OOD audit (DistroFair): exact re-rendering, ID/OOD labels from training metadata, planted effects, the
statistics, and the errors for mutations that do not exist or do not apply."""

from __future__ import annotations

import functools
import itertools
import json
import shutil

import numpy as np
import pandas as pd
import pytest
import torch
from omegaconf import OmegaConf
from PIL import Image
from scipy.stats import fisher_exact
from statsmodels.stats.multitest import multipletests

from fairnas.audits import ood
from fairnas.audits.base import AuditData
from fairnas.data import FaceDataModule
from fairnas.data.formats.generic import read_generic
from fairnas.data.sources import synthetic_faces
from fairnas.data.synthetic import SyntheticFaceSpec, render_synthetic_faces
from fairnas.data.synthetic.mutations import (
    ID,
    OOD,
    Mutation,
    MutationPlanner,
    SyntheticSource,
    TrainingRanges,
    settings_from,
    transform_image,
)

TRANSFORMS = {"image_size": 32, "resize": 36}
# Nearly frontal training faces: the data set's yaw range is what the model was "fit" on.
FRONTAL = dict(
    n_identities=40, images_per_identity=6, image_size=32, split_fractions=(0.4, 0.1, 0.5), max_yaw_deg=3.0, seed=5
)


class PixelModel:
    """Embedding = the image's pixels: a model whose gallery of frontal templates knows only frontal faces."""

    device = torch.device("cpu")

    def embed(self, images: torch.Tensor) -> torch.Tensor:
        return torch.nn.functional.normalize(images.flatten(1), dim=1)


class BackgroundModel:
    """Embedding = the colour of the top-left corner (background): its output ignores the pose of the face."""

    device = torch.device("cpu")

    def embed(self, images: torch.Tensor) -> torch.Tensor:
        return torch.nn.functional.normalize(images[:, :, :2, :2].flatten(1) + 2.0, dim=1)


def audit_data(root, **spec) -> AuditData:
    datamodule = FaceDataModule(functools.partial(synthetic_faces, root, **spec), transforms=TRANSFORMS)
    datamodule.setup()
    return AuditData(datamodule, "test", seed=0, batch_size=64)


def config(**options):
    return OmegaConf.create(
        {"mutations": "all", "max_probes_per_group": None, "gallery_images": 1, "alpha": 0.05, **options}
    )


@pytest.fixture(scope="module")
def frontal(tmp_path_factory) -> AuditData:
    return audit_data(tmp_path_factory.mktemp("ood_cache"), **FRONTAL)


def test_rerendering_without_overrides_reproduces_every_file(tmp_path):
    spec = SyntheticFaceSpec(
        n_identities=8, images_per_identity=3, image_size=32, glasses_prob=0.3, hat_prob=0.3, seed=2
    )
    root = render_synthetic_faces(spec, tmp_path)
    source = SyntheticSource.load(root)
    metadata = pd.read_csv(root / "metadata.csv")
    for row in metadata.itertuples():
        with Image.open(root / row.path) as file:
            on_disk = np.asarray(file.convert("RGB"))
        assert np.array_equal(np.asarray(source.render(row.path)), on_disk)
        assert source.conditions(row.path).metadata()["yaw"] == pytest.approx(row.yaw)
    path = metadata.path[0]
    turned = np.asarray(source.render(path, yaw=40.0))
    assert not np.array_equal(turned, np.asarray(source.render(path)))
    both = np.asarray(source.render(path, occluder="glasses+hat"))
    for single in ("glasses", "hat"):
        assert not np.array_equal(both, np.asarray(source.render(path, occluder=single)))
    with pytest.raises(ValueError, match="unknown occluder"):
        source.render(path, occluder="scarf")


def test_id_and_ood_values_follow_the_training_metadata():
    train = pd.DataFrame(
        {
            "yaw": [-20.0, 5.0, 18.0],
            "roll": [-3.0, 0.0, 4.0],
            "scale": [0.9, 1.0, 1.05],
            "illumination": [0.7, 1.0, 1.2],
            "occluder": ["none", "glasses", "hat"],
        }
    )
    ranges = TrainingRanges.from_frame(train)
    assert ranges.continuous["yaw"] == (-20.0, 18.0)
    assert ranges.as_dict()["occluders"] == {"none": ID, "glasses": ID, "hat": ID, "glasses+hat": OOD}
    planner = MutationPlanner(ranges, settings_from({"yaw_margin_deg": 15}))
    for seed in range(20):
        inside, outside = planner.draw("yaw", {}, np.random.default_rng(seed))
        assert inside.distribution == ID and -20.0 <= inside.value <= 18.0
        assert outside.distribution == OOD and outside.value in (pytest.approx(-35.0), pytest.approx(33.0))
        scale_in, scale_out = planner.draw("scale", {}, np.random.default_rng(seed))
        assert 0.9 <= scale_in.value <= 1.05 and scale_out.value in (pytest.approx(0.72), pytest.approx(1.26))
    occluders = planner.draw("occluders", {"occluder": "glasses"}, np.random.default_rng(0))
    assert [(m.value in ("none", "hat"), m.distribution) for m in occluders] == [(True, ID), (False, OOD)]
    assert occluders[1].value == "glasses+hat"
    # Training that always shows glasses: removing them is out of distribution (the data decides).
    always_glasses = TrainingRanges.from_frame(train.assign(occluder="glasses"))
    assert always_glasses.occluder_distribution("none") == OOD and always_glasses.occluder_distribution("glasses") == ID
    rotation = MutationPlanner(ranges, settings_from({"rotation_deg": [5, 25]})).draw(
        "rotation", {}, np.random.default_rng(1)
    )
    assert abs(rotation[0].value) <= 5 and abs(rotation[1].value) == 25 and rotation[1].distribution == OOD


def test_image_space_mutations_keep_the_size_and_do_nothing_at_identity():
    image = np.random.default_rng(0).integers(0, 256, size=(32, 32, 3), dtype=np.uint8)
    for mutation in (Mutation("rotation", 0.0, ID), Mutation("zoom", 1.0, ID), Mutation("crop", 1.0, ID, (0.3, 0.7))):
        assert np.array_equal(transform_image(image, mutation), image)
    outside = (Mutation("rotation", 30.0, OOD), Mutation("zoom", 1 / 1.4, OOD), Mutation("crop", 0.6, OOD, (0, 1)))
    for mutation in outside:
        out = transform_image(image, mutation)
        assert out.shape == image.shape and out.dtype == np.uint8 and not np.array_equal(out, image)


def test_a_pose_blind_model_never_flips_under_yaw(frontal):
    result = ood.audit(BackgroundModel(), frontal, config(mutations=["yaw"], yaw_margin_deg=25))
    records = result.tables["records"]
    assert set(records["distribution"]) == {ID, OOD} and len(records) == 2 * records["path"].nunique()
    assert not records["metamorphic"].any() and (records["ground_truth"] == 0).all()
    flips = result.tables["rates"].query("oracle == 'metamorphic'")
    assert (flips["violations"] == 0).all() and not flips["eq5_violation"].any()


def test_a_model_fit_on_frontal_faces_flips_more_out_of_distribution(frontal):
    result = ood.audit(PixelModel(), frontal, config(mutations=["yaw", "rotation"], yaw_margin_deg=25))
    records = result.tables["records"]
    yaw = records[records["mutation"] == "yaw"]
    assert yaw.loc[yaw["distribution"] == ID, "value"].abs().max() <= FRONTAL["max_yaw_deg"]
    assert (yaw.loc[yaw["distribution"] == OOD, "value"].abs() > FRONTAL["max_yaw_deg"] + 20).all()
    rate = yaw.groupby("distribution")["metamorphic"].mean()
    assert rate[OOD] > rate[ID] + 0.1
    assert (records["metamorphic"] == records["exclusion"] | records["inclusion"]).all()
    assert not (records["exclusion"] & records["inclusion"]).any()
    # the ground-truth oracle (Eq. 2): +1 for a break, -1 for a repair; its breaks are the exclusions
    assert ((records["ground_truth"] == 1) == records["exclusion"]).all()
    ratios = result.tables["ratios"].query("mutation == 'yaw' and oracle == 'metamorphic'")
    assert len(ratios) == 2 and set(ratios["group"]) == {"g0", "g1"}
    assert set(result.tables) == {"records", "rates", "tests", "ratios"}
    assert set(result.figures) == {"error_rates", "examples"}
    json.dumps(result.summary, allow_nan=False)
    assert result.summary["flip_rate"][OOD] > result.summary["flip_rate"][ID]
    assert result.summary["id_ranges"]["yaw"][1] <= FRONTAL["max_yaw_deg"]
    assert 2 <= result.finding.count(". ") + 1 <= 5 and "Eq. 5" in result.finding


def test_fisher_tests_and_holm_correction_match_scipy_and_statsmodels():
    counts = {"g0": (3, 40), "g1": (12, 40), "g2": (20, 50)}
    rows = [
        {
            "mutation": "yaw",
            "distribution": distribution,
            "oracle": "metamorphic",
            "group": group,
            "inputs": n,
            "violations": k + shift,
            "error_rate": (k + shift) / n,
        }
        for distribution, shift in ((ID, 0), (OOD, 5))
        for group, (k, n) in counts.items()
    ]
    tests = ood.fisher_tests(pd.DataFrame(rows), ["g0", "g1", "g2"], alpha=0.05)
    assert len(tests) == 2 * 3
    expected = []
    for shift in (0, 5):
        for a, b in itertools.combinations(counts, 2):
            (ka, na), (kb, nb) = counts[a], counts[b]
            expected.append(fisher_exact([[ka + shift, na - ka - shift], [kb + shift, nb - kb - shift]])[1])
    assert tests["p_value"].to_numpy() == pytest.approx(expected)
    reject, p_holm, _, _ = multipletests(expected, alpha=0.05, method="holm")
    assert tests["p_holm"].to_numpy() == pytest.approx(p_holm) and (tests["significant"] == reject).all()
    # Eq. 5 with two groups: the worse one is flagged however small the gap
    records = pd.DataFrame(
        {
            "group": ["g0"] * 100 + ["g1"] * 100,
            "mutation": "yaw",
            "distribution": OOD,
            **{o: [False] * 100 + [False] * 99 + [True] for o in ood.ORACLES},
        }
    )
    rates = ood.rate_table(records, ["g0", "g1"], ["yaw"]).query("oracle == 'metamorphic'").set_index("group")
    assert rates.loc["g1", "eq5_violation"] and not rates.loc["g0", "eq5_violation"]
    assert ood.fisher_tests(ood.rate_table(records, ["g0", "g1"], ["yaw"]), ["g0", "g1"], 0.05)["p_holm"].min() == 1


def test_unknown_and_inapplicable_mutations_are_refused(frontal, tmp_path):
    with pytest.raises(ValueError, match=r"ood\.mutations.*'blur'.*allowed.*yaw"):
        ood.check_config(config(mutations=["yaw", "blur"]))
    with pytest.raises(ValueError, match=r"ood\.rotation_deg"):
        ood.check_config(config(rotation_deg=[30, 10]))
    only_image_space = r"ood\.mutations.*\['yaw', 'occluders'\].*only \['rotation', 'zoom', 'crop'\]"
    with pytest.raises(ValueError, match=only_image_space):
        ood.resolve_mutations(config(mutations=["yaw", "occluders", "zoom"]), synthetic=False)
    # a real data set (no spec.json): `all` is the image-space mutations
    real = tmp_path / "real"
    shutil.copytree(frontal.root, real, ignore=shutil.ignore_patterns("spec.json"))
    datamodule = FaceDataModule(functools.partial(read_generic, real, attribute="group"), transforms=TRANSFORMS)
    datamodule.setup()
    data = AuditData(datamodule, "test")
    with pytest.raises(ValueError, match="on real images only"):
        ood.audit(PixelModel(), data, config(mutations=["yaw"]))
    result = ood.audit(PixelModel(), data, config(max_probes_per_group=5))
    assert set(result.tables["records"]["mutation"]) == {"rotation", "zoom", "crop"}
    assert result.summary["id_ranges"] == {} and not result.summary["synthetic"]
