"""The package's house rules, read statically from every ``import`` in ``fairnas/`` and ``bench/``: the commands live
in fairnas.tasks and neither a library module nor a module under ``bench/`` imports them, the library packages
import each other without loops, no chain of module-level imports comes back to where it started, the library knows
nothing of the repository around it (it imports nothing from ``bench``, the project's comparisons and evidence, and
holds no path that climbs out of the package from ``__file__`` or names a file or folder of the repository), and
``fairnas.benchmarks`` holds only the benchmark API, its comparisons in ``bench/comparison/`` under names of their
own."""

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
        for path in [*library, *(REPO / "bench").rglob("*.py")]
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


KNOWS_THE_CHECKOUT = {
    # a source checkout (pip install -e .) reads the repository's conf/ and searchspaces/ beside the package; a wheel
    # carries them inside it
    "fairnas/config.py",
}
"""Library modules allowed a path out of the package, each with its reason."""
REPOSITORY_PATH = re.compile(r"^(results|docs|bench|tests)/|^(README|CONTRIBUTING)\.md$|^mkdocs\.yml$")
"""A string constant that names a file or folder of the repository."""


def climb(node: ast.expr, names: dict[str, int]) -> int | None:
    """How many folders above its own file ``node`` is, where it is a path made from ``__file__`` (``.parent``,
    ``.parents[k]``, ``os.path.dirname``; ``names``: module-level names bound to such paths), else None."""
    if isinstance(node, ast.Name):
        return 0 if node.id == "__file__" else names.get(node.id)
    if isinstance(node, ast.Attribute) and node.attr == "parent":
        base = climb(node.value, names)
        return None if base is None else base + 1
    if isinstance(node, ast.Subscript) and isinstance(node.value, ast.Attribute) and node.value.attr == "parents":
        base = climb(node.value.value, names)
        up = node.slice.value if isinstance(node.slice, ast.Constant) and isinstance(node.slice.value, int) else 0
        return None if base is None else base + up + 1
    if isinstance(node, ast.Call):
        name = ast.unparse(node.func)
        if isinstance(node.func, ast.Attribute) and node.func.attr in ("resolve", "absolute"):
            return climb(node.func.value, names)
        if name in ("Path", "pathlib.Path", "os.path.abspath", "os.path.realpath") and node.args:
            return climb(node.args[0], names)
        if name == "os.path.dirname" and node.args:
            base = climb(node.args[0], names)
            return None if base is None else base + 1
    return None


def repository_paths(path: Path) -> list[str]:
    """Where the library module ``path`` climbs out of the package from ``__file__``, or names a file or folder of
    the repository in a string (docstrings aside)."""
    tree = ast.parse(path.read_text())
    inside = len(path.relative_to(PACKAGE).parts)  # folders up to the package's own: fairnas/config.py is 1
    names: dict[str, int] = {}
    for statement in tree.body:
        if isinstance(statement, ast.Assign | ast.AnnAssign) and statement.value is not None:
            targets = statement.targets if isinstance(statement, ast.Assign) else [statement.target]
            levels = climb(statement.value, names)
            names |= {target.id: levels for target in targets if isinstance(target, ast.Name) and levels is not None}
    prose = {id(node.value) for node in ast.walk(tree) if isinstance(node, ast.Expr)}  # docstrings, bare strings
    found = []
    for node in ast.walk(tree):
        climbing = isinstance(node, ast.Attribute | ast.Subscript | ast.Call)  # a name only carries a climb
        levels = climb(node, names) if climbing else None
        if levels is not None and levels > inside:
            found.append(f"line {node.lineno}: {ast.unparse(node)} climbs out of the package")
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in prose:  # noqa: SIM102
            if REPOSITORY_PATH.search(node.value):
                found.append(f"line {node.lineno}: {node.value!r} names a path of the repository")
    return found


