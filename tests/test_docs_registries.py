"""The lists a reader sees in the README and the docs come from the registries: a strategy or a study stage added
to its registry and left out of a list fails here, naming the list."""

from __future__ import annotations

import re
from pathlib import Path

from fairnas.results import STRATEGIES
from fairnas.search.strategies import REGISTRY
from fairnas.study.stages import STAGES

REPO = Path(__file__).resolve().parents[1]


def feature(name: str) -> str:
    """The README's feature-list item ``- **name** ...`` up to the next item."""
    readme = (REPO / "README.md").read_text()
    return readme.split(f"- **{name}**", 1)[1].split("\n- **", 1)[0]


def table_rows(page: str, header: str) -> list[str]:
    """The first cells (in backticks) of the Markdown table that starts with ``header``."""
    table = (REPO / "docs" / page).read_text().split(header, 1)[1].split("\n\n", 1)[0]
    return re.findall(r"^\| `(\w+)`", table, flags=re.MULTILINE)


def test_the_readme_feature_list_names_every_registered_strategy():
    search = " ".join(feature("Search").split())
    assert [name for name, strategy in REGISTRY.items() if strategy.title not in search] == []


def test_the_readme_strategy_table_has_a_row_for_every_registered_strategy():
    assert sorted(set(REGISTRY) - set(STRATEGIES)) == []


def test_the_study_page_describes_every_stage_in_the_registry_order():
    assert table_rows("study.md", "| stage | question | runs |") == list(STAGES)


def test_no_page_counts_the_strategies_by_hand():
    counted = r"\b(?:[Aa]ll|[Tt]he) (?:two|three|four|five|six|seven|eight) (?:strategies|keep)\b"
    pages = [REPO / "README.md", REPO / "CONTRIBUTING.md", *sorted((REPO / "docs").glob("*.md"))]
    assert [page.name for page in pages if re.search(counted, page.read_text())] == []


def layout_block() -> str:
    """The tree drawn under docs/development.md's "Layout"."""
    page = (REPO / "docs" / "development.md").read_text()
    return page.split("## Layout", 1)[1].split("```", 2)[1]


def test_the_layout_names_every_package_and_top_level_module_of_fairnas():
    block, package = layout_block(), REPO / "fairnas"
    folders = [f"{path.name}/" for path in package.rglob("*") if path.is_dir() and path.name != "__pycache__"]
    modules = [path.name for path in package.glob("*.py") if path.name != "__init__.py"]
    assert [name for name in folders + modules if name not in block] == []


def test_every_file_the_layout_names_is_in_the_tree():
    files = {path.name for path in REPO.glob("*.py")} | {path.name for path in (REPO / "fairnas").rglob("*.py")}
    named = set(re.findall(r"\b([a-z_0-9]+\.py)\b", layout_block()))
    assert sorted(named - files) == []
