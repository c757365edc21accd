"""The one way to check a setting (fairnas.validation): one-line errors naming the full key, the value and what is
allowed; a bool is never an integer or a number."""

from __future__ import annotations

import math

import numpy as np
import pytest

from fairnas.validation import SettingError, Settings, is_integer, is_number, optional

CHECK = Settings("study.noise.")


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda: CHECK.integer("seeds", 0, minimum=1), "study.noise.seeds=0 must be a positive integer"),
        (lambda: CHECK.integer("seeds", 1, minimum=2), "study.noise.seeds=1 must be an integer >= 2"),
        (lambda: CHECK.integer("seeds", True, minimum=1), "study.noise.seeds=True must be a positive integer"),
        (lambda: CHECK.integer("seeds", 2.0), "study.noise.seeds=2.0 must be an integer"),
        (lambda: CHECK.integer("seeds", "3"), "study.noise.seeds='3' must be an integer"),
        (lambda: CHECK.integer("level", 6, minimum=0, maximum=5), "study.noise.level=6 must be an integer in 0..5"),
        (
            lambda: CHECK.integer("cap", 0, minimum=1, null="all probes"),
            "study.noise.cap=0 must be a positive integer or null (all probes)",
        ),
        (lambda: CHECK.number("rho", -1, minimum=0), "study.noise.rho=-1 must be a number >= 0"),
        (lambda: CHECK.number("rho", math.nan, minimum=0), "study.noise.rho=nan must be a number >= 0"),
        (lambda: CHECK.number("t", 2, minimum=-1, maximum=1), "study.noise.t=2 must be a number in [-1, 1]"),
        (lambda: CHECK.number("rho", False), "study.noise.rho=False must be a number"),
        (lambda: CHECK.positive("lr", 0), "study.noise.lr=0 must be a positive number"),
        (lambda: CHECK.positive("limit", -1, "(GiB)"), "study.noise.limit=-1 must be a positive number (GiB)"),
        (lambda: CHECK.probability("alpha", 1), "study.noise.alpha=1 must be a number in (0, 1)"),
        (lambda: CHECK.probability("alpha", True), "study.noise.alpha=True must be a number in (0, 1)"),
        (lambda: CHECK.between("alpha", 0.5, 0, 0.5), "study.noise.alpha=0.5 must be a number in (0, 0.5)"),
        (lambda: CHECK.boolean("compile", "yes"), "study.noise.compile='yes' must be true or false"),
        (lambda: CHECK.boolean("compile", 1), "study.noise.compile=1 must be true or false"),
        (lambda: CHECK.choice("via", "batch", ("sampler", "loss")), "study.noise.via='batch' must be one of"),
        (lambda: CHECK.sequence("objectives", "f1"), "study.noise.objectives='f1' must be a list"),
    ],
)
def test_a_bad_value_is_one_line_naming_the_full_key_the_value_and_what_is_allowed(call, message):
    with pytest.raises(SettingError) as error:
        call()
    assert str(error.value).startswith(message) and "\n" not in str(error.value)
    assert isinstance(error.value, ValueError)  # the commands print a ValueError as one line (fairnas.tasks.cli)
    assert error.value.key.startswith("study.noise.")


def test_good_values_come_back_converted():
    assert CHECK.integer("seeds", 3, minimum=1) == 3 and type(CHECK.integer("seeds", np.int64(3))) is int
    assert CHECK.integer("eta", 2.0, minimum=2, integral_floats=True) == 2
    with pytest.raises(SettingError, match=r"^study.noise.eta=2.5 must be an integer >= 2$"):
        CHECK.integer("eta", 2.5, minimum=2, integral_floats=True)
    assert CHECK.integer("cap", None, minimum=1, null="all") is None
    assert CHECK.number("rho", 1) == 1.0 and CHECK.positive("lr", 0.1) == 0.1 and CHECK.probability("alpha", 0.05)
    assert CHECK.boolean("compile", False) is False and CHECK.choice("via", "loss", ("sampler", "loss")) == "loss"
    assert CHECK.sequence("objectives", ["a", "b"]) == ("a", "b")
    assert optional(CHECK.integer, "seeds", None, minimum=2) is None
    assert optional(CHECK.integer, "seeds", 2, minimum=2) == 2
    assert Settings().positive("optimizer.lr", 1) == 1.0


def test_without_a_prefix_the_name_is_the_key():
    with pytest.raises(SettingError, match=r"^trainer.max_epochs=0 must be a positive integer$"):
        Settings().integer("trainer.max_epochs", 0, minimum=1)


def test_a_bool_is_neither_an_integer_nor_a_number():
    assert [is_integer(value) for value in (1, np.int32(1), True, np.bool_(True), 1.0, "1")] == [
        True,
        True,
        False,
        False,
        False,
        False,
    ]
    assert [is_number(value) for value in (1, 1.5, np.float32(1.5), True, None, "1")] == [
        True,
        True,
        True,
        False,
        False,
        False,
    ]
