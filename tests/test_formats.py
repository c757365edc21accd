"""The data set formats, each read from a fixture in its on-disk layout (``tests/layouts.py``): every registered format
through its ``data=`` option into a data module, and one epoch of training on a generated split."""

from __future__ import annotations

import dataclasses
import logging
import pickle
import shutil

import numpy as np
import pandas as pd
import pytest
import torch
from hydra.utils import instantiate
from omegaconf import OmegaConf

from fairnas.config import CONFIG_DIR, compose_config
from fairnas.data.formats import FORMATS, SplitSpec, read_bin, read_pairs_txt, read_rfw_benchmark
from fairnas.data.formats.celeba import read_celeba
from fairnas.data.formats.folders import read_folders
from fairnas.data.formats.rfw import read_rfw
from fairnas.data.formats.vggface2 import read_identity_meta, read_vggface2
from fairnas.data.masks import LANDMARK_COLUMNS
from fairnas.training.build import load_run
from fairnas.training.losses import FocalLoss
from fairnas.training.run import train
from tests import layouts
from tests.layouts import (
    CELEBA_ATTRIBUTES,
    RACES,
    write_bin,
    write_celeba,
    write_image,
    write_lfw,
    write_rfw,
    write_vggface2,
)

SPLIT = {"fractions": [0.6, 0.2, 0.2], "seed": 0}  # SplitSpec arguments


def split_of(table) -> dict[str, str]:
    """identity -> split, checking every identity sits in one split."""
    per_identity = table.frame.groupby("identity")["split"].unique()
    assert per_identity.map(len).eq(1).all()
    return per_identity.map(lambda splits: splits[0]).to_dict()


# --- CelebA -----------------------------------------------------------------------------------------------------


def test_celeba_male_is_the_default_group_and_other_attributes_are_metadata(tmp_path):
    male = write_celeba(tmp_path)
    table = read_celeba(tmp_path, split=SplitSpec(**SPLIT))
    frame = table.frame
    assert table.attribute == "Male" and len(frame) == 80
    assert frame.groupby("identity")["Male"].first().to_dict() == {k: "1" if v else "0" for k, v in male.items()}
    assert set(CELEBA_ATTRIBUTES) - {"Male"} <= set(frame.columns)
    assert set(frame["Young"].unique()) <= {0, 1}
    assert frame["path"].str.match(r"img_align_celeba/\d{6}\.jpg").all()
    assert (tmp_path / frame["path"]).map(lambda p: p.is_file()).all()
    assert not set(LANDMARK_COLUMNS) & set(frame.columns)  # no landmark file: no landmark columns


def test_celeba_landmarks_become_columns_when_their_file_is_there(tmp_path):
    write_celeba(tmp_path, landmarks=True)
    frame = read_celeba(tmp_path, split=SplitSpec(**SPLIT)).frame.set_index("path")
    assert frame.loc["img_align_celeba/000001.jpg", list(LANDMARK_COLUMNS)].tolist() == [
        69,
        109,
        106,
        113,
        77,
        142,
        73,
        152,
        108,
        154,
    ]
    assert frame.loc["img_align_celeba/000002.jpg", "nose_y"] == 143


def test_celeba_seeded_split_is_identity_disjoint_stratified_saved_and_readable(tmp_path):
    write_celeba(tmp_path / "celeba")
    saved = tmp_path / "run" / "splits" / "celeba.csv"
    table = read_celeba(tmp_path / "celeba", split=SplitSpec(**{**SPLIT, "save_to": str(saved)}))
    splits = split_of(table)
    groups = table.frame.groupby("identity")["Male"].first()
    counts = pd.crosstab(groups, pd.Series(splits))
    assert counts.loc["1"].to_dict() == counts.loc["0"].to_dict() == {"train": 6, "val": 2, "test": 2}

    file = pd.read_csv(saved, dtype=str)
    assert list(file.columns) == ["identity", "split"] and file.set_index("identity")["split"].to_dict() == splits
    assert split_of(read_celeba(tmp_path / "celeba", split=SplitSpec(**{"file": str(saved)}))) == splits
    assert split_of(read_celeba(tmp_path / "celeba", split=SplitSpec(**SPLIT))) == splits
    assert split_of(read_celeba(tmp_path / "celeba", split=SplitSpec(**{**SPLIT, "seed": 1}))) != splits


