"""Space files -> ConfigurationSpace and Hydra overrides (fairnas.search.space)."""

from pathlib import Path

import pytest
from hydra.core.override_parser.overrides_parser import OverridesParser

from fairnas.search import config_to_overrides, load_space

SPACES = Path(__file__).resolve().parents[1] / "searchspaces"


def test_dpn_paper_space_matches_the_thesis_and_respects_conditions():
    space = load_space(SPACES / "dpn_paper.yaml", seed=0)
    cs = space.configspace
    assert list(space.keys) == ["op0", "op1", "op2", "head", "optimizer", "lr_adam", "lr_sgd"]
    assert [list(cs[f"op{i}"].choices) for i in range(3)] == [list(range(9))] * 3
    assert set(cs["head"].choices) == {"cosface", "arcface", "magface"}
    assert (cs["lr_adam"].lower, cs["lr_adam"].upper, cs["lr_adam"].log) == (1e-4, 1e-2, True)
    assert (cs["lr_sgd"].lower, cs["lr_sgd"].upper, cs["lr_sgd"].log) == (0.09, 0.8, True)
    for config in map(dict, cs.sample_configuration(200)):
        assert ("lr_adam" in config) == (config["optimizer"] in ("adam", "adamw"))
        assert ("lr_sgd" in config) == (config["optimizer"] == "sgd")
        assert space.keys["lr_adam"] == space.keys["lr_sgd"] == "optimizer.lr"


def test_overrides_combine_list_items_and_parse_as_hydra_overrides():
    space = load_space(SPACES / "dpn_paper.yaml")
    config = {"op0": 3, "op1": 0, "op2": 1, "head": "arcface", "optimizer": "sgd", "lr_sgd": 0.25}
    overrides = space.overrides(config)
    assert overrides == ["backbone.ops=[3,0,1]", "head=arcface", "optimizer=sgd", "optimizer.lr=0.25"]
    parsed = OverridesParser.create().parse_overrides(overrides)
    assert [(o.key_or_group, o.value()) for o in parsed] == [
        ("backbone.ops", [3, 0, 1]),
        ("head", "arcface"),
        ("optimizer", "sgd"),
        ("optimizer.lr", 0.25),
    ]


def test_override_values_keep_their_type_in_hydra_grammar():
    mapping = {"a": "x.a", "b": "x.b", "c": "x.c", "d": "x.d", "e": "x.e"}
    overrides = config_to_overrides({"a": "1", "b": "two words", "c": True, "d": 1e-5, "e": "null"}, mapping)
    values = [o.value() for o in OverridesParser.create().parse_overrides(overrides)]
    assert values == ["1", "two words", True, 1e-5, "null"]


@pytest.mark.slow  # importing timm (and torch) takes ~10 s on 2 cores
def test_timm_zoo_spaces_name_real_timm_models():
    timm = pytest.importorskip("timm")
    for name in ("timm_zoo", "timm_zoo_small"):
        space = load_space(SPACES / f"{name}.yaml")
        architectures = space.configspace["architecture"].choices
        assert all(timm.is_model(arch) for arch in architectures), name
        assert space.overrides(dict(space.configspace.get_default_configuration()))[0] == "backbone=timm"
    assert {"dpn107", "rexnet_200", "ese_vovnet39b"} <= set(
        load_space(SPACES / "timm_zoo.yaml").configspace["architecture"].choices
    )


