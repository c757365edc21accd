"""One self-contained HTML page for a command's report (``audit.py``, ``study.py``): per section its findings,
figures (PNG embedded as data URIs) and tables (the first rows of each, the full table being the CSV beside the
page), then the command's config.

Nothing is fetched when the page opens (no scripts, fonts or style sheets from elsewhere), so the file can be
mailed, archived or attached to a paper's supplement as it is.
"""

from __future__ import annotations

import base64
import dataclasses
import html
from collections.abc import Mapping
from pathlib import Path

import pandas as pd

from fairnas.io import write_text_atomic

MAX_TABLE_ROWS = 50
STYLE = """
body { font-family: system-ui, sans-serif; margin: 2em auto; max-width: 72em; color: #222; line-height: 1.45; }
h1 { font-size: 1.6em; } h2 { border-bottom: 1px solid #ccc; padding-bottom: .2em; margin-top: 2em; }
p.finding { background: #f4f6fa; border-left: 4px solid #4a6fa5; padding: .6em 1em; }
table { border-collapse: collapse; font-size: .85em; margin: .5em 0 1.5em; }
th, td { border: 1px solid #ddd; padding: .25em .6em; text-align: right; } th { background: #f0f0f0; }
figure { margin: 1em 0; } figure img { max-width: 100%; border: 1px solid #eee; }
figcaption, .note { color: #666; font-size: .85em; } pre { background: #f7f7f7; padding: 1em; overflow-x: auto; }
nav a { margin-right: 1em; }
"""


@dataclasses.dataclass(frozen=True)
class Section:
    """One part of the page (an audit, a study's stage): ``findings`` are shown as highlighted paragraphs,
    ``tables`` and ``figures`` map names to the files written beside the page."""

    name: str
    description: str
    findings: tuple[str, ...]
    tables: Mapping[str, Path]
    figures: Mapping[str, Path]
    seconds: float


def write_report(
    path: Path, *, title: str, header: Mapping[str, str], sections: list[Section], config_yaml: str
) -> Path:
    """Write the page to ``path`` (atomically); table and figure files are read from where the sections say."""
    parts = [
        f"<!DOCTYPE html>\n<html lang='en'><head><meta charset='utf-8'><title>{_e(title)}</title>",
        f"<style>{STYLE}</style></head><body>",
        f"<h1>{_e(title)}</h1>",
        _header(header),
        "<nav>"
        + "".join(f"<a href='#{_e(s.name)}'>{_e(s.name)}</a>" for s in sections)
        + "<a href='#config'>config</a></nav>",
    ]
    parts += [_section(section, path.parent) for section in sections]
    parts.append(f"<h2 id='config'>Config</h2><pre>{_e(config_yaml)}</pre></body></html>\n")
    write_text_atomic(path, "\n".join(parts))
    return path


def _header(values: Mapping[str, str]) -> str:
    rows = "".join(
        f"<tr><th>{_e(key)}</th><td style='text-align:left'>{_e(value)}</td></tr>" for key, value in values.items()
    )
    return f"<table>{rows}</table>"


def _section(section: Section, folder: Path) -> str:
    parts = [
        f"<h2 id='{_e(section.name)}'>{_e(section.name)}</h2>",
        f"<p class='note'>{_e(section.description)} ({section.seconds:.0f} s)</p>",
        *(f"<p class='finding'>{_e(finding)}</p>" for finding in section.findings),
    ]
    for name, png in section.figures.items():
        data = base64.b64encode(Path(png).read_bytes()).decode("ascii")
        parts.append(
            f"<figure><img alt='{_e(name)}' src='data:image/png;base64,{data}'>"
            f"<figcaption>{_e(name)}</figcaption></figure>"
        )
    for name, csv in section.tables.items():
        parts.append(_table(name, pd.read_csv(csv), Path(csv).relative_to(folder)))
    return "\n".join(parts)


def _table(name: str, frame: pd.DataFrame, relative: Path) -> str:
    shown = frame.head(MAX_TABLE_ROWS)
    note = f"all {len(frame)} rows" if len(frame) <= MAX_TABLE_ROWS else f"first {MAX_TABLE_ROWS} of {len(frame)} rows"
    body = shown.to_html(index=False, float_format=lambda value: f"{value:.4g}", na_rep="", border=0)
    return f"<h3>{_e(name)}</h3><p class='note'>{note}; full table: {_e(str(relative))}</p>{body}"


def _e(text: object) -> str:
    return html.escape(str(text), quote=True)
