"""The default suite's time limit per test (tests/conftest.py): a default test over the limit fails with its
reason, an integration test over it does not."""

import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]

TESTS = """
import time

import pytest


def test_default():
    time.sleep(0.5)


@pytest.mark.integration
def test_integration():
    time.sleep(0.5)
"""


def test_a_default_test_over_the_limit_fails_and_an_integration_test_does_not(tmp_path):
    (tmp_path / "test_slow.py").write_text(TESTS)
    (tmp_path / "conftest.py").write_text("from tests.conftest import pytest_runtest_makereport  # noqa: F401\n")
    environment = os.environ | {"FAIRNAS_TEST_CALL_LIMIT_S": "0.2", "PYTHONPATH": str(REPO)}
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-o", "addopts=", str(tmp_path)],
        cwd=tmp_path,
        env=environment,
        capture_output=True,
        text=True,
    )
    assert done.returncode == 1, done.stdout
    assert "1 failed, 1 passed" in done.stdout
    assert "FAILED test_slow.py::test_default" in done.stdout
    assert "call took 0.5 s, over the default suite's limit of 0 s" in done.stdout