def test_celeba_official_partition_and_any_attribute(tmp_path):
    write_celeba(tmp_path, images_per_identity=3)  # odd: no tied per-identity vote of the random attributes
    table = read_celeba(tmp_path, attribute="Young", official_partition=True)
    splits = split_of(table)
    assert [splits[str(101 + k)] for k in range(20)] == ["train"] * 12 + ["val"] * 4 + ["test"] * 4
    assert table.attribute == "Young" and set(table.frame["Young"]) <= {"0", "1"}
    assert set(table.frame["Male"].unique()) == {0, 1}  # per image, as metadata


def test_celeba_counted_skips(tmp_path, caplog):
    write_celeba(tmp_path)
    (tmp_path / "img_align_celeba" / "000001.jpg").unlink()
    (tmp_path / "img_align_celeba" / "000002.jpg").write_bytes(b"truncated")
    attributes = (tmp_path / "list_attr_celeba.txt").read_text().splitlines()
    (tmp_path / "list_attr_celeba.txt").write_text(
        "\n".join(line for line in attributes if not line.startswith("000003.jpg"))
    )
    with caplog.at_level(logging.WARNING):
        table = read_celeba(tmp_path, split=SplitSpec(**SPLIT), verify_images=True)
    assert len(table.frame) == 77
    assert "celeba: skipped 1 images missing from list_attr_celeba.txt" in caplog.text
    assert "celeba: skipped 1 image files that do not exist" in caplog.text
    assert "celeba: skipped 1 image files that do not decode" in caplog.text


def test_celeba_identity_with_a_tied_vote_is_skipped(tmp_path, caplog):
    write_celeba(tmp_path)
    lines = (tmp_path / "list_attr_celeba.txt").read_text().splitlines()
    male = CELEBA_ATTRIBUTES.index("Male") + 1
    for row in (2, 3):  # the first two images of identity 101 (male) become female
        fields = lines[row].split()
        fields[male] = "-1"
        lines[row] = " ".join(fields)
    (tmp_path / "list_attr_celeba.txt").write_text("\n".join(lines) + "\n")
    with caplog.at_level(logging.WARNING):
        table = read_celeba(tmp_path, split=SplitSpec(**SPLIT))
    assert "101" not in set(table.frame["identity"])
    assert "skipped 4 images of 1 identities with a tied 'Male' vote" in caplog.text


def test_celeba_bad_input_is_named(tmp_path):
    with pytest.raises(FileNotFoundError, match=r"^data\.root: directory"):
        read_celeba(tmp_path / "nowhere")
    write_celeba(tmp_path)
    with pytest.raises(ValueError, match=r"'Gender' is not a CelebA attribute; allowed: \['5_o_Clock_Shadow'"):
        read_celeba(tmp_path, attribute="Gender")
    with pytest.raises(ValueError, match=r"split.fractions=\[0.5, 0.2, 0.2\]"):
        read_celeba(tmp_path, split=SplitSpec(**{"fractions": [0.5, 0.2, 0.2]}))
    with pytest.raises(ValueError, match="leave it none in the val split"):
        read_celeba(tmp_path, split=SplitSpec(**{"fractions": [0.98, 0.01, 0.01]}))
    with pytest.raises(FileNotFoundError, match="split file"):
        read_celeba(tmp_path, split=SplitSpec(**{"file": str(tmp_path / "missing.csv")}))
    (tmp_path / "identity_CelebA.txt").unlink()
    with pytest.raises(FileNotFoundError, match=r"identity_CelebA\.txt"):
        read_celeba(tmp_path)


