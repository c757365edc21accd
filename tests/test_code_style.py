"""The tree passes the linter, the formatter's check and the type checker.

``ruff check .`` and ``ruff format --check .`` over the whole repository, and ``mypy`` over the library packages
(fairnas.metrics, fairnas.search, fairnas.models, fairnas.data); each tool runs from the repository root, taken
from the environment running the tests (the ``test`` extra installs both), with its configuration in
``pyproject.toml`` (``[tool.ruff]``, ``[tool.mypy]``). A failure shows the tool's report.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent


def _run(tool: str, *args: str) -> subprocess.CompletedProcess[str]:
    executable = BIN / tool
    assert executable.is_file(), f"{executable} not found; install the test extra (pip install -e '.[test]')"
    return subprocess.run([str(executable), *args], cwd=ROOT, capture_output=True, text=True, check=False)


def _report(result: subprocess.CompletedProcess[str]) -> str:
    command = " ".join(Path(part).name if i == 0 else part for i, part in enumerate(result.args))
    return f"`{command}` exited with {result.returncode}:\n{result.stdout}{result.stderr}"


def test_ruff_lint_and_format() -> None:
    failed = [
        result for result in (_run("ruff", "check", "."), _run("ruff", "format", "--check", ".")) if result.returncode
    ]
    assert not failed, "\n".join(_report(result) for result in failed)


@pytest.mark.integration
def test_mypy() -> None:
    result = _run("mypy", "--config-file", str(ROOT / "pyproject.toml"))
    assert result.returncode == 0, _report(result)
