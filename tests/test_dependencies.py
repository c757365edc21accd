"""Every declared dependency earns its place, and every third-party import is declared (static, no heavy imports).

Imports are read from the source with :mod:`ast`, never executed: under ``fairnas/`` every ``import x`` /
``from x import y`` (absolute; anywhere, lazy imports in functions included), every
``importlib.import_module("x...")`` with a literal name, and every Hydra ``_target_: x...`` of ``conf/`` (shipped
inside the wheel as ``fairnas/conf``). Import names are mapped to distributions, and back, with the installed
distributions' metadata (:func:`importlib.metadata.packages_distributions`: their ``top_level.txt`` or, failing it,
their RECORD), so ``pillow`` -> ``PIL``, ``scikit-learn`` -> ``sklearn``, ``grad-cam`` -> ``pytorch_grad_cam``
need no hand-written table.

1. Each distribution in ``[project].dependencies`` is imported, or its use is indirect and listed in
   :data:`INDIRECT_USES` with a check that the use is still there. A requirement's extras count as declaring what
   the extra pulls in (``dask[distributed]`` declares ``distributed``, read from dask's metadata), and each extra
   must itself be imported.
2. Each third-party top-level module imported is provided by a declared distribution (also when another
   declared distribution happens to require it); one imported under ``try: ... except ImportError`` may come from an
   ``[project.optional-dependencies]`` extra instead.
"""

from __future__ import annotations

import ast
import functools
import importlib.metadata
import os
import re
import subprocess
import sys
import tomllib
from collections import defaultdict
from pathlib import Path

import pytest
from packaging.markers import default_environment
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "fairnas"
CONF = ROOT / "conf"

INDIRECT_USES = {
    # distribution: (why it is declared although never imported, a check of that use on the parsed sources)
    "tabulate": (
        "pandas.DataFrame.to_markdown (fairnas/mitigations/table.py) imports tabulate, an optional "
        "dependency of pandas that pandas does not install",
        lambda sources: any(
            isinstance(node, ast.Attribute) and node.attr == "to_markdown"
            for tree in sources.values()
            for node in ast.walk(tree)
        ),
    ),
}
"""Declared distributions used without an import of theirs in fairnas/, each with why and a check of the use."""

# ---------------------------------------------------------------------------------------------------- reading


def project() -> dict:
    return tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]


@functools.cache
def parsed_sources() -> dict[Path, ast.Module]:
    return {path: ast.parse(path.read_text(), filename=str(path)) for path in sorted(PACKAGE.rglob("*.py"))}


def imported_modules(sources: dict[Path, ast.Module]) -> dict[str, dict[str, set[str]]]:
    """top-level module -> {"required": files, "guarded": files}; guarded: inside ``try`` with an ImportError
    handler (an optional dependency)."""
    found: dict[str, dict[str, set[str]]] = defaultdict(lambda: {"required": set(), "guarded": set()})

    def visit(node: ast.AST, path: str, guarded: bool) -> None:
        names = []
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names = [node.module]
        elif (
            isinstance(node, ast.Call)
            and node.args
            and isinstance(node.args[0], ast.Constant)
            and isinstance(node.args[0].value, str)
            and (getattr(node.func, "attr", None) or getattr(node.func, "id", None)) == "import_module"
        ):
            names = [node.args[0].value]
        for name in names:
            found[name.split(".")[0]]["guarded" if guarded else "required"].add(path)
        if isinstance(node, ast.Try) and any(_catches_import_error(handler) for handler in node.handlers):
            for child in node.body:
                visit(child, path, True)
            for child in (*node.handlers, *node.orelse, *node.finalbody):
                visit(child, path, guarded)
            return
        for child in ast.iter_child_nodes(node):
            visit(child, path, guarded)

    for path, tree in sources.items():
        visit(tree, _shown(path), False)
    for path in sorted(CONF.rglob("*.yaml")):
        for target in re.findall(r"_target_:\s*['\"]?([A-Za-z_][\w.]*)", path.read_text()):
            found[target.split(".")[0]]["required"].add(_shown(path))
    return found