def test_celeba_single_group_is_an_error(tmp_path):
    write_celeba(tmp_path)
    attributes = tmp_path / "list_attr_celeba.txt"
    lines = attributes.read_text().splitlines()
    male = CELEBA_ATTRIBUTES.index("Male") + 1
    rows = [line.split() for line in lines[2:]]
    for fields in rows:
        fields[male] = "1"
    attributes.write_text("\n".join(lines[:2] + [" ".join(fields) for fields in rows]) + "\n")
    with pytest.raises(ValueError, match=r"'Male' has the single value \['1'\]"):
        read_celeba(tmp_path, split=SplitSpec(**SPLIT))


def test_split_file_with_unknown_split_is_rejected(tmp_path):
    write_celeba(tmp_path)
    (tmp_path / "split.csv").write_text("identity,split\n101,training\n")
    with pytest.raises(ValueError, match=r"values \['training'\]; allowed: \['train', 'val', 'test'\]"):
        read_celeba(tmp_path, split=SplitSpec(**{"file": str(tmp_path / "split.csv")}))


# --- VGGFace2 ---------------------------------------------------------------------------------------------------


def test_vggface2_test_folder_is_test_and_val_is_carved_from_train(tmp_path):
    write_vggface2(tmp_path)
    table = read_vggface2(tmp_path, split=SplitSpec(**{"fractions": [0.75, 0.25, 0.0], "seed": 0}))
    splits = split_of(table)
    assert table.attribute == "Gender" and set(table.frame["Gender"]) == {"m", "f"}
    assert {identity for identity, split in splits.items() if split == "test"} == {
        f"n{k + 1:06d}" for k in range(16, 24)
    }
    gender = table.frame.groupby("identity")["Gender"].first()
    val = [identity for identity, split in splits.items() if split == "val"]
    assert sorted(gender[val]) == ["f", "f", "m", "m"]  # 25% of each group's 8 train identities
    assert table.frame["path"].str.match(r"(train|test)/n\d{6}/\d{4}_01\.jpg").all()


def test_vggface2_identity_meta_with_comma_in_a_name(tmp_path):
    write_vggface2(tmp_path)
    meta = read_identity_meta(tmp_path / "identity_meta.csv")
    assert list(meta.columns) == ["Name", "Sample_Num", "Flag", "Gender"]
    assert meta.loc["n000001", "Name"] == "Smith, Jr._John" and meta.loc["n000001", "Gender"] == "m"
    assert meta.loc["n000002", "Name"] == "Person_1"


def test_vggface2_identities_missing_from_meta_are_skipped(tmp_path, caplog):
    write_vggface2(tmp_path)
    write_image(tmp_path / "train" / "n999999" / "0001_01.jpg", np.random.default_rng(0))
    with caplog.at_level(logging.WARNING):
        table = read_vggface2(tmp_path, split=SplitSpec(**{"fractions": [0.75, 0.25, 0.0]}))
    assert "n999999" not in set(table.frame["identity"])
    assert "vggface2: skipped 1 images of 1 identities missing from identity_meta.csv" in caplog.text


# --- RFW, folders -----------------------------------------------------------------------------------------------


def test_rfw_has_four_race_groups(tmp_path):
    write_rfw(tmp_path)
    table = read_rfw(tmp_path, split=SplitSpec(**{"fractions": [0.34, 0.33, 0.33]}))
    assert table.attribute == "race"
    assert table.frame.groupby("race")["identity"].nunique().to_dict() == dict.fromkeys(RACES, 6)
    assert table.frame["path"].str.match(r"data/(African|Asian|Caucasian|Indian)/m\.0\w+/m\.0\w+_\d{4}\.jpg").all()


def test_rfw_missing_race_folder_is_named(tmp_path):
    write_rfw(tmp_path)
    for path in sorted((tmp_path / "data" / "Indian").rglob("*"), reverse=True):
        path.unlink() if path.is_file() else path.rmdir()
    (tmp_path / "data" / "Indian").rmdir()
    with pytest.raises(FileNotFoundError, match="data/Indian"):
        read_rfw(tmp_path)


