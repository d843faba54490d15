"""The report opened from disk in headless Chromium: no console errors, the overview renders, the
browser filters by benchmark and decision, and an item shows its question and step-1 margins."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from report_helpers import browser_page, cli, screened_pool

from benchcheck.store import load_state


def wait_matches(page: Any, n: int) -> None:
    """Until the browser has read every chunk and counts exactly ``n`` matches."""
    page.wait_for_function(f"document.getElementById('status').textContent.startsWith('{n} matching items')")


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, Path]:
    root = tmp_path_factory.mktemp("report")
    items, res = screened_pool(root)
    out = root / "report"
    r = cli("report", "--results", str(res), "--items", str(items), "--out", str(out), "--no-progress")
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == str(out / "index.html")
    return items, res, out


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
        page.wait_for_selector("#status[data-done='1']")
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
