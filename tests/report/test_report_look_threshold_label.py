"""The audit page's threshold and false-discovery curves name their dashed marker on the chart
("log 2" beside the line), as the margin histograms do: a tooltip alone is never seen in print or on
a phone, and an unnamed dashed red line reads as one more curve."""

from __future__ import annotations

import re

from report_helpers import browser_page

from benchcheck.protocol import LOG2
from benchcheck.report.svg import lines

TIP = f"the protocol's threshold, log 2 = {LOG2:.3f}"


def chart() -> str:
    return lines("Removal rate against the threshold", [0.0, 0.5, LOG2, 1.0, 3.0],
                 [("step 1", "#1f77b4", [0.5, 0.4, 0.3, 0.2, 0.1])], ymax=1.0, vline=(LOG2, TIP),
                 xlabel="margin threshold (nats)", ylabel="removed share")


def test_the_marker_is_named_in_visible_text() -> None:
    svg = chart()
    visible = re.sub(r"<title>.*?</title>", "", svg)
    assert re.search(r'<text class="vtext"[^>]*>log 2</text>', visible), svg


def test_the_name_sits_beside_the_line_in_the_browser() -> None:
    with browser_page() as (page, errors):
        page.set_content(f"<!doctype html><html><body>{chart()}</body></html>")
        line = page.locator("svg line[stroke-dasharray]").bounding_box()
        label = page.locator("svg text.vtext")
        assert label.is_visible() and label.text_content() == "log 2"
        box = label.bounding_box()
        assert line is not None and box is not None
        assert 0 <= box["x"] - line["x"] <= 10 and line["y"] <= box["y"] <= line["y"] + line["height"]
        assert errors == []
