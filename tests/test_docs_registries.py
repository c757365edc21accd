"""The lists a reader sees in the README, the docs and the configs come from the registries (strategies, study stages,
audits, data formats): one added to its registry and left out of a list, or a list naming one that is not
registered, fails here, naming the list."""

from __future__ import annotations

import re
from pathlib import Path

from omegaconf import DictConfig, OmegaConf

from bench.evidence.results import STRATEGIES
from fairnas.audits import AUDITS
from fairnas.data.formats import FORMATS
from fairnas.search.strategies import REGISTRY
from fairnas.study.stages import STAGES

REPO = Path(__file__).resolve().parents[1]


def feature(name: str, readme: str | None = None) -> str:
    """The README's feature-list item ``- **name** ...`` up to the next item or the list's end, on one line."""
    readme = (REPO / "README.md").read_text() if readme is None else readme
    return " ".join(readme.split(f"- **{name}**", 1)[1].split("\n- **", 1)[0].split("\n\n", 1)[0].split())


def table(page: str, header: str) -> str:
    """The Markdown table of ``docs/<page>`` that starts with ``header``."""
    return (REPO / "docs" / page).read_text().split(header, 1)[1].split("\n\n", 1)[0]


def table_rows(page: str, header: str) -> list[str]:
    """The first cells (in backticks) of the Markdown table that starts with ``header``."""
    return re.findall(r"^\| `(\w+)`", table(page, header), flags=re.MULTILINE)


def untitled(text: str, titles: dict[str, str]) -> list[str]:
    """The names whose title ``text`` does not contain."""
    return [name for name, title in titles.items() if title not in text]


def test_a_feature_item_missing_a_title_is_named():
    readme = "- **Audits** (docs): corruptions and ICON², in one report.\n- **Measured**: Fairness Indicators"
    assert untitled(feature("Audits", readme), {"corruptions": "corruptions", "fi": "Fairness Indicators"}) == ["fi"]
    last = "- **Audits** (docs): corruptions and ICON², in one\n  report.\n\n## Documentation\n\nFairness Indicators"
    assert feature("Audits", last) == "(docs): corruptions and ICON², in one report."  # the list's last item


def test_the_readme_feature_list_names_every_registered_strategy():
    assert untitled(feature("Search"), {name: each.title for name, each in REGISTRY.items()}) == []


def test_the_readme_feature_list_names_every_registered_audit():
    assert untitled(feature("Audits"), {name: each.title for name, each in AUDITS.items()}) == []


def test_the_readme_feature_list_names_every_registered_data_format():
    assert untitled(feature("Data"), {name: each.title for name, each in FORMATS.items()}) == []


def mentioned(text: str, titles: dict[str, str]) -> list[str]:
    """The names ``text`` mentions, by title or by name as a word (case and hyphens aside: MO-ASHA is moasha)."""
    words = {word.replace("-", "").lower() for word in re.findall(r"[\w-]+", text)}
    return [name for name, title in titles.items() if title in text or name in words]


def table_row(page: str, words: str) -> str:
    """The row of a Markdown table of ``page`` that holds ``words``."""
    return next(line for line in (REPO / page).read_text().splitlines() if line.startswith("|") and words in line)


def test_the_readme_documentation_table_names_every_registered_strategy():
    row = table_row("README.md", "[strategies](docs/search_strategies.md) |")
    titles = {name: each.title for name, each in REGISTRY.items()}
    assert sorted(set(titles) - set(mentioned(row, titles))) == []


def test_the_readme_strategy_table_has_a_row_for_every_registered_strategy():
    assert sorted(set(REGISTRY) - set(STRATEGIES)) == []


def test_the_study_page_describes_every_stage_in_the_registry_order():
    assert table_rows("study.md", "| stage | question | runs |") == list(STAGES)


def test_the_audits_page_has_a_row_for_every_registered_audit():
    assert sorted(table_rows("audits.md", "| audit | question | method |")) == sorted(AUDITS)


def test_the_strategies_page_has_a_row_for_every_registered_strategy():
    rows = table_rows("search_strategies.md", "| `search.strategy` | what it is |")
    assert sorted(rows) == sorted(REGISTRY)


def test_the_data_page_has_a_row_for_every_registered_format_by_its_title_and_option():
    rows = re.findall(r"^\| ([^|]+?) \|.*`python train.py data=(\w+)", table("data.md", "| data set |"), re.MULTILINE)
    assert sorted(rows) == sorted((each.title, name) for name, each in FORMATS.items())


def test_no_page_counts_a_registry_by_hand():
    numbers = "two|three|four|five|six|seven|eight|nine|ten"
    things = "strategies|keep|audits|stages|data formats"
    counted = rf"\b(?:[Aa]ll|[Tt]he) (?:{numbers}) (?:{things})\b"
    pages = [REPO / "README.md", REPO / "CONTRIBUTING.md", *sorted((REPO / "docs").glob("*.md"))]
    assert [page.name for page in pages if re.search(counted, page.read_text())] == []


def test_the_audit_config_has_a_section_for_every_registered_audit_and_no_other():
    config = OmegaConf.to_container(OmegaConf.load(REPO / "conf" / "audit.yaml"))
    sections = [key for key, value in config.items() if isinstance(value, dict)]
    assert sorted(sections) == sorted(AUDITS)


def test_the_study_config_runs_every_stage_in_the_registry_order_each_with_its_section():
    config = OmegaConf.load(REPO / "conf" / "study" / "default.yaml")
    assert list(config.stages) == list(STAGES)
    assert [name for name in STAGES if not isinstance(config.get(name), DictConfig)] == []


def test_the_local_search_composes_the_options_of_every_strategy_that_has_them():
    with_options = sorted(name for name, each in REGISTRY.items() if each.options is not None)
    files = sorted(path.stem for path in (REPO / "conf" / "search" / "strategy").glob("*.yaml"))
    defaults = OmegaConf.to_container(OmegaConf.load(REPO / "conf" / "search" / "local.yaml").defaults)
    listed = sorted(value for entry in defaults if isinstance(entry, dict) for key, value in entry.items())
    assert with_options == files == [name for name in listed if name in files]
    assert [f"strategy@{name}" for name in with_options] == sorted(
        key for entry in defaults if isinstance(entry, dict) for key in entry if key.startswith("strategy@")
    )


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
    files = {path.name for path in REPO.glob("*.py")}
    files |= {path.name for folder in ("fairnas", "bench") for path in (REPO / folder).rglob("*.py")}
    named = set(re.findall(r"\b([a-z_0-9]+\.py)\b", layout_block()))
    assert sorted(named - files) == []
