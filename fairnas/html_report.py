"""One self-contained HTML page for a command's report (``audit.py``, ``study.py``): per section its findings,
figures (PNG embedded as data URIs) and tables (the first rows of each, the full table being the CSV beside the
page), then the command's config.

A section's description and findings are Markdown (``**holds**``, inline code, links, lists), rendered with the
``markdown`` package; raw HTML in them is shown as text (``p < 0.05`` and ``<b>`` read as typed), and Markdown
images are left as text. Every table sits in a box that scrolls sideways when it is wider than the page, and long
text in a cell wraps, so the page itself never needs a horizontal scroll bar.

Nothing is fetched when the page opens (no scripts, fonts, images or style sheets from elsewhere), so the file can
be mailed, archived or attached to a paper's supplement as it is.
"""

from __future__ import annotations

import base64
import dataclasses
import html
import math
import numbers
from collections.abc import Mapping
from pathlib import Path

import markdown
import pandas as pd
from markdown.extensions import Extension

from fairnas.io import write_text_atomic

MAX_TABLE_ROWS = 50
STYLE = """
body { font-family: system-ui, sans-serif; margin: 2em auto; padding: 0 1em; max-width: 72em; color: #222;
  line-height: 1.45; overflow-wrap: break-word; }
h1 { font-size: 1.6em; } h2 { border-bottom: 1px solid #ccc; padding-bottom: .2em; margin-top: 2em; }
.finding { background: #f4f6fa; border-left: 4px solid #4a6fa5; padding: .6em 1em; margin: 1em 0; }
.finding > :first-child { margin-top: 0; } .finding > :last-child { margin-bottom: 0; }
code { background: #f0f0f0; padding: 0 .2em; border-radius: 3px; font-size: .9em; }
.table-wrap { overflow-x: auto; max-width: 100%; margin: .5em 0 1.5em; }
table { border-collapse: collapse; font-size: .85em; }
th, td { border: 1px solid #ddd; padding: .25em .6em; text-align: right; vertical-align: top; min-width: 5em;
  white-space: normal; overflow-wrap: anywhere; }
th { background: #f0f0f0; } th.key { text-align: left; white-space: nowrap; min-width: 0; }
td { white-space: nowrap; } td.text, th.text { text-align: left; } td.text { white-space: normal; min-width: 12em; }
figure { margin: 1em 0; } figure img { max-width: 100%; border: 1px solid #eee; }
figcaption, .note { color: #666; font-size: .85em; } pre { background: #f7f7f7; padding: 1em; overflow-x: auto; }
nav a { margin-right: 1em; }
"""


@dataclasses.dataclass(frozen=True)
class PageSection:
    """One part of the page (an audit, a study's stage): ``findings`` are shown as highlighted paragraphs,
    ``tables`` and ``figures`` map names to the files written beside the page. ``description`` and ``findings``
    are Markdown."""

    name: str
    description: str
    findings: tuple[str, ...]
    tables: Mapping[str, Path]
    figures: Mapping[str, Path]
    seconds: float


def write_report(
    path: Path, *, title: str, header: Mapping[str, str], sections: list[PageSection], config_yaml: str
) -> Path:
    """Write the page to ``path`` (atomically); table and figure files are read from where the sections say."""
    parts = [
        f"<!DOCTYPE html>\n<html lang='en'><head><meta charset='utf-8'>"
        f"<meta name='viewport' content='width=device-width, initial-scale=1'><title>{_e(title)}</title>",
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


def render_markdown(text: str, css_class: str) -> str:
    """``text`` (Markdown) as one HTML block of class ``css_class``: a ``<p>`` when it is one paragraph (its
    inline Markdown rendered), else a ``<div>`` around the rendered blocks (paragraphs, lists)."""
    rendered = markdown.markdown(str(text), extensions=[_NoRawHtmlNorImages()]).strip()
    inner = rendered.removeprefix("<p>").removesuffix("</p>")
    if rendered.startswith("<p>") and "<p>" not in inner and "</p>" not in inner:
        return f"<p class='{css_class}'>{inner}</p>"
    return f"<div class='{css_class}'>{rendered}</div>"


class _NoRawHtmlNorImages(Extension):
    """Markdown without raw HTML (shown as text instead) and without images (which would be fetched)."""

    def extendMarkdown(self, md: markdown.Markdown) -> None:
        md.preprocessors.deregister("html_block")
        for pattern in ("html", "image_link", "image_reference", "short_image_ref"):
            if pattern in md.inlinePatterns:
                md.inlinePatterns.deregister(pattern)


def _header(values: Mapping[str, str]) -> str:
    rows = "".join(
        f"<tr><th class='key'>{_e(key)}</th><td class='text'>{_e(value)}</td></tr>" for key, value in values.items()
    )
    return f"<div class='table-wrap'><table>{rows}</table></div>"


def _section(section: PageSection, folder: Path) -> str:
    description = render_markdown(section.description, "note")
    seconds = f" ({section.seconds:.0f} s)"
    if description.endswith("</p>"):
        description = description.removesuffix("</p>") + seconds + "</p>"
    else:
        description += f"<p class='note'>{seconds.strip()}</p>"
    parts = [
        f"<h2 id='{_e(section.name)}'>{_e(section.name)}</h2>",
        description,
        *(render_markdown(finding, "finding") for finding in section.findings),
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
    """The first rows of ``frame``: numbers right-aligned (floats to 4 significant digits), text left-aligned."""
    shown = frame.head(MAX_TABLE_ROWS)
    note = f"all {len(frame)} rows" if len(frame) <= MAX_TABLE_ROWS else f"first {MAX_TABLE_ROWS} of {len(frame)} rows"
    numeric = [pd.api.types.is_numeric_dtype(dtype) and not pd.api.types.is_bool_dtype(dtype) for dtype in shown.dtypes]
    align = ["" if number else " class='text'" for number in numeric]
    head = "".join(f"<th{a}>{_e(column)}</th>" for column, a in zip(shown.columns, align, strict=True))
    rows = "".join(
        "<tr>" + "".join(f"<td{a}>{_e(_cell(value))}</td>" for value, a in zip(row, align, strict=True)) + "</tr>"
        for row in shown.itertuples(index=False, name=None)
    )
    return (
        f"<h3>{_e(name)}</h3><p class='note'>{note}; full table: {_e(str(relative))}</p>"
        f"<div class='table-wrap'><table><thead><tr class='columns'>{head}</tr></thead>"
        f"<tbody>{rows}</tbody></table></div>"
    )


def _cell(value: object) -> str:
    """A table cell's text: empty for a missing value, a float to 4 significant digits."""
    if isinstance(value, numbers.Real) and not isinstance(value, numbers.Integral):
        return "" if math.isnan(value) else f"{value:.4g}"
    return "" if value is None or (pd.api.types.is_scalar(value) and pd.isna(value)) else str(value)


def _e(text: object) -> str:
    return html.escape(str(text), quote=True)
