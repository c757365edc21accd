"""``wheelhouse.py``: the wheels of an offline install, and an install from them with no index."""

from __future__ import annotations

import importlib.metadata
import os
import subprocess
import sys
import venv
from pathlib import Path

import pytest

import wheelhouse

REPO = Path(__file__).resolve().parents[1]
pytestmark = pytest.mark.integration  # pip resolves the dependencies, or installs them


@pytest.fixture(scope="module")
def report():
    return wheelhouse.resolve(sys.executable, ["botorch"])


def test_leaving_out_torch_leaves_out_what_only_torch_needs(report):
    kept = wheelhouse.needed(report, ["botorch"], ["torch", "torchvision"])
    resolved = {wheelhouse.canonical(item["metadata"]["name"]) for item in report}
    assert {"torch", "torchvision", "sympy", "triton"} <= resolved - set(kept)  # sympy and triton: torch's only
    assert not any(name.startswith("nvidia-") for name in kept)
    # what fairnas needs itself stays, also when torch needs it too; the extra's packages are in
    assert {"fairnas", "numpy", "filelock", "smac", "pynisher", "botorch", "gpytorch"} <= set(kept)
    without_extra = set(wheelhouse.needed(report, [], []))
    assert without_extra < resolved and not {"botorch", "gpytorch"} & without_extra


def test_an_exclusion_that_is_no_dependency_is_named(report):
    with pytest.raises(SystemExit, match=r"--exclude \['tensorflow'\] is not among fairnas's dependencies"):
        wheelhouse.needed(report, [], ["torch", "tensorflow"])


def link_distributions(pins: list[str], folder: Path) -> None:
    """Make the installed distributions ``pins`` (name==version) visible in ``folder`` (on a .pth path): an image
    that already has them."""
    folder.mkdir()
    for pin in pins:
        distribution = importlib.metadata.distribution(pin.split("==")[0])
        base = Path(distribution.locate_file(""))
        for top in {path.parts[0] for path in distribution.files or [] if path.parts[0] != ".."}:
            if not (folder / top).exists():
                (folder / top).symlink_to(base / top)


@pytest.mark.slow
def test_fairnas_installs_and_trains_from_the_wheelhouse_with_no_index(tmp_path):
    """The documented offline install: a wheelhouse without torch, a fresh venv whose image has torch, pip with
    --no-index, then a training run from the installed console script."""
    house = tmp_path / "wheelhouse"
    subprocess.run(
        [sys.executable, str(REPO / "wheelhouse.py"), str(house), "--exclude", "torch", "torchvision"], check=True
    )
    assert not list(house.glob("torch-*.whl")) and list(house.glob("smac-*-py3-none-any.whl"))
    target = tmp_path / "venv"
    venv.create(target, with_pip=True)
    site = next((target / "lib").glob("python3.*/site-packages"))
    link_distributions((house / "excluded.txt").read_text().split(), tmp_path / "image")
    (site / "image.pth").write_text(str(tmp_path / "image") + "\n")
    env = {**os.environ, "PIP_CONFIG_FILE": os.devnull, "PIP_FIND_LINKS": "", "PYTHONHASHSEED": "0"}
    install = [str(target / "bin" / "pip"), "install", "--no-index", "--find-links", str(house)]
    subprocess.run([*install, "-r", str(house / "requirements.txt")], check=True, env=env)
    train = [str(target / "bin" / "fairnas-train"), "experiment=smoke", "trainer.max_epochs=1", "logger=none"]
    done = subprocess.run(
        [*train, f"hydra.run.dir={tmp_path / 'run'}", f"paths.cache_dir={tmp_path / 'cache'}"],
        env=env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert (tmp_path / "run" / "metrics.json").is_file()
