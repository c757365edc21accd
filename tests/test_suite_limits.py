"""The suite's schedule and time limit per test (tests/conftest.py): the longest modules start first, and a default
test over the limit is reported (and fails where CI asks), an integration test or an extra's test over it is not."""

import importlib.util
import os
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

from tests.conftest import limits_fail, longest_modules_first, recorded_seconds

REPO = Path(__file__).resolve().parents[1]

TESTS = """
import time

import pytest


def test_default():
    time.sleep(0.5)


@pytest.mark.integration
def test_integration():
    time.sleep(0.5)


@pytest.mark.extra("botorch")
def test_extra():
    time.sleep(0.5)
"""


def extra_installed() -> bool:
    """Whether :data:`TESTS`' extra test runs: it skips where the botorch extra is not installed (the README's test
    command installs no extra). Asked when a test runs, not at collection, where a test may block the extras."""
    return importlib.util.find_spec("botorch") is not None


def run_slow_tests(tmp_path, **variables: str) -> subprocess.CompletedProcess:
    """pytest on :data:`TESTS` with a call limit of 0.2 s, in an environment without CI and with ``variables``."""
    (tmp_path / "test_slow.py").write_text(TESTS)
    (tmp_path / "conftest.py").write_text("from tests.conftest import *  # noqa: F403\n")
    environment = {key: value for key, value in os.environ.items() if key not in ("CI", "FAIRNAS_TEST_LIMITS")}
    environment |= {"FAIRNAS_TEST_CALL_LIMIT_S": "0.2", "PYTHONPATH": str(REPO), **variables}
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-o", "addopts=", str(tmp_path)],
        cwd=tmp_path,
        env=environment,
        capture_output=True,
        text=True,
    )


def test_a_default_test_over_the_limit_is_reported_and_passes_where_ci_does_not_ask(tmp_path):
    done = run_slow_tests(tmp_path)
    assert done.returncode == 0, done.stdout
    assert ("3 passed" if extra_installed() else "2 passed, 1 skipped") in done.stdout
    assert "1 test(s) over the default suite's limit (reported, not failed)" in done.stdout
    assert "test_slow.py::test_default: call took 0.5 s, over the default suite's limit of 0 s" in done.stdout
    assert "test_integration" not in done.stdout.split("reported, not failed")[1]


@pytest.mark.parametrize("variables", [{"FAIRNAS_TEST_LIMITS": "fail"}, {"CI": "true"}], ids=["fail", "ci"])
def test_where_ci_asks_a_default_test_over_the_limit_fails_and_an_integration_or_extra_test_does_not(
    tmp_path, variables
):
    done = run_slow_tests(tmp_path, **variables)
    assert done.returncode == 1, done.stdout
    assert ("1 failed, 2 passed" if extra_installed() else "1 failed, 1 passed, 1 skipped") in done.stdout
    assert "FAILED test_slow.py::test_default" in done.stdout
    assert "call took 0.5 s, over the default suite's limit of 0 s" in done.stdout


def test_limits_fail_where_asked_or_on_ci_and_a_bad_mode_is_named():
    assert limits_fail({"FAIRNAS_TEST_LIMITS": "fail"}) and limits_fail({"CI": "true"})
    assert not limits_fail({}) and not limits_fail({"CI": "true", "FAIRNAS_TEST_LIMITS": "report"})
    with pytest.raises(ValueError, match=r"FAIRNAS_TEST_LIMITS='strict'; allowed: fail, report"):
        limits_fail({"FAIRNAS_TEST_LIMITS": "strict"})


def test_the_modules_with_the_most_profiled_seconds_run_first_each_in_its_own_order():
    ids = ["tests/a.py::x", "tests/b.py::y", "tests/a.py::z", "tests/c.py::w", "tests/b.py::v"]
    seconds = {"tests/a.py::x": 1.0, "tests/a.py::z": 2.0, "tests/b.py::y": 5.0, "tests/new.py::n": 9.0}
    ordered = longest_modules_first([SimpleNamespace(nodeid=id_) for id_ in ids], seconds)
    assert [item.nodeid for item in ordered] == [
        "tests/b.py::y",
        "tests/b.py::v",
        "tests/a.py::x",
        "tests/a.py::z",
        "tests/c.py::w",
    ]


def test_the_committed_profiles_time_the_long_end_to_end_modules():
    seconds = recorded_seconds()
    assert seconds["tests/test_study.py::test_a_second_invocation_trains_nothing"] > 10
    assert all(test.startswith("tests/test_") and value >= 0 for test, value in seconds.items())