def test_rfw_benchmark_pairs_per_race(tmp_path, caplog):
    write_rfw(tmp_path)
    (tmp_path / "data" / "Asian" / "m.0as1" / "m.0as1_0002.jpg").unlink()
    with caplog.at_level(logging.WARNING):
        benchmark = read_rfw_benchmark(tmp_path)
    pairs = benchmark.pairs
    assert benchmark.attribute == "race" and len(benchmark.images) == 4 * 6 * 3 - 1
    assert pairs.groupby("group").size().to_dict() == {"African": 40, "Asian": 34, "Caucasian": 40, "Indian": 40}
    assert sorted(pairs["fold"].unique()) == list(range(10))
    assert "rfw: skipped 6 pairs with a missing or unreadable image" in caplog.text
    first = pairs.iloc[0]
    images = benchmark.images["path"]
    assert (images[first.left], images[first.right], first.same) == (
        "data/African/m.0af0/m.0af0_0001.jpg",
        "data/African/m.0af0/m.0af0_0002.jpg",
        True,
    )
    mismatched = pairs.iloc[2]
    assert (images[mismatched.left], images[mismatched.right], mismatched.same) == (
        "data/African/m.0af0/m.0af0_0001.jpg",
        "data/African/m.0af1/m.0af1_0002.jpg",
        False,
    )


def test_a_benchmark_whose_attribute_holds_one_group_is_refused_before_embedding(tmp_path):
    """Its identification disparities would be over one group: undefined, not 0."""
    write_rfw(tmp_path)
    benchmark = read_rfw_benchmark(tmp_path)
    with pytest.raises(ValueError, match=r"^rfw: column 'race' holds only \['Asian'\]; a disparity needs two groups$"):
        dataclasses.replace(benchmark, images=benchmark.images.assign(race="Asian"))


def test_folders_with_attribute_csv(tmp_path, caplog):
    rng = np.random.default_rng(0)
    for k in range(10):
        for image in range(3):
            write_image(tmp_path / "faces" / f"person{k}" / f"{image}.jpg", rng)
    rows = [f"person{k},{'ab'[k % 2]},{20 + k}" for k in range(9)]  # person9 has no row
    (tmp_path / "people.csv").write_text("identity,skin,age\n" + "\n".join(rows) + "\n")
    with caplog.at_level(logging.WARNING):
        table = read_folders(
            tmp_path,
            attribute="skin",
            attributes="people.csv",
            images="faces",
            split=SplitSpec(**{"fractions": [0.5, 0.25, 0.25]}),
        )
    assert set(table.frame["skin"]) == {"a", "b"} and table.frame["age"].notna().all()
    assert table.frame["path"].iloc[0] == "faces/person0/0.jpg"
    assert "folders: skipped 3 images of 1 identities without a 'skin' value in people.csv" in caplog.text


# --- verification benchmarks ------------------------------------------------------------------------------------


def test_lfw_pairs_txt(tmp_path):
    write_lfw(tmp_path)
    benchmark = read_pairs_txt(tmp_path)
    pairs, images = benchmark.pairs, benchmark.images["path"]
    assert len(pairs) == 12 and pairs["fold"].tolist() == [0] * 6 + [1] * 6
    assert pairs["same"].tolist() == [True, True, True, False, False, False] * 2
    assert (images[pairs.left[3]], images[pairs.right[3]]) == (
        "lfw/Aaron_Peirsol/Aaron_Peirsol_0001.jpg",
        "lfw/Abel_Pacheco/Abel_Pacheco_0001.jpg",
    )
    assert set(pairs["group"]) == {"all"} and benchmark.attribute is None


