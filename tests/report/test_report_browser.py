"""The report opened from disk in headless Chromium: no console errors, the overview renders, the
browser filters by benchmark and decision, and an item shows its question and step-1 margins."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from report_helpers import browser_page, cli

from benchcheck.store import load_state


def wait_matches(page: Any, n: int) -> None:
    """Until the browser has read every chunk and counts exactly ``n`` matches."""
    page.wait_for_function(f"document.getElementById('status').textContent.startsWith('{n} matching items')")


@pytest.fixture(scope="module")
def site(scripted_site: tuple[Path, Path, Path]) -> tuple[Path, Path, Path]:
    return scripted_site


def test_overview_renders_without_console_errors(site: tuple[Path, Path, Path], tmp_path: Path) -> None:
    _, res, out = site
    step1 = load_state(res / "step1")
    with browser_page() as (page, errors):
        page.goto((out / "index.html").as_uri())
        assert page.locator("h1#overview").inner_text() == "Overview"
        assert page.locator("#loud").is_visible()  # scripted engine: loud label
        assert "scripted" in page.locator("#loud").inner_text()
        row = page.locator("#funnel tr", has_text="blind")
        screened = len(step1.ok)
        assert f"{screened}" in row.inner_text()
        assert page.locator("#benches a", has_text="DemoJson").count() == 1
        # steps 2, 3, 5 and 6 never ran: every kept item is counted as kept without a visual step
        cells = page.locator("#benches tr", has_text="DemoJson").locator("td").all_inner_texts()
        assert cells[2] == cells[6] != "0"
        assert "kept without a visual step" in page.locator(".cards").inner_text()
        page.screenshot(path=str(tmp_path / "overview.png"), full_page=True)
        for name in ("sweep.html", "qa.html", "provenance.html", "bench/DemoJson.html"):
            page.goto((out / name).as_uri())
        assert errors == []
    assert (tmp_path / "overview.png").stat().st_size > 10_000


def test_filter_by_bench_and_decision_then_open_item(site: tuple[Path, Path, Path], tmp_path: Path) -> None:
    _, res, out = site
    step1 = load_state(res / "step1")
    removed = sorted(i for i, r in step1.ok.items() if r["bench"] == "DemoJson" and r["removed"])
    kept_json = sorted(i for i, r in step1.ok.items() if r["bench"] == "DemoJson" and not r["removed"])
    assert removed and kept_json
    with browser_page() as (page, errors):
        page.goto((out / "items.html").as_uri())
        page.wait_for_selector("#status[data-busy='0']")
        page.select_option("#f-bench", "DemoJson")
        page.select_option("#f-step", "1")
        page.select_option("#f-final", "removed")
        wait_matches(page, len(removed))
        listed = sorted(page.locator("#list tbody tr").evaluate_all("rs => rs.map(r => r.dataset.id)"))
        assert listed == removed
        # kept at step 1 within the same benchmark: the complement, no removed item among them
        page.select_option("#f-final", "kept")
        wait_matches(page, len(kept_json))
        shown = set(page.locator("#list tbody tr").evaluate_all("rs => rs.map(r => r.dataset.id)"))
        assert len(shown) == min(50, len(kept_json)) and shown <= set(kept_json)
        # margin range at step 1 (any decision): exactly the items whose mean margin is in range
        page.select_option("#f-final", "")
        page.fill("#f-mlo", "1")
        page.fill("#f-mhi", "5")
        page.click("#f-go")
        in_range = {i for i, r in step1.ok.items() if r["bench"] == "DemoJson" and 1 <= round(r["mean_margin"], 3) <= 5}
        wait_matches(page, len(in_range))
        shown = set(page.locator("#list tbody tr").evaluate_all("rs => rs.map(r => r.dataset.id)"))
        assert shown and shown <= in_range and len(shown) == min(50, len(in_range))
        page.fill("#f-mlo", "")
        page.fill("#f-mhi", "")
        # open a removed item: its question and its step-1 margins
        page.select_option("#f-final", "removed")
        wait_matches(page, len(removed))
        item = removed[0]
        page.locator(f"#list tbody tr[data-id='{item}'] a").click()
        page.wait_for_selector("#d-question")
        from benchcheck.items import load_items

        it = next(i for i in load_items([site[0]]).items if i.item_id == item)
        assert page.locator("#d-question").inner_text() == it.question
        margins = page.locator(".step-1 td.margin").all_inner_texts()
        assert margins == [f"{m:.3f}" for m in step1.ok[item]["margins"]]
        page.screenshot(path=str(tmp_path / "item.png"), full_page=True)
        assert errors == []
    assert (tmp_path / "item.png").stat().st_size > 10_000


@pytest.fixture(scope="module")
def audited_site(site: tuple[Path, Path, Path], tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """The same pool with `benchcheck audit` run on it and the report built with --audit."""
    items, res, _ = site
    root = tmp_path_factory.mktemp("audited")
    r = cli("audit", "--results", str(res), "--items", str(items), "--out", str(root / "audit"), "--rounds", "50",
            "--quiet")
    assert r.returncode == 0, r.stderr
    out = root / "report"
    r = cli("report", "--results", str(res), "--items", str(items), "--audit", str(root / "audit"), "--out",
            str(out), "--no-progress", "--no-plots")
    assert r.returncode == 0, r.stderr
    return root / "audit", out


def test_confidence_is_shown_filtered_and_sorted(audited_site: tuple[Path, Path], tmp_path: Path) -> None:
    import csv
    import json

    audit, out = audited_site
    rows = [r for r in csv.DictReader((audit / "audit_items.csv").open()) if r["step"] == "4" and r["confidence"]]
    step4 = {r["item_id"]: round(float(r["confidence"]), 3) for r in rows}
    json4 = {r["item_id"] for r in rows if r["bench"] == "DemoJson"}
    # the scripted engine's step 4 gives a few distinct margins; the empirical-Bayes confidence pools
    # those within noise of each other (docs/audit.md), so a few distinct values, not many
    assert len(set(step4.values())) > 3
    with browser_page() as (page, errors):
        page.goto((out / "items.html").as_uri())
        page.wait_for_selector("#status[data-busy='0']")
        assert "confidence" in page.locator("#list thead").inner_text()
        page.select_option("#f-bench", "DemoJson")
        page.select_option("#f-step", "4")
        # filter: exactly the benchmark's items whose step-4 confidence lies in a range that leaves
        # out its lowest value and, with three or more, its highest (bounds halfway between values)
        vals = sorted({step4[i] for i in json4})
        assert len(vals) >= 2
        lo = (vals[0] + vals[1]) / 2
        hi = (vals[-2] + vals[-1]) / 2 if len(vals) >= 3 else 1.0
        page.fill("#f-clo", f"{lo:.4f}")
        page.fill("#f-chi", f"{hi:.4f}")
        page.click("#f-go")
        in_range = {i for i in json4 if lo <= step4[i] <= hi}
        assert 0 < len(in_range) < len(json4)
        wait_matches(page, len(in_range))
        shown = page.locator("#list tbody tr").evaluate_all("rs => rs.map(r => r.dataset.id)")
        assert shown and set(shown) <= in_range and len(shown) == min(50, len(in_range))
        texts = page.locator("#list tbody td.conf").all_inner_texts()
        assert texts == [f"{step4[i]:.3f}" for i in shown]  # the column shows the step's confidence
        # order by confidence, lowest first, over every benchmark's step-4 items (ordering reads them all)
        page.fill("#f-clo", "")
        page.fill("#f-chi", "")
        page.select_option("#f-bench", "")
        page.select_option("#f-sort", "confidence-asc")
        every = json.loads((out / "report.json").read_text())["items"]  # no decision filter: all items
        wait_matches(page, every)
        texts = page.locator("#list tbody td.conf").all_inner_texts()
        assert texts == [f"{c:.3f}" for c in sorted(step4.values())[:50]]
        page.select_option("#f-sort", "confidence-desc")
        page.wait_for_function("document.querySelector('#list tbody td.conf').textContent === "
                               f"'{max(step4.values()):.3f}'")
        first = page.locator("#list tbody tr").first
        item = first.get_attribute("data-id")
        assert first.locator("td.conf").inner_text() == f"{max(step4.values()):.3f}"
        # the item view: the step's confidence beside its decision
        first.locator("a").click()
        page.wait_for_selector(".step-4 p.conf")
        assert f"confidence {step4[str(item)]:.3f}" in page.locator(".step-4 p.conf").inner_text()
        page.screenshot(path=str(tmp_path / "confidence.png"), full_page=True)
        assert errors == []


def test_audit_page_draws_the_null_and_the_threshold_curves(audited_site: tuple[Path, Path]) -> None:
    """The audit page's figures are the audit's own numbers: a bar pair (conditioned null, observed) per
    benchmark and step with the null's interval, and one threshold curve per step whose left end
    is the removal rate at threshold 0 and which passes the protocol's log 2 marker."""
    import csv

    audit, out = audited_site
    null = list(csv.DictReader((audit / "audit_null.csv").open()))
    thresholds = list(csv.DictReader((audit / "audit_thresholds.csv").open()))
    steps = sorted({int(r["step"]) for r in null})
    with browser_page() as (page, errors):
        page.goto((out / "audit.html").as_uri())
        charts = page.locator("#audit_charts svg")
        # a step where nothing was removed and the null expects nothing has a note, not an empty chart;
        # the chart's null is the conditioned one, the headline's (the permutation null overstates
        # chance at a step run on an earlier step's survivors)
        drawn = sorted({int(r["step"]) for r in null
                        if any(float(r[c] or 0) for c in ("cond_null_rate", "observed_rate", "cond_null_hi"))})
        assert drawn and charts.count() == len(drawn) + 2  # a null chart per step drawn, the threshold and FDR curves
        flat = [s for s in steps if s not in drawn]
        if flat:
            assert f"{', '.join(map(str, flat))}: no chart" in page.locator("p.chart-note").inner_text()
        for row in null:
            if int(row["step"]) not in drawn:
                continue
            chart = page.locator("#audit_charts svg", has_text=f"Step {row['step']}: observed vs the null")
            tips = chart.locator("rect title").evaluate_all("ts => ts.map(t => t.textContent)")
            shown = {t.rsplit(": ", 1)[0]: float(t.rsplit(": ", 1)[1]) for t in tips}
            label = row["bench"]  # whole: a long name slants, it is never cut
            assert label in chart.locator("text.xtick").all_text_contents()
            for series, column in (("null", "cond_null_rate"), ("observed", "observed_rate")):
                # tooltips show two significant digits
                assert abs(shown[f"{series} {label}"] - float(row[column])) <= 0.01 * max(1.0, float(row[column])) \
                    + 0.05 * float(row[column]), (row, tips)
        curves = page.locator("#audit_charts svg", has_text="Removal rate against the threshold")
        assert curves.locator("polyline.series").count() == len(steps)
        assert "log 2" in curves.locator("line title").evaluate_all("ts => ts.map(t => t.textContent)")[0]
        # the curve of the first step starts (threshold 0) at its pooled removal rate
        first = [r for r in thresholds if r["step"] == str(steps[0]) and float(r["threshold"]) == 0.0]
        rate0 = sum(int(r["removed"]) for r in first) / sum(int(r["items"]) for r in first)
        y0 = float(curves.locator("polyline.series").first.get_attribute("points").split()[0].split(",")[1])
        axis = curves.locator("line").first  # the y axis: from the plot's top to its bottom
        top, bottom = float(axis.get_attribute("y1")), float(axis.get_attribute("y2"))
        assert abs(y0 - (top + (bottom - top) * (1 - rate0))) < 0.11
        assert errors == []

