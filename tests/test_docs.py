"""The docs site builds and renders: ``mkdocs build --strict`` (no broken link or anchor, no page left out of the
nav, no API cross-reference that mkdocstrings cannot resolve), its start page drawn by headless Chromium, the
API reference's cross-reference extension, and the README as a short front door whose links lead somewhere.

The commands shown on every page are composed by ``tests/test_readme.py``.
"""

from __future__ import annotations

import importlib.util
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.helpers import chromium, needs_chromium, screenshot

REPO = Path(__file__).resolve().parents[1]
API_MODULES = (
    "fairnas.search",
    "fairnas.metrics",
    "fairnas.models",
    "fairnas.audits",
    "fairnas.training.build",
    "fairnas.data",
)


@pytest.fixture(scope="module")
def site(tmp_path_factory) -> Path:
    """The site, built once for this module with ``mkdocs build --strict`` into a temporary folder."""
    site_dir = tmp_path_factory.mktemp("site")
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}  # Material's banner about its own future, not about these docs
    started = time.perf_counter()
    built = subprocess.run(
        [
            sys.executable,
            "-m",
            "mkdocs",
            "build",
            "--strict",
            "--config-file",
            str(REPO / "mkdocs.yml"),
            "--site-dir",
            str(site_dir),
        ],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    output = built.stdout + built.stderr
    assert built.returncode == 0, f"mkdocs build --strict failed:\n{output}"
    assert not re.search(r"^(WARNING|ERROR)\b", output, flags=re.MULTILINE), output
    print(f"mkdocs build --strict: {time.perf_counter() - started:.1f} s")
    return site_dir


def test_the_site_builds_strictly_with_every_page(site):
    pages = sorted(path.relative_to(REPO / "docs").with_suffix("").as_posix() for path in (REPO / "docs").rglob("*.md"))
    for page in pages:
        built = site / ("index.html" if page == "index" else f"{page.removesuffix('/index')}/index.html")
        assert built.is_file(), f"docs/{page}.md was not built"
    for module in API_MODULES:  # every public module is documented from its docstrings
        page = (site / "api" / module.rsplit(".", 1)[-1] / "index.html").read_text()
        assert f'id="{module}"' in page, module
    assert (site / "assets" / "pareto_front.png").is_file()


@needs_chromium
def test_the_start_page_renders_in_headless_chromium(site, tmp_path):
    start = (site / "index.html").as_uri()
    pixels = screenshot(start, tmp_path)
    ink = (pixels.max(axis=2) < 160).mean()  # dark pixels: text, the header bar
    assert pixels.std() > 20 and ink > 0.005, (pixels.std(), ink)  # a drawn page, not a blank one
    dom = chromium(tmp_path, "--dump-dom", start).stdout.decode()
    assert "<title>fairnas</title>" in dom
    assert "Neural architecture and hyperparameter search for fairer face recognition" in dom
    assert "The five commands" in dom and 'href="getting_started/' in dom  # the content and the navigation


def _extension():
    spec = importlib.util.spec_from_file_location("griffe_sphinx_roles", REPO / "docs" / "griffe_sphinx_roles.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_sphinx_roles_become_cross_references(tmp_path):
    """Roles that name an object become (optional) autorefs to its full path; a role that names nothing stays a
    plain Markdown cross-reference, which ``mkdocs build --strict`` reports."""
    import griffe

    package = tmp_path / "rolepkg"
    package.mkdir()
    (package / "__init__.py").write_text(
        '"""See :class:`Thing`, :mod:`.sub` and :func:`~rolepkg.sub.helper`."""\nfrom rolepkg.sub import Thing\n'
    )
    (package / "sub.py").write_text(
        'class Thing:\n    """A thing; :meth:`run` it, never :func:`nowhere`."""\n\n'
        "    def run(self):\n        pass\n\n\ndef helper():\n    pass\n"
    )
    loaded = griffe.load(
        "rolepkg", search_paths=[tmp_path], extensions=griffe.load_extensions(_extension().SphinxRoles)
    )
    top, thing = loaded.docstring.value, loaded["sub"]["Thing"].docstring.value
    assert '<autoref identifier="rolepkg.sub.Thing" optional><code>Thing</code></autoref>' in top
    assert '<autoref identifier="rolepkg.sub" optional><code>sub</code></autoref>' in top
    assert '<autoref identifier="rolepkg.sub.helper" optional><code>helper</code></autoref>' in top
    assert '<autoref identifier="rolepkg.sub.Thing.run" optional><code>run</code></autoref>' in thing
    assert "[`nowhere`][nowhere]" in thing


def long_prose_lines(text: str, width: int = 120) -> list[int]:
    """The numbers of the lines of Markdown ``text`` over ``width`` characters outside code (fenced blocks, indented
    lines) once each link's target is left out: a line may be long only for its code or its links."""
    found, fenced = [], False
    for number, line in enumerate(text.splitlines(), 1):
        if line.lstrip().startswith("```"):
            fenced = not fenced
        elif not fenced and not line.startswith("    ") and len(re.sub(r"\]\([^)\s]+\)", "]", line)) > width:
            found.append(number)
    return found


def test_a_long_prose_line_is_found_and_code_and_link_targets_are_not():
    link = f"[the page](docs/{'a' * 150}.md)"
    text = f"{'x' * 121}\n```bash\n{'y' * 200}\n```\n    {'z' * 200}\n{link}\n{'w' * 115} {link}"
    assert long_prose_lines(text) == [1, 7]


def test_the_readme_is_a_front_door():
    """At most 120 lines and 12,000 characters, no line over 120 characters but for its code or links; what fairnas
    is and its two commands come first."""
    readme = (REPO / "README.md").read_text()
    assert len(readme.splitlines()) <= 120 and len(readme) <= 12_000, (len(readme.splitlines()), len(readme))
    assert long_prose_lines(readme) == []
    first_screen = "\n".join(readme.splitlines()[:30])
    assert "face recognition" in first_screen and "python -m pytest" in first_screen
    assert "mkdocs serve" in readme and "mkdocs build --strict" in readme
    for document in ("README.md", "CONTRIBUTING.md"):  # GitHub renders these; mkdocs does not check their links
        text = (REPO / document).read_text()
        for target in re.findall(r"\]\(([^)\s]+)\)", text):
            if not re.match(r"[a-z]+:", target) and not target.startswith("#"):
                assert (REPO / target.split("#")[0]).exists(), f"{document} links to {target}, which does not exist"
