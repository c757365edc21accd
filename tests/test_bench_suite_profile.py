"""bench/suite_profile.py: each test's kind from what it started, the Python processes charged to the test that ran
them, the summary's totals; and a real profiled pytest run (the plugin in every xdist worker, the process hook)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from bench import suite_profile

REPO = Path(__file__).resolve().parents[1]


def _test(name: str, *, fits=0, searches=0, programs=()) -> dict:
    return {"test": name, "setup": 0.5, "call": 2.0, "teardown": 0.0, "outcome": "passed", "fits": fits,
            "searches": searches, "programs": list(programs), "worker": "gw0"}  # fmt: skip


@pytest.mark.parametrize(
    ("test", "processes", "kind"),
    [
        (_test("a", programs=["python"]), [["python", "-m", "pip", "install", "x"]], "install"),
        (_test("a", programs=["chromium"], fits=1), [], "browser"),
        (_test("a", programs=["sbatch"]), [], "slurm"),
        (_test("a", fits=2), [["python", "/repo/study.py", "study=smoke"]], "search"),
        (_test("a", searches=1, fits=3), [], "search"),
        (_test("a"), [["python", "/repo/train.py"]], "training"),
        (_test("a", fits=1), [], "training"),
        (_test("a", programs=["python"]), [["python", "-c", "print(1)"]], "subprocess"),
        (_test("a", programs=["git"]), [], "unit"),
    ],
)
def test_a_tests_kind_is_the_first_that_applies(test, processes, kind):
    assert suite_profile.kind_of(test, processes) == kind


def test_processes_are_charged_to_the_test_that_ran_them_and_summed(tmp_path):
    tests = [_test("tests/test_a.py::test_x", fits=1), _test("tests/test_b.py::test_y")]
    (tmp_path / "tests-1.jsonl").write_text("".join(json.dumps(test) + "\n" for test in tests))
    processes = [
        {"pid": 1, "argv": ["python", "-m", "pytest"], "test": ""},
        {"pid": 2, "argv": ["python", "train.py"], "test": "tests/test_b.py::test_y (call)"},
        {"pid": 3, "argv": ["python", "-c", "pass"], "test": "tests/test_b.py::test_y (setup)"},
    ]
    (tmp_path / "processes.jsonl").write_text("".join(json.dumps(process) + "\n" for process in processes))
    frame, outside = suite_profile.read_profile(tmp_path)
    rows = frame.set_index("test")
    assert outside == 1 and rows["python_processes"].to_dict() == {
        "tests/test_a.py::test_x": 0,
        "tests/test_b.py::test_y": 2,
    }
    assert rows["kind"].to_dict() == {"tests/test_a.py::test_x": "training", "tests/test_b.py::test_y": "training"}
    assert rows.loc["tests/test_a.py::test_x", "seconds"] == 2.5 and rows["module"].tolist() == [
        "tests/test_a.py",
        "tests/test_b.py",
    ]
    text = suite_profile.summary(frame, outside, label="x", command="python -m pytest", wall=7.0, exit_code=0)
    assert "7 s wall, exit code 0; 2 tests (2 passed); 5 s summed over tests; 3 Python processes started" in text
    assert "## By kind" in text and "## By module" in text and "tests/test_b.py::test_y" in text


@pytest.mark.integration
def test_a_profiled_run_on_two_workers_records_every_test_and_the_processes_started(tmp_path):
    suite = tmp_path / "suite"
    suite.mkdir()
    (suite / "test_small.py").write_text(
        "import subprocess, sys\n"
        "def test_starts_python():\n    subprocess.run([sys.executable, '-c', 'pass'], check=True)\n"
        "def test_quiet():\n    assert True\n"
    )
    command = [sys.executable, str(REPO / "bench" / "suite_profile.py"), "--label", "x", "--output", str(tmp_path)]
    site_packages = Path(suite_profile.sysconfig.get_paths()["purelib"])
    hooks = set(site_packages.glob("_fairnas_suite_profile_*.pth"))  # an outer profiled run's own, if any
    done = subprocess.run([*command, "--", str(suite), "-n", "2"], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    frame = pd.read_csv(tmp_path / "tests.csv")
    frame = frame.set_index(frame["test"].str.split("/").str[-1])  # ids run from a rootdir pytest picks
    assert len(frame) == 2 and (frame["outcome"] == "passed").all() and set(frame["worker"]) <= {"gw0", "gw1"}
    processes = {"test_small.py::test_starts_python": 1, "test_small.py::test_quiet": 0}
    assert frame["python_processes"].to_dict() == processes
    assert frame["kind"].value_counts().to_dict() == {"subprocess": 1, "unit": 1}
    manifest = json.loads((tmp_path / "manifest.json").read_text())
    assert manifest["files"] == ["tests.csv"] and manifest["exit_code"] == 0 and (tmp_path / "summary.md").is_file()
    assert set(site_packages.glob("_fairnas_suite_profile_*.pth")) == hooks  # its process hook is gone