def _shown(path: Path) -> str:
    return str(path.relative_to(ROOT)) if path.is_relative_to(ROOT) else str(path)


def _catches_import_error(handler: ast.ExceptHandler) -> bool:
    types = handler.type.elts if isinstance(handler.type, ast.Tuple) else [handler.type]
    return any(getattr(t, "id", None) in ("ImportError", "ModuleNotFoundError") for t in types)


def third_party(modules) -> set[str]:
    return {m for m in modules if m not in sys.stdlib_module_names and m not in ("fairnas", "__future__")}


@functools.cache
def import_names() -> dict[str, set[str]]:
    """canonical distribution name -> the top-level import names it provides (installed distributions)."""
    names: dict[str, set[str]] = defaultdict(set)
    for module, distributions in importlib.metadata.packages_distributions().items():
        for distribution in distributions:
            names[canonicalize_name(distribution)].add(module)
    return names


def provided_by(module: str, provides: dict[str, set[str]]) -> set[str]:
    """The canonical names of the distributions providing top-level ``module`` (the name itself if none is
    installed: ``syne_tune`` -> ``syne-tune``)."""
    return {d for d, modules in provides.items() if module in modules} or {canonicalize_name(module)}


def extra_requirements(requirement: Requirement) -> set[str]:
    """Canonical names of what ``requirement``'s extras pull in, from the installed distribution's metadata."""
    pulled = set()
    for line in _requirement_lines(requirement.name):
        dependency = Requirement(line)
        if dependency.marker is None or dependency.marker.evaluate({**default_environment(), "extra": ""}):
            continue  # an unconditional requirement, not the extra's
        if any(dependency.marker.evaluate({**default_environment(), "extra": extra}) for extra in requirement.extras):
            pulled.add(canonicalize_name(dependency.name))
    return pulled


def _requirement_lines(distribution: str) -> list[str]:
    try:
        return importlib.metadata.requires(distribution) or []
    except importlib.metadata.PackageNotFoundError:
        return []


# ------------------------------------------------------------------------------------------------------ tests


def test_every_declared_dependency_is_imported_in_fairnas():
    sources = parsed_sources()
    imported = third_party(imported_modules(sources))
    provides = import_names()
    problems = []
    for line in project()["dependencies"]:
        requirement = Requirement(line)
        name = canonicalize_name(requirement.name)
        if name in INDIRECT_USES:
            why, still_used = INDIRECT_USES[name]
            if not still_used(sources):
                problems.append(
                    f"{requirement.name}: declared for an indirect use ({why}) that fairnas/ no longer "
                    "has; drop it from [project].dependencies"
                )
            continue
        modules = provides.get(name) or {name.replace("-", "_")}
        if not modules & imported:
            installed = "" if name in provides else " (not installed here: its import name is guessed)"
            problems.append(
                f"{requirement.name}: declared in [project].dependencies but none of its modules "
                f"{sorted(modules)} is imported under fairnas/{installed}; drop it, or list a "
                "documented indirect use in INDIRECT_USES"
            )
        for extra in requirement.extras:
            pulled = extra_requirements(Requirement(f"{requirement.name}[{extra}]"))
            if not any(provides.get(d, {d.replace("-", "_")}) & imported for d in pulled):
                problems.append(
                    f"{requirement.name}[{extra}]: the extra brings {sorted(pulled)}, none of which is "
                    "imported under fairnas/"
                )
    assert not problems, "\n".join(problems)


