"""fairnas.benchmarks.design: a space-filling design over the paper's whole space and the noisy table's
configurations as anchors in it, the configurations a surrogate benchmark's data is trained on."""

from __future__ import annotations

import argparse
import collections

import pytest
from ConfigSpace import Configuration

from bench import tabular
from fairnas.benchmarks.design import anchors, sobol_design
from fairnas.config import SPACES_DIR
from fairnas.search import config_id, load_space

PAPER = load_space(SPACES_DIR / "dpn_paper_group_sampling.yaml")
TABLE = load_space(SPACES_DIR / "dpn_table.yaml")


def test_the_sobol_design_fills_the_whole_space_with_legal_distinct_configurations():
    design = sobol_design(PAPER, 256)
    assert len({config_id(config) for config in design}) == 256
    for config in design:
        Configuration(PAPER.configspace, values=config)  # legal, conditions respected
        assert ("lr_sgd" in config) == (config["optimizer"] == "sgd") != ("lr_adam" in config)
        assert 0 <= config["group_alpha"] <= 2
    # every choice of every categorical is drawn about equally often (a Sobol sequence is balanced)
    for name, k in (("op0", 9), ("op2", 9), ("head", 3), ("optimizer", 3)):
        counts = collections.Counter(config[name] for config in design)
        assert len(counts) == k and max(counts.values()) - min(counts.values()) <= 3
    adam = [config["lr_adam"] for config in design if "lr_adam" in config]
    assert min(adam) < 2e-4 and max(adam) > 5e-3  # log-uniform over [1e-4, 1e-2]
    assert sum(lr < 1e-3 for lr in adam) == pytest.approx(len(adam) / 2, abs=6)


def test_a_larger_design_extends_a_smaller_one_and_the_seed_changes_it():
    assert sobol_design(PAPER, 256)[:100] == sobol_design(PAPER, 100)  # more data keeps what was trained
    assert sobol_design(PAPER, 16, seed=1) != sobol_design(PAPER, 16, seed=0)
    with pytest.raises(ValueError, match=r"^design size n=0 must be a positive integer$"):
        sobol_design(PAPER, 0)


def test_the_noisy_tables_configurations_are_anchors_in_the_whole_space():
    table = anchors(TABLE, PAPER, {"optimizer": "adamw"})
    assert len({config_id(config) for config in table}) == 81
    assert {(config["head"], config["optimizer"], config["lr_adam"]) for config in table} == {
        ("cosface", "adamw", 0.003)
    }
    assert {(config["op0"], config["group_alpha"]) for config in table} == {
        (op, alpha) for op in (0, 3, 6) for alpha in (0.0, 1.0, 1.5)
    }
    with pytest.raises(ValueError, match=r"^anchors: fixed values \['optimiser'\] name no hyperparameter"):
        anchors(TABLE, PAPER, {"optimiser": "adamw"})
    with pytest.raises(ValueError, match=r"^anchors: .* is not a configuration of the space"):
        anchors(TABLE, PAPER, {"optimizer": "sgd"})  # lr 0.003 is outside SGD's range


def test_the_table_command_trains_the_anchors_then_the_design():
    args = argparse.Namespace(
        space=SPACES_DIR / "dpn_paper_group_sampling.yaml",
        sobol=8,
        sobol_seed=0,
        anchors=SPACES_DIR / "dpn_table.yaml",
        anchor_fixed=["optimizer=adamw"],
    )
    configs = tabular.sampled_configs(args)
    assert configs[:81] == anchors(TABLE, PAPER, {"optimizer": "adamw"}) and configs[81:] == sobol_design(PAPER, 8)
    assert tabular.sampled_configs(argparse.Namespace(sobol=None, anchors=None)) is None  # the grid
    with pytest.raises(SystemExit, match=r"--anchor-fixed: 'optimizer' is not NAME=VALUE"):
        tabular.parse_fixed(["optimizer"])