def test_packed_bin_is_unpacked_once_and_broken_images_are_skipped(tmp_path, caplog):
    same = write_bin(tmp_path / "agedb_30.bin", n_pairs=20, broken=(5,))
    with caplog.at_level(logging.WARNING):
        benchmark = read_bin(tmp_path, "agedb_30.bin", cache_dir=tmp_path / "cache")
    assert benchmark.name == "agedb_30" and len(benchmark.images) == 39
    assert "agedb_30: skipped 1 images that do not decode" in caplog.text
    assert "agedb_30: skipped 1 pairs with a missing or unreadable image" in caplog.text
    pairs = benchmark.pairs
    assert len(pairs) == 19  # pair 2 held image 5
    assert pairs["same"].tolist() == [s for k, s in enumerate(same) if k != 2]
    assert pairs["fold"].tolist() == [k // 2 for k in range(20) if k != 2]
    images = benchmark.images["path"]
    assert (images[pairs.left[0]], images[pairs.right[0]]) == ("00000.jpeg", "00001.jpeg")

    (tmp_path / "agedb_30.bin").touch()  # same path and size, new mtime: unpacked again
    again = read_bin(tmp_path, "agedb_30.bin", cache_dir=tmp_path / "cache")
    assert again.root != benchmark.root and len(list((tmp_path / "cache").iterdir())) == 2
    assert read_bin(tmp_path, "agedb_30.bin", cache_dir=tmp_path / "cache").root == again.root


def test_packed_bin_refuses_code_and_wrong_structure(tmp_path):
    class Exploit:
        def __reduce__(self):
            return (print, ("side effect",))

    (tmp_path / "evil.bin").write_bytes(pickle.dumps(([Exploit(), b""], [True])))
    with pytest.raises(ValueError, match=r"refusing to load builtins\.print"):
        read_bin(tmp_path, "evil.bin", cache_dir=tmp_path / "cache")
    (tmp_path / "odd.bin").write_bytes(pickle.dumps(([b"a", b"b", b"c"], [True])))
    with pytest.raises(ValueError, match="3 images for 1 pairs"):
        read_bin(tmp_path, "odd.bin", cache_dir=tmp_path / "cache")


# --- training on the real layouts ---------------------------------------------------------------------------------


def format_config(tmp_path, data: str, root, *overrides: str):
    """The training config on a format fixture: tiny images, CPU, one epoch (the tiny_config pattern)."""
    return compose_config(
        "train",
        [
            f"data={data}",
            f"data.root={root}",
            "data.num_workers=0",
            "data.transforms.image_size=16",
            "data.transforms.resize=20",
            "data.batch_size=8",
            "data.eval_batch_size=64",
            "embedding_dim=32",
            "trainer.accelerator=cpu",
            "trainer.max_epochs=1",
            "trainer.enable_progress_bar=false",
            "trainer.enable_model_summary=false",
            "logger=csv",
            *overrides,
        ],
        output_dir=tmp_path / "run",
    )


def test_every_registered_format_has_its_data_option_and_a_layout_writer():
    options = {path.stem: OmegaConf.load(path) for path in sorted(CONFIG_DIR.glob("data/*.yaml"))}
    targets = {name: options[name].table._target_ for name in FORMATS if name in options}
    assert sorted(set(FORMATS) - set(targets)) == []  # conf/data/<name>.yaml for every format
    assert targets == {name: f"{each.read.__module__}.{each.read.__name__}" for name, each in FORMATS.items()}
    assert [name for name in FORMATS if not hasattr(layouts, f"write_{name}")] == []
    formats_module = [name for name, node in options.items() if "fairnas.data.formats" in str(node.get("table"))]
    assert sorted(formats_module) == sorted(FORMATS)  # and no data= option reads a format that is not registered


@pytest.mark.parametrize("name", list(FORMATS))
def test_every_format_reads_its_layout_through_its_data_option(tmp_path, name):
    getattr(layouts, f"write_{name}")(tmp_path / "data")
    cfg = format_config(tmp_path, name, tmp_path / "data")
    datamodule = instantiate(cfg.data, seed=0)
    datamodule.setup()
    identities = {split: set(frame["identity"]) for split, frame in datamodule.splits.items()}
    assert all(identities[split] for split in ("train", "val")) and identities["train"].isdisjoint(identities["val"])
    assert identities["test"].isdisjoint(identities["train"] | identities["val"])
    assert len(datamodule.group_order) >= 2
    assert datamodule.group_order == list(cfg.data.group_order or sorted(datamodule.group_order))
    for split, frame in datamodule.splits.items():
        assert set(frame[datamodule.table.attribute]) <= set(datamodule.group_order), split
        assert (tmp_path / "data" / frame["path"]).map(lambda path: path.is_file()).all(), split


def test_one_epoch_on_a_generated_split_and_the_split_file_moves_with_the_run(tmp_path):
    write_celeba(tmp_path / "data")
    metrics = train(format_config(tmp_path, "celeba", tmp_path / "data", "data.table.split.fractions=[0.6,0.2,0.2]"))
    run = load_run(tmp_path / "run")
    test = run.data().splits["test"]
    assert metrics["epochs_trained"] == 1 and metrics["group_order"] == run.data().group_order
    assert (
        metrics["test"]["n_probes"] == len(test) == 16
    )  # 2 test identities per group, 4 images each, every one a probe
    assert (tmp_path / "run" / "splits.csv").is_file()
    assert (tmp_path / "run" / "checkpoints" / "last.ckpt").is_file()
    # A moved run reads back the split file it saved: the same test images.
    trained_test = set(test["path"])
    (tmp_path / "run").rename(tmp_path / "moved")
    reloaded = load_run(tmp_path / "moved")
    assert reloaded.config.data.table.split.file == str(tmp_path / "moved" / "splits.csv")
    assert set(reloaded.data().splits["test"]["path"]) == trained_test
    # ... and its data set moved too: data_root (evaluate.py's linear_probe.root) points data.root and the table there.
    (tmp_path / "data").rename(tmp_path / "data_moved")
    relocated = load_run(tmp_path / "moved", data_root=str(tmp_path / "data_moved"))
    assert relocated.config.data.root == relocated.config.data.table.root == str(tmp_path / "data_moved")
    assert set(relocated.data().splits["test"]["path"]) == trained_test


def test_a_run_saved_before_data_root_loads_and_relocates(trained_run, tmp_path):
    """Checkpoints written before ``data.root`` existed store the folder only in the table (the synthetic faces'
    as ``cache_dir``) and build ``fairnas.data.FaceDataModule`` directly: they still load, and move."""
    old = tmp_path / "old"
    shutil.copytree(trained_run, old)
    checkpoint = old / "checkpoints" / "last.ckpt"
    state = torch.load(checkpoint, weights_only=True)
    data = state["hyper_parameters"]["config"]["data"]
    root = data.pop("root")
    data["_target_"] = "fairnas.data.FaceDataModule"
    data["table"]["cache_dir"] = data["table"].pop("root")
    torch.save(state, checkpoint)

    run = load_run(old)
    assert run.config.data.table.root == root and "root" not in run.config.data
    assert len(run.data().splits["test"]) == 24  # the tiny synthetic set, read back from its cache
    elsewhere = tmp_path / "elsewhere"
    shutil.copytree(root, elsewhere)
    relocated = load_run(old, data_root=str(elsewhere))
    assert relocated.config.data.table.root == str(elsewhere) and "root" not in relocated.config.data
    assert relocated.data().table.root.is_relative_to(elsewhere)


def test_a_run_whose_config_names_a_moved_target_loads(trained_run, tmp_path):
    """A saved config names code where it was when the run trained (``MOVED_TARGETS``): the focal loss before it moved
    into fairnas.training, the generic format before it moved into fairnas.data.formats."""
    faces = load_run(trained_run).data().table.root  # the rendered synthetic faces: a data set in the generic format
    old = tmp_path / "old"
    shutil.copytree(trained_run, old)
    checkpoint = old / "checkpoints" / "last.ckpt"
    state = torch.load(checkpoint, weights_only=True)
    config = state["hyper_parameters"]["config"]
    config["loss"] = {"_target_": "fairnas.losses.FocalLoss", "gamma": 2.0}
    config["data"]["table"] = {"_target_": "fairnas.data.table.read_generic", "_partial_": True, "root": str(faces)}
    torch.save(state, checkpoint)

    run = load_run(old)
    assert isinstance(run.module.loss, FocalLoss) and run.config.loss._target_ == "fairnas.training.losses.FocalLoss"
    assert run.config.data.table._target_ == "fairnas.data.formats.generic.read_generic"
    assert len(run.data().splits["test"]) == 24
