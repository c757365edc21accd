"""The package's house rules: commands live in fairnas.tasks, nothing below imports them, and the library packages
import each other without loops (a static read of every ``import`` in ``fairnas/``)."""

from __future__ import annotations

import ast
import re
from collections import defaultdict
from pathlib import Path

import networkx as nx

PACKAGE = Path(__file__).resolve().parents[1] / "fairnas"


def unit(module: str) -> str:
    """The package (``fairnas.data``) or top-level module (``fairnas.io``) a module name belongs to."""
    return ".".join(module.split(".")[:2])


def imports_by_unit() -> dict[str, set[str]]:
    """For every unit of ``fairnas``, the other units its modules import (at run time or for type checking)."""
    graph: dict[str, set[str]] = defaultdict(set)
    for path in PACKAGE.rglob("*.py"):
        source = unit(".".join(("fairnas", *path.relative_to(PACKAGE).with_suffix("").parts)))
        for node in ast.walk(ast.parse(path.read_text())):
            names = (
                [alias.name for alias in node.names]
                if isinstance(node, ast.Import)
                else [node.module]
                if isinstance(node, ast.ImportFrom) and node.module and node.level == 0
                else []
            )
            graph[source].update(unit(name) for name in names if name.startswith("fairnas.") and unit(name) != source)
    return graph


def test_only_tasks_import_tasks():
    graph = imports_by_unit()
    importers = sorted(source for source, targets in graph.items() if "fairnas.tasks" in targets)
    assert importers == [], f"library modules import the commands: {importers}"


def test_no_import_loop_between_packages():
    graph = nx.DiGraph([(source, target) for source, targets in imports_by_unit().items() for target in targets])
    assert list(nx.simple_cycles(graph)) == []


def test_every_command_lives_in_tasks_and_the_scripts_are_thin():
    for command in ("train", "search", "evaluate", "audit", "compare"):
        script = (PACKAGE.parent / f"{command}.py").read_text()
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