def test_every_third_party_import_in_fairnas_is_declared():
    sources = parsed_sources()
    modules = imported_modules(sources)
    provides = import_names()
    declared, optional = set(), set()
    for line in project()["dependencies"]:
        requirement = Requirement(line)
        declared |= {canonicalize_name(requirement.name), *extra_requirements(requirement)}
    for lines in project().get("optional-dependencies", {}).values():
        optional |= {canonicalize_name(Requirement(line).name) for line in lines}
    problems = []
    for module in sorted(third_party(modules)):
        files = modules[module]
        distributions = provided_by(module, provides)
        if distributions & declared:
            continue
        if not files["required"] and distributions & optional:
            continue  # imported only under try/except ImportError, from an extra
        where = sorted(files["required"] or files["guarded"])
        kind = "an optional import of" if not files["required"] else "imported in"
        problems.append(
            f"{'/'.join(sorted(distributions))} (module {module}, {kind} {', '.join(where[:3])}) is "
            "not declared in [project].dependencies" + (" nor in an extra" if not files["required"] else "")
        )
    assert not problems, "\n".join(problems)


def test_documented_exceptions_are_still_needed():
    """An INDIRECT_USES entry must still be declared."""
    declared = {canonicalize_name(Requirement(line).name) for line in project()["dependencies"]}
    stale = [f"INDIRECT_USES[{name!r}]: not declared any more" for name in INDIRECT_USES if name not in declared]
    assert not stale, "\n".join(stale)


def test_the_import_scan_sees_static_lazy_dynamic_and_guarded_imports(tmp_path, monkeypatch):
    source = ast.parse(
        "import numpy as np\n"
        "from PIL import Image\n"
        "from . import sibling\n"
        "def lazy():\n"
        "    import scipy.stats\n"
        "    return importlib.import_module('imagecorruptions.corruptions')\n"
        "try:\n"
        "    from syne_tune.optimizer import scheduler\n"
        "except ImportError as error:\n"
        "    raise ValueError('needs syne-tune') from error\n"
    )
    monkeypatch.setattr(sys.modules[__name__], "CONF", tmp_path)
    (tmp_path / "x.yaml").write_text("_target_: torch.optim.SGD\n")
    found = imported_modules({PACKAGE / "example.py": source})
    assert {m: sorted(k for k, files in v.items() if files) for m, v in found.items()} == {
        "numpy": ["required"],
        "PIL": ["required"],
        "scipy": ["required"],
        "imagecorruptions": ["required"],
        "syne_tune": ["guarded"],
        "torch": ["required"],
    }
    provides = import_names()
    assert "sklearn" in provides["scikit-learn"] and "PIL" in provides["pillow"]
    assert provided_by("syne_tune", {}) == {"syne-tune"}
    assert extra_requirements(Requirement("dask[distributed]")) == {"distributed"}


BLOCKER = """
import importlib.abc, sys
import pytest

class Missing(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in BLOCKED:
            raise ModuleNotFoundError(f"No module named {name!r} (blocked by the test)", name=name)
        return None

BLOCKED = set(sys.argv[1].split(","))
sys.meta_path.insert(0, Missing())
sys.exit(pytest.main(["--collect-only", "-q", "-p", "no:cacheprovider", "-o", "addopts=", "-m", "", *sys.argv[2:]]))
"""


@pytest.mark.integration
def test_every_test_module_collects_without_the_extras_and_without_wandb():
    """A machine with the core dependencies and pytest only (a GPU image, say) collects the whole suite: an extra's
    test skips where it runs, it does not break collection. ``wandb`` is blocked too, although declared: the GPU
    image of 2026-11-28 lacked it."""
    plugins = {"pytest", "pytest-timeout", "pytest-xdist"}
    extras = {
        canonicalize_name(Requirement(line).name)
        for lines in project()["optional-dependencies"].values()
        for line in lines
        if not Requirement(line).name.startswith("fairnas")
    } - plugins
    blocked = {name for distribution in extras for name in import_names().get(distribution, {distribution})}
    blocked |= {"wandb"}
    done = subprocess.run(
        [sys.executable, "-c", BLOCKER, ",".join(sorted(blocked)), str(ROOT / "tests")],
        capture_output=True,
        text=True,
        timeout=600,
        cwd=ROOT,
        env={**os.environ, "PYTHONHASHSEED": "0", "WANDB_MODE": "offline"},
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
    assert "error" not in done.stdout.splitlines()[-1], done.stdout[-3000:]