def test_known_keys_reject_a_key_missing_from_the_training_config():
    known = {"backbone.ops", "head", "optimizer", "optimizer.lr"}
    load_space(SPACES / "dpn_paper.yaml", known_keys=known)  # list items are checked by their list key
    with pytest.raises(ValueError, match=r"space key 'optimizer.lr' \(hyperparameter 'lr_adam'\)"):
        load_space(SPACES / "dpn_paper.yaml", known_keys=known - {"optimizer.lr"})
    with pytest.raises(ValueError, match="space key 'head'"):
        load_space(SPACES / "dpn_paper.yaml", known_keys=lambda key: key != "head")


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ({"hyperparameters": {"a": {"type": "bool", "key": "a"}}}, "type 'bool'"),
        ({"hyperparameters": {"a": {"type": "float", "lower": 0, "upper": 1}}}, r"missing \['key'\]"),
        (
            {"hyperparameters": {"a": {"type": "float", "lower": 0, "upper": 1, "key": "a", "step": 2}}},
            "unknown fields",
        ),
        ({"hyperparameters": {"a": {"type": "categorical", "choices": [1], "key": "l.1"}}}, "indices 0..n-1"),
        ({"hyperparameters": {"a": {"type": "categorical", "choices": [1], "key": "a"}}, "extra": 1}, "unknown fields"),
        (
            {
                "hyperparameters": {"a": {"type": "categorical", "choices": [1, 2], "key": "a"}},
                "conditions": [{"child": "b", "parent": "a", "equals": 1}],
            },
            "child 'b' is not a hyperparameter",
        ),
        (
            {
                "hyperparameters": {
                    "a": {"type": "categorical", "choices": [1, 2], "key": "a"},
                    "b": {"type": "integer", "lower": 1, "upper": 4, "key": "b"},
                },
                "conditions": [{"child": "b", "parent": "a", "equals": 1, "in": [1]}],
            },
            "exactly one of 'equals' or 'in'",
        ),
    ],
)
def test_malformed_space_files_raise_one_clear_error(spec, message):
    with pytest.raises(ValueError, match=message):
        load_space(spec)


def test_several_conditions_on_one_child_are_and_combined():
    space = load_space(
        {
            "hyperparameters": {
                "opt": {"type": "categorical", "choices": ["adam", "sgd"], "key": "optimizer"},
                "sched": {"type": "categorical", "choices": ["cosine", "step"], "key": "scheduler"},
                "gamma": {"type": "float", "lower": 0.1, "upper": 0.9, "key": "scheduler.gamma"},
                "width": {"type": "ordinal", "sequence": [16, 32, 64], "key": "backbone.width"},
            },
            "conditions": [
                {"child": "gamma", "parent": "opt", "equals": "sgd"},
                {"child": "gamma", "parent": "sched", "in": ["step"]},
            ],
        },
        seed=1,
    )
    for config in map(dict, space.configspace.sample_configuration(100)):
        assert ("gamma" in config) == (config["opt"] == "sgd" and config["sched"] == "step")
        assert config["width"] in (16, 32, 64)


def test_inconsistent_configs_are_rejected_when_turned_into_overrides():
    mapping = {"op0": "backbone.ops.0", "op1": "backbone.ops.1", "lr_a": "optimizer.lr", "lr_b": "optimizer.lr"}
    with pytest.raises(ValueError, match=r"items \[1\] are missing"):
        config_to_overrides({"op0": 1}, mapping)
    with pytest.raises(ValueError, match=r"both set 'optimizer\.lr'"):
        config_to_overrides({"op0": 1, "op1": 2, "lr_a": 0.1, "lr_b": 0.2}, mapping)
    with pytest.raises(ValueError, match=r"\['depth'\] have no config key"):
        config_to_overrides({"depth": 3}, mapping)


def test_missing_space_file_is_a_value_error(tmp_path):
    with pytest.raises(ValueError, match="does not exist"):
        load_space(tmp_path / "nope.yaml")


@pytest.mark.parametrize("path", sorted(SPACES.glob("*.yaml")), ids=lambda path: path.stem)
def test_every_space_file_sets_keys_of_the_training_config(path):
    """Each shipped space composes with ``train.py``'s config: its default configuration's overrides apply and every
    key it sets exists (what ``search.py`` checks before the first trial)."""
    from fairnas.tasks.search import check_space_keys, default_trial_config

    space = load_space(path)
    check_space_keys(space, default_trial_config(space, []))


def test_the_group_sampling_dimension_reaches_the_data_module():
    space = load_space(SPACES / "dpn_paper_group_sampling.yaml")
    overrides = space.overrides({**dict(space.configspace.get_default_configuration()), "group_alpha": 1.5})
    assert "data.group_sampling.alpha=1.5" in overrides
    table = load_space(SPACES / "dpn_table.yaml").configspace["group_alpha"]
    assert list(table.sequence) == [0.0, 1.0, 1.5]
