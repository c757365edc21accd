"""CONTRIBUTING.md's recipes for an audit and for a data format, followed literally in a copy of the repository: the
files each recipe says it takes, and no other, give an audit the audit command runs and checks, and a format that is a
``data=`` option, with the repository's checks of every list of them passing (``tests/test_docs_registries.py``, the
format tests) and the new pieces' own tests too. The recipes are followed in the integration set (a fresh process);
that each names its files is checked in the default suite."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
COPIED = ("fairnas", "bench", "conf", "docs", "tests", "searchspaces", "README.md", "CONTRIBUTING.md", "pyproject.toml")
"""What the copy holds, besides the top-level scripts (``train.py``, ``audit.py``, ...)."""

AUDIT = '''"""Scratch: each group's share of the split's images (the audit of CONTRIBUTING.md's recipe test)."""

from __future__ import annotations

import pandas as pd
from omegaconf import DictConfig

from fairnas.audits.base import Audit, AuditData, AuditResult, register, settings_with_defaults
from fairnas.validation import Settings

DEFAULTS = {"min_share": 0.25}


def checked_settings(config: DictConfig | dict | None) -> dict:
    settings = settings_with_defaults("scratch", config, DEFAULTS)
    Settings("scratch.").probability("min_share", settings["min_share"])
    return settings


def check_config(config: DictConfig | dict | None) -> None:
    checked_settings(config)


def audit(model, data: AuditData, config: DictConfig) -> AuditResult:
    settings = checked_settings(config)
    shares = data.frame["group"].value_counts(normalize=True).reindex(data.group_order, fill_value=0.0)
    small = [group for group, share in shares.items() if share < settings["min_share"]]
    table = pd.DataFrame({"group": shares.index, "share": shares.to_numpy()})
    finding = f"{len(small)} group(s) below a share of {settings['min_share']:g} of the split: {small or 'none'}."
    return AuditResult({"shares": table}, {}, {"small_groups": len(small)}, finding)


register(Audit("scratch", "is a group a small share of the split?", audit, check=check_config, title="group shares"))
'''

AUDIT_TEST = '''"""The scratch audit: a planted effect (a group a tenth of the split), a control (balanced groups)."""

from types import SimpleNamespace

import pandas as pd
import pytest

from fairnas.audits.scratch import audit, check_config


def split_of(groups: list[str]) -> SimpleNamespace:
    """What the audit reads of an AuditData: the split's frame and the group order."""
    return SimpleNamespace(frame=pd.DataFrame({"group": groups}), group_order=sorted(set(groups)))


def test_a_small_group_is_found_and_balanced_groups_are_not():
    assert audit(None, split_of(["a"] * 9 + ["b"]), {"min_share": 0.25}).summary == {"small_groups": 1}
    assert audit(None, split_of(["a", "b"] * 5), {}).summary == {"small_groups": 0}


def test_bad_settings_are_refused_in_one_line():
    with pytest.raises(ValueError, match=r"^scratch\\.min_share=2"):
        check_config({"min_share": 2})
    with pytest.raises(ValueError, match=r"^scratch\\.level is not a setting"):
        check_config({"level": 1})
'''

FORMAT = '''"""A folder per group, each holding a folder per identity (the format of CONTRIBUTING.md's recipe test).

Layout of ``root``::

    <group>/<identity>/<image>
"""

from __future__ import annotations

import os
from pathlib import Path

import pandas as pd

from fairnas.data.formats.common import (
    DataFormat,
    drop_unreadable,
    face_table,
    register,
    require_dir,
    scan_identity_folders,
)
from fairnas.data.formats.splits import SplitSpec, apply_identity_splits, identity_splits
from fairnas.data.table import FaceTable

DATASET = "scratch"


def read_scratch(root: str | Path, split: SplitSpec = SplitSpec(), verify_images: bool = False) -> FaceTable:
    """Every ``<group>/<identity>/<image>`` under ``root``, the group in column ``group``."""
    root = require_dir(root, "data.root")
    groups = sorted(entry.name for entry in os.scandir(root) if entry.is_dir())
    frame = pd.concat([scan_identity_folders(root, group, DATASET).assign(group=group) for group in groups])
    frame = drop_unreadable(root, frame, verify_images, DATASET)
    splits = identity_splits(frame.groupby("identity")["group"].first(), split, DATASET)
    return face_table(root, apply_identity_splits(frame, splits, DATASET), "group", DATASET)


register(DataFormat(DATASET, "a folder per group", read_scratch))
'''

FORMAT_CONFIG = """# A folder per group, each holding a folder per identity: data=scratch data.root=/data/x
defaults:
  - _base
  - _split
  - _self_
table:
  _target_: fairnas.data.formats.scratch.read_scratch
  _partial_: true
  root: ${data.root}
  verify_images: false
"""

LAYOUT = '''

def write_scratch(root: Path, n_identities: int = 20, images_per_identity: int = 3, seed: int = 0) -> Path:
    """``data=scratch``: ``<root>/g<k mod 2>/id<k>/<image>.jpg``."""
    rng = np.random.default_rng(seed)
    for k in range(n_identities):
        for image in range(images_per_identity):
            write_image(root / f"g{k % 2}" / f"id{k:03d}" / f"{image}.jpg", rng)
    return root
'''

FORMAT_TEST = """

def test_scratch_groups_are_its_folders(tmp_path):
    from fairnas.data.formats.scratch import read_scratch

    layouts.write_scratch(tmp_path)
    table = read_scratch(tmp_path, split=SplitSpec(**SPLIT))
    assert table.frame.groupby("group")["identity"].nunique().to_dict() == {"g0": 10, "g1": 10}
"""

CHECKS = """
import json, sys

import pytest

from fairnas.audits import AUDITS
from fairnas.config import compose_config
from fairnas.data.formats import FORMATS
from fairnas.tasks.audit import audit

run, out = sys.argv[1], sys.argv[2]
found = {"audits": list(AUDITS), "formats": list(FORMATS), "outcomes": {}}
found["scratch"] = audit(compose_config("audit", [f"ckpt={run}", "logger=none", "audits=[scratch]"], output_dir=out))
try:
    audit(compose_config("audit", [f"ckpt={run}", "logger=none", "audits=[ood]", "scratch.min_share=2"]))
except ValueError as error:
    found["refused"] = str(error)


class Outcomes:
    def pytest_runtest_logreport(self, report):
        if report.when == "call" or not report.passed:
            found["outcomes"][report.nodeid] = report.outcome


selected = "every_registered_format or every_format_reads or scratch"
found["exit"] = int(pytest.main(
    ["-q", "-p", "no:cacheprovider", "-o", "addopts=", "tests/test_docs_registries.py", "tests/test_audit_scratch.py",
     "tests/test_formats.py", "-k", f"not test_formats or {selected}"],
    plugins=[Outcomes()],
))
print("RESULTS " + json.dumps(found))
"""


def recipe_files(title: str, name: str) -> list[str]:
    """The files CONTRIBUTING.md's recipe ``### <title>`` says it takes: the paths in its first paragraph."""
    recipe = (REPO / "CONTRIBUTING.md").read_text().split(f"\n### {title}\n", 1)[1].split("\n### ", 1)[0]
    first = recipe.strip().split("\n\n", 1)[0]
    return sorted({path.replace("<name>", name) for path in re.findall(r"`([\w./<>-]+\.(?:py|yaml|md))`", first)})


class Copy:
    """A copy of the repository that records the files each recipe writes or edits."""

    def __init__(self, root: Path):
        self.root, self.touched = root, []

    def write(self, path: str, text: str) -> None:
        assert not (self.root / path).exists(), path
        (self.root / path).write_text(text)
        self.touched.append(path)

    def edit(self, path: str, before: str, after: str) -> None:
        """Insert ``after`` right after the first occurrence of ``before`` (which must be there)."""
        text = (self.root / path).read_text()
        assert before in text, (path, before)
        (self.root / path).write_text(text.replace(before, before + after, 1))
        self.touched.append(path)

    def append(self, path: str, text: str) -> None:
        (self.root / path).write_text((self.root / path).read_text() + text)
        self.touched.append(path)

    def feature(self, item: str, title: str) -> None:
        """The README's feature-list item ``- **item**`` (up to the next item or the list's end) ends with ``title``."""
        readme = (self.root / "README.md").read_text()
        start = readme.index(f"- **{item}**")
        end = min(found for mark in ("\n- **", "\n\n") if (found := readme.find(mark, start)) >= 0)
        (self.root / "README.md").write_text(f"{readme[:end]} Also {title}.{readme[end:]}")
        self.touched.append("README.md")

    def table_row(self, path: str, header: str, row: str) -> None:
        """``row`` at the end of the Markdown table of ``path`` that starts with ``header``."""
        text = (self.root / path).read_text()
        start = text.index(header)
        end = text.index("\n\n", start)
        (self.root / path).write_text(f"{text[:end]}\n{row}{text[end:]}")
        self.touched.append(path)

    def files(self) -> list[str]:
        return sorted(set(self.touched))


@pytest.fixture(scope="module")
def recipes(tmp_path_factory, trained_run):
    """Both recipes followed in one copy of the repository, then its checks run there in one fresh process."""
    root = tmp_path_factory.mktemp("recipes") / "repo"
    root.mkdir()
    for name in [*COPIED, *(path.name for path in REPO.glob("*.py"))]:
        copy = shutil.copytree if (REPO / name).is_dir() else shutil.copy
        copy(
            REPO / name,
            root / name,
            **({"ignore": shutil.ignore_patterns("__pycache__")} if copy is shutil.copytree else {}),
        )
    audit, data = Copy(root), Copy(root)

    audit.write("fairnas/audits/scratch.py", AUDIT)
    audit.append(
        "conf/audit.yaml", "\nscratch:                   # is a group a small share of the split?\n  min_share: 0.25\n"
    )
    audit.table_row(
        "docs/audits.md", "| audit | question | method |", "| `scratch` | is a group a small share? | counts |"
    )
    audit.feature("Audits", "group shares")
    audit.write("tests/test_audit_scratch.py", AUDIT_TEST)

    data.write("fairnas/data/formats/scratch.py", FORMAT)
    data.write("conf/data/scratch.yaml", FORMAT_CONFIG)
    data.table_row(
        "docs/data.md", "| data set |", "| a folder per group | `<group>/<id>/*.jpg` | `python train.py data=scratch` |"
    )
    data.feature("Data", "a folder per group")
    data.append("tests/layouts.py", LAYOUT)
    data.append("tests/test_formats.py", FORMAT_TEST)

    out = root.parent / "audit"
    environment = {**os.environ, "PYTHONPATH": str(root), "WANDB_MODE": "offline", "PYTHONHASHSEED": "0"}
    done = subprocess.run(
        [sys.executable, "-c", CHECKS, str(trained_run), str(out)],
        cwd=root,
        env={key: value for key, value in environment.items() if key != "PYTEST_XDIST_WORKER"},
        capture_output=True,
        text=True,
        timeout=600,
    )
    results = re.search(r"^RESULTS (.*)$", done.stdout, re.MULTILINE)
    assert results, done.stdout[-3000:] + done.stderr[-3000:]
    return {"audit": audit.files(), "data": data.files(), "out": out, "log": done.stdout[-3000:]} | json.loads(
        results.group(1)
    )


@pytest.mark.integration  # a copy of the repository, checked in a fresh process
def test_a_new_audit_is_the_files_its_recipe_names_and_the_command_runs_and_checks_it(recipes):
    assert recipes["audit"] == recipe_files("An audit", "scratch")
    assert "scratch" in recipes["audits"]
    record = recipes["scratch"]["audits"]["scratch"]
    assert record["small_groups"] == 0 and record["finding"].startswith("0 group(s) below a share of 0.25")
    assert (recipes["out"] / "scratch" / "shares.csv").is_file() and "scratch" in (
        recipes["out"] / "report.html"
    ).read_text()
    assert recipes["refused"].startswith("scratch.min_share=2")  # checked though audits= names another audit
    outcomes = recipes["outcomes"]
    ran = [test for test in outcomes if test.startswith(("tests/test_docs_registries.py", "tests/test_audit_scratch"))]
    assert len(ran) >= 17 and all(outcomes[test] == "passed" for test in ran), recipes["log"]


@pytest.mark.integration  # a copy of the repository, checked in a fresh process
def test_a_new_data_format_is_the_files_its_recipe_names_and_a_data_option(recipes):
    assert recipes["data"] == recipe_files("A data format", "scratch")
    assert "scratch" in recipes["formats"]
    outcomes = recipes["outcomes"]
    assert outcomes["tests/test_formats.py::test_every_format_reads_its_layout_through_its_data_option[scratch]"] == (
        "passed"
    )
    ran = [test for test in outcomes if test.startswith("tests/test_formats.py")]
    assert len(ran) == 2 + len(recipes["formats"]) and all(outcomes[test] == "passed" for test in ran), recipes["log"]
    assert recipes["exit"] == 0, recipes["log"]


def test_the_recipes_name_their_files():
    assert recipe_files("An audit", "x") == [
        "README.md",
        "conf/audit.yaml",
        "docs/audits.md",
        "fairnas/audits/x.py",
        "tests/test_audit_x.py",
    ]
    assert len(recipe_files("A data format", "x")) == 6 and "conf/data/x.yaml" in recipe_files("A data format", "x")
