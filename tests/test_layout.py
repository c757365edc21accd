"""The package's house rules, read statically from every ``import`` in ``fairnas/`` and ``bench/``: the commands live
in fairnas.tasks and neither a library module nor a benchmark script imports them, the library packages import each
other without loops, and no chain of module-level imports comes back to where it started."""

from __future__ import annotations

import ast
import importlib.util
import re
from collections.abc import Iterable, Iterator
from pathlib import Path

import networkx as nx

REPO = Path(__file__).resolve().parents[1]
PACKAGE = REPO / "fairnas"
COMMANDS = "fairnas.tasks"


def module_name(path: Path) -> str:
    """``fairnas/search/loop.py`` -> ``fairnas.search.loop``; a package is its ``__init__.py``."""
    parts = path.relative_to(REPO).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {module_name(path): path for path in PACKAGE.rglob("*.py")}


def imported(node: ast.Import | ast.ImportFrom, path: Path) -> list[str]:
    """The modules an import statement of the file ``path`` names; ``from a import b`` names ``a.b`` where that is a
    module of fairnas, else ``a``."""
    if isinstance(node, ast.Import):
        return [alias.name for alias in node.names]
    base = node.module or ""
    if node.level:
        package = module_name(path) if path.name == "__init__.py" else module_name(path).rpartition(".")[0]
        base = importlib.util.resolve_name("." * node.level + base, package)
    return [f"{base}.{alias.name}" if f"{base}.{alias.name}" in MODULES else base for alias in node.names]


def all_imports(path: Path) -> set[str]:
    """Every module the file imports, wherever the statement is (inside functions and type checks included)."""
    tree = ast.parse(path.read_text())
    nodes = (node for node in ast.walk(tree) if isinstance(node, ast.Import | ast.ImportFrom))
    return {name for node in nodes for name in imported(node, path)}


def module_level_imports(path: Path) -> set[str]:
    """The modules importing the file imports: statements outside functions and outside ``if TYPE_CHECKING:``."""
    return {name for node in _run_on_import(ast.parse(path.read_text()).body) for name in imported(node, path)}


def _run_on_import(body: Iterable[ast.stmt]) -> Iterator[ast.Import | ast.ImportFrom]:
    for node in body:
        if isinstance(node, ast.Import | ast.ImportFrom):
            yield node
        elif isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            yield from _run_on_import(node.orelse)
        elif not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            for block in ("body", "orelse", "finalbody", "handlers"):
                yield from _run_on_import(getattr(node, block, []))


def is_command(module: str) -> bool:
    return module == COMMANDS or module.startswith(f"{COMMANDS}.")


def unit(module: str) -> str:
    """The package (``fairnas.data``) or top-level module (``fairnas.io``) a module belongs to."""
    return ".".join(module.split(".")[:2])


def test_no_library_module_and_no_benchmark_script_imports_a_command():
    library = [path for name, path in MODULES.items() if not is_command(name)]
    importers = sorted(
        f"{path.relative_to(REPO)} imports {name}"
        for path in [*library, *(REPO / "bench").glob("*.py")]
        for name in all_imports(path)
        if is_command(name)
    )
    assert importers == []


def test_no_import_loop_between_packages():
    graph = nx.DiGraph()
    for name, path in MODULES.items():
        targets = {unit(target) for target in all_imports(path) if target.startswith("fairnas.")} - {unit(name)}
        graph.add_edges_from((unit(name), target) for target in targets)
    assert list(nx.simple_cycles(graph)) == []


def test_no_import_cycle_between_modules():
    graph = nx.DiGraph()
    for name, path in MODULES.items():
        graph.add_edges_from((name, target) for target in module_level_imports(path) if target in MODULES)
    cycles = sorted(nx.simple_cycles(graph), key=len)
    assert not cycles, "import cycles: " + "; ".join(" -> ".join([*cycle, cycle[0]]) for cycle in cycles[:5])


def test_every_command_lives_in_tasks_and_the_scripts_are_thin():
    for command in ("train", "search", "evaluate", "audit", "compare", "study"):
        script = (REPO / f"{command}.py").read_text()
        assert f"from fairnas.tasks.{command} import main" in script and len(script.splitlines()) <= 8


def test_numbers_are_told_from_bools_only_in_the_validation_module():
    """'An integer that is not a bool' (and 'a number that is not a bool') is written once, in fairnas.validation
    (is_integer, is_number, Settings): an inline ``isinstance(x, bool) or not isinstance(x, int)`` elsewhere is a
    second way to check a setting."""
    inline = re.compile(
        r"isinstance\([^()]*,\s*bool\)\s+or\s+not\s+isinstance|and\s+not\s+isinstance\([^()]*,\s*bool\)"
    )
    found = [
        f"{path.relative_to(PACKAGE.parent)}:{number}"
        for path in sorted(PACKAGE.rglob("*.py"))
        if path != PACKAGE / "validation.py"
        for number, line in enumerate(path.read_text().splitlines(), 1)
        if inline.search(line)
    ]
    assert found == [], f"inline integer or number checks (use fairnas.validation): {found}"
