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
