"""Each step's margin histogram on a benchmark page draws the log 2 threshold and names its x axis,
also when every margin lies on one side of the threshold (the scripted rules give step 4 margins
all below log 2): without the line a reader cannot tell whether such a step removes everything or
nothing."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from report_helpers import browser_page

from benchcheck.protocol import LOG2
from benchcheck.report import stats
from benchcheck.report.svg import histogram


@pytest.fixture(scope="module")
def site(scripted_site: tuple[Path, Path, Path]) -> Path:
    return scripted_site[2]


def margin_charts(html: str) -> dict[str, str]:
    return {m.group(1): m.group(0) for m in re.finditer(r'<svg[^>]*aria-label="(step \d+ margin[^"]*)".*?</svg>',
                                                        html, re.S)}


def test_every_margin_histogram_marks_log2_and_names_its_axis(site: Path) -> None:
    charts = margin_charts((site / "bench" / "DemoJson.html").read_text())
    assert any(k.startswith("step 4 margin") for k in charts), charts.keys()
    for title, svg in charts.items():
        assert "<title>log 2 = 0.693</title>" in svg, f"{title}: no log 2 line"
        assert ">margin (nats)</text>" in svg, f"{title}: x axis unnamed"


def test_step4_margins_all_below_the_line_in_the_browser(site: Path) -> None:
    with browser_page() as (page, errors):
        page.goto((site / "bench" / "DemoJson.html").as_uri())
        chart = page.locator("svg.chart[aria-label^='step 4 margin']")
        line = chart.locator("line[stroke-dasharray]").bounding_box()
        bars = [b for b in (r.bounding_box() for r in chart.locator("rect").all()) if b is not None]
        assert line is not None and bars
        assert all(b["x"] + b["width"] <= line["x"] + 1 for b in bars)  # every bar left of log 2
        assert errors == []


def test_the_svg_histogram_marks_a_threshold_only_inside_its_edges() -> None:
    counts, edges = stats.histogram([-1.0, -0.5], bins=4, lo=-1.0, hi=LOG2)
    assert "log 2" in histogram("t", counts, edges, vline=LOG2)
    counts, edges = stats.histogram([-1.0, -0.5], bins=4)
    assert "log 2" not in histogram("t", counts, edges, vline=LOG2)
