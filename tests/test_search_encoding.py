"""Configurations as model inputs and back (fairnas.search.encoding): :meth:`SpaceEncoding.from_unit_cube`, the public
way from a unit-cube point (a Sobol design's) to a valid configuration, conditions respected."""

import math

import numpy as np
import pytest
from ConfigSpace import Configuration
from scipy.stats import qmc

from fairnas.search import load_space
from fairnas.search.encoding import SpaceEncoding
from fairnas.search.trial import config_id
from tests.test_search_loop import SPACES
from tests.test_search_strategies import MIXED_SPACE

MIXED = load_space(MIXED_SPACE).configspace
PAPER = load_space(SPACES / "dpn_paper.yaml").configspace


def _checked(configspace, config):
    """``config``, after ConfigSpace accepted it: every active hyperparameter set, no inactive one."""
    Configuration(configspace, values=config).check_valid_configuration()
    return config


def test_the_corners_of_the_unit_cube_are_the_ends_of_every_range():
    encoding = SpaceEncoding(MIXED)
    low, high = encoding.from_unit_cube(np.zeros(encoding.dim)), encoding.from_unit_cube(np.ones(encoding.dim))
    assert low == {
        "backbone": "dpn",
        "blocks": 1,
        "depth": 1,
        "dropout": 0.0,
        "optimizer": "adam",
        "width": 16,
        "lr_adam": 1e-4,
    }
    assert high == {
        "backbone": "dpn",
        "blocks": 4,
        "depth": 64,
        "dropout": 0.5,
        "optimizer": "sgd",
        "width": 64,
        "lr_sgd": 0.8,
    }
    middle = encoding.from_unit_cube(np.full(encoding.dim, 0.5))  # log-scaled numbers at their geometric middle
    assert middle["optimizer"] == "sgd" and middle["lr_sgd"] == pytest.approx(math.sqrt(0.09 * 0.8))
    assert middle["depth"] == 8 and middle["dropout"] == 0.25 and middle["width"] == 32


def test_a_categorical_gets_equal_shares_of_its_axis_and_conditions_follow():
    encoding = SpaceEncoding(MIXED)
    optimizer = [c.name for c in encoding.columns].index("optimizer")
    for u, expected in [(0.0, "adam"), (0.49, "adam"), (0.5, "sgd"), (0.99, "sgd"), (1.0, "sgd")]:
        point = np.full(encoding.dim, 0.3)
        point[optimizer] = u
        config = _checked(MIXED, encoding.from_unit_cube(point))
        assert config["optimizer"] == expected
        assert ("lr_adam" in config, "lr_sgd" in config) == (expected == "adam", expected == "sgd")


@pytest.mark.parametrize("configspace", [MIXED, PAPER], ids=["mixed", "paper"])
def test_a_sobol_design_becomes_valid_distinct_configurations_covering_every_choice(configspace):
    encoding = SpaceEncoding(configspace)
    points = qmc.Sobol(d=encoding.dim, scramble=True, seed=0).random_base2(6)
    configs = [_checked(configspace, encoding.from_unit_cube(u)) for u in points]
    assert len({config_id(config) for config in configs}) == len(configs) == 64
    for column in encoding.columns:
        if column.kind == "categorical":  # every choice drawn (9 operations over 64 points), each condition's child
            assert {config[column.name] for config in configs} == set(configspace[column.name].choices)
    for config in configs:
        assert ("lr_sgd" in config) == (config["optimizer"] == "sgd") != ("lr_adam" in config)
    assert [encoding.from_unit_cube(u) for u in points[:4]] == configs[:4]  # a function of the point alone


def test_a_space_without_inputs_has_its_constants_and_a_point_of_another_size_is_refused():
    space = load_space({"hyperparameters": {"backbone": {"type": "constant", "value": "dpn", "key": "backbone"}}})
    encoding = SpaceEncoding(space.configspace)
    assert encoding.dim == 0 and encoding.from_unit_cube(np.empty(0)) == {"backbone": "dpn"}
    with pytest.raises(ValueError):
        SpaceEncoding(MIXED).from_unit_cube(np.full(3, 0.5))