def test_a_path_out_of_the_package_or_into_the_repository_is_found(tmp_path, monkeypatch):
    package = tmp_path / "fairnas"
    (package / "sub").mkdir(parents=True)
    source = (
        '"""See docs/x.md and README.md."""\nimport os\nfrom pathlib import Path\n\n'
        "HERE = Path(__file__).resolve().parent\nTOP = HERE.parent\nDATA = Path(__file__).parents[0] / 'tables'\n"
        "UP = os.path.dirname(os.path.dirname(__file__))\nPAGE = 'docs/scale.md'\nNAME = 'tests'\n"
    )
    (package / "sub" / "module.py").write_text(source)
    monkeypatch.setattr(f"{__name__}.PACKAGE", package)
    page = "line 9: 'docs/scale.md' names a path of the repository"
    assert repository_paths(package / "sub" / "module.py") == [page]  # two folders up is still the package
    (package / "module.py").write_text(source)
    assert sorted(repository_paths(package / "module.py")) == [
        "line 6: HERE.parent climbs out of the package",
        "line 8: os.path.dirname(os.path.dirname(__file__)) climbs out of the package",
        page,
    ]


def test_the_library_imports_nothing_from_the_evidence_and_knows_no_repository_path():
    importers = sorted(
        f"{path.relative_to(REPO)} imports {name}"
        for path in MODULES.values()
        for name in all_imports(path)
        if name == "bench" or name.startswith("bench.")
    )
    assert importers == [], "the library imports the project's evidence (bench/)"
    found = {
        path.relative_to(REPO).as_posix(): paths
        for path in sorted(PACKAGE.rglob("*.py"))
        if (paths := repository_paths(path))
    }
    assert sorted(set(found) - KNOWS_THE_CHECKOUT) == [], found
    assert sorted(KNOWS_THE_CHECKOUT - set(found)) == [], "an allowed module no longer needs it: remove it"


BENCHMARK_API = {
    "fairnas.benchmarks",
    "fairnas.benchmarks.analytic",
    "fairnas.benchmarks.answer_quality",
    "fairnas.benchmarks.blackbox",
    "fairnas.benchmarks.botorch_problems",
    "fairnas.benchmarks.compute_meter",
    "fairnas.benchmarks.design",
    "fairnas.benchmarks.problems",
    "fairnas.benchmarks.surrogate",
    "fairnas.benchmarks.surrogate_front",
    "fairnas.benchmarks.surrogate_metrics",
    "fairnas.benchmarks.surrogate_target",
    "fairnas.benchmarks.syne_tune_blackbox",
    "fairnas.benchmarks.table_target",
    "fairnas.benchmarks.tables",
}
"""What ``fairnas.benchmarks`` holds: the benchmark API a user imports (the blackbox, the tables and their query and
design, the surrogate and its reference front, the problems with their targets and cost meters, the answer's
scoring). The project's comparisons of the strategies live in ``bench/comparison/``."""
COMPARISON = ["answer_selection", "botorch_reference", "cli", "comparison_plan", "figure", "live_check", "methods"]
COMPARISON += ["runner", "summary", "table_report", "tabular"]
"""The modules that left ``fairnas/benchmarks/`` for ``bench/comparison/`` (some under new names)."""


def test_the_benchmark_package_holds_only_the_api_and_the_comparisons_live_in_bench():
    held = {name for name in MODULES if name == "fairnas.benchmarks" or name.startswith("fairnas.benchmarks.")}
    assert sorted(held - BENCHMARK_API) == [], "fairnas.benchmarks holds more than the benchmark API"
    assert sorted(BENCHMARK_API - held) == [], "an API module is gone: update BENCHMARK_API"
    back = [name for name in COMPARISON if (PACKAGE / "benchmarks" / f"{name}.py").exists()]
    assert back == [], "a comparison module is back in fairnas/benchmarks/ (its home is bench/comparison/)"
    assert (REPO / "bench" / "comparison" / "__init__.py").is_file()


def test_no_module_of_bench_s_packages_repeats_a_script_s_or_the_library_s_name():
    """``bench/comparison/`` and ``bench/evidence/`` hold no module named as a ``bench/`` script or a library module
    (``bench/tabular.py`` runs ``bench/comparison/table_builder.py``, not a second ``tabular``)."""
    taken = {path.stem for path in (REPO / "bench").glob("*.py")} | {path.stem for path in PACKAGE.rglob("*.py")}
    repeated = sorted(
        path.relative_to(REPO).as_posix()
        for package in ("comparison", "evidence")
        for path in (REPO / "bench" / package).glob("*.py")
        if path.stem != "__init__" and path.stem in taken
    )
    assert repeated == []
