"""The audit report: one self-contained HTML page whose figures render in a real browser (headless Chromium)."""

from __future__ import annotations

import numpy as np
import pandas as pd
from matplotlib.figure import Figure

from fairnas.html_report import MAX_TABLE_ROWS, PageSection, write_report
from tests.helpers import needs_chromium, page_overflows, screenshot

BAR_BLUE = np.array([0x1F, 0x77, 0xB4])  # matplotlib's first colour (C0)


def _page(folder, *, rows: int = 3, finding: str = "group g1 is served worse"):
    figure = Figure(figsize=(4, 3))
    figure.subplots().bar([0, 1], [1, 2], color="#1f77b4")
    figure.savefig(folder / "bars.png")
    pd.DataFrame({"group": [f"g{i}" for i in range(rows)], "error": np.linspace(0, 1, rows)}).to_csv(
        folder / "rates.csv", index=False
    )
    section = PageSection(
        "corruptions",
        "ImageNet-C corruptions",
        (finding,),
        {"rates": folder / "rates.csv"},
        {"bars": folder / "bars.png"},
        12.0,
    )
    return write_report(
        folder / "report.html",
        title="audit <of> run",
        header={"split": "test"},
        sections=[section],
        config_yaml="seed: 0\n",
    )


def test_report_embeds_figures_and_escapes_text(tmp_path):
    page = _page(tmp_path, rows=MAX_TABLE_ROWS + 5, finding="a < b & c").read_text()
    assert page.count("data:image/png;base64,") == 1
    assert "a &lt; b &amp; c" in page and "audit &lt;of&gt; run" in page
    assert f"first {MAX_TABLE_ROWS} of {MAX_TABLE_ROWS + 5} rows; full table: rates.csv" in page
    assert page.count("<tr>") == 1 + MAX_TABLE_ROWS  # the page header row, then the shown rows
    assert "http" not in page.lower().replace("http-equiv", "")  # nothing is fetched from elsewhere


@needs_chromium
def test_figures_render_in_headless_chromium(tmp_path):
    (tmp_path / "good").mkdir()
    (tmp_path / "broken").mkdir()
    good = screenshot(_page(tmp_path / "good").as_uri(), tmp_path / "good")
    broken_page = _page(tmp_path / "broken")
    broken_page.write_text(broken_page.read_text().replace("base64,iVBOR", "base64,AAAA"))
    broken = screenshot(broken_page.as_uri(), tmp_path / "broken")

    def blue_pixels(shot):
        return int((np.abs(shot - BAR_BLUE).max(axis=2) < 10).sum())

    assert blue_pixels(good) > 20_000  # the two bars, drawn by the browser from the embedded PNG
    assert blue_pixels(broken) == 0  # control: an image the browser cannot decode shows no bars


def test_findings_are_rendered_markdown_with_raw_html_shown_as_text(tmp_path):
    page = _page(tmp_path, finding="the claim **holds** (p < 0.05) for `<b>` in [Table 2](#rates)").read_text()
    assert "<p class='finding'>the claim <strong>holds</strong> (p &lt; 0.05) for <code>&lt;b&gt;</code>" in page
    assert '<a href="#rates">Table 2</a>' in page
    assert "**" not in page and "<b>" not in page


def _wide_page(folder):
    """A page with a 40-column table of long strings, a long unbroken cell, long findings and a long header."""
    columns = {f"column_{i}_with_a_long_name": [f"value {i} " + "long text " * 8, 1.5 * i] for i in range(40)}
    columns["path"] = ["/a/very/long/path/without/spaces/" * 6, "x"]
    pd.DataFrame(columns).to_csv(folder / "wide.csv", index=False)
    finding = "**holds** " + "a long finding about a model with many words " * 20 + "x" * 300
    section = PageSection(
        "wide", "A *very* wide table " * 10, (finding, finding), {"wide": folder / "wide.csv"}, {}, 1.0
    )
    header = {"run": "/runs/" + "deeply/nested/" * 30, "split": "test"}
    return write_report(folder / "report.html", title="wide", header=header, sections=[section], config_yaml="a: 1\n")


@needs_chromium
def test_wide_tables_and_long_findings_fit_the_page_in_headless_chromium(tmp_path):
    page = _wide_page(tmp_path)
    assert "<script" not in page.read_text()
    overflows, dom = page_overflows(page, tmp_path)
    assert not overflows
    assert dom.count("<strong>holds</strong>") == 2 and "**" not in dom


@needs_chromium
def test_the_overflow_probe_sees_a_page_wider_than_the_window(tmp_path):
    """Control for the test above: the probe reports an overflow when the page has one."""
    assert page_overflows(_wide_page(tmp_path), tmp_path, "<div style='width: 3000px'>wide</div>")[0]
