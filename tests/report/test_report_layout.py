"""The report as a reader sees it, in headless Chromium (issue 38): the item browser at 1100, 1400
and 1920 px never lays the evidence over the list, hostile item text never runs, step-0
duplicates are removed at step 0 (never "pending"), the filter starts on every benchmark, the
fate codes have a legend, and no chart label leaves its chart.

Screenshots go to the test's tmp folder and, when ``BENCHCHECK_SCREENSHOTS`` names a folder, are
copied there too (to look at them: ``BENCHCHECK_SCREENSHOTS=/tmp/shots pytest tests/report``).
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Any

import pytest
from report_helpers import RULES, browser_page, cli

# Item text that would run if the report ever put it into the page as markup.
XSS_Q = '<script>window.__pwned = "question"</script>What colour is the <b>ball</b>?'
XSS_OPT = '<img src=x onerror="window.__pwned = \'option\'">red'
LONG_ID = "Hostile_" + "x" * 70  # a long id must clip in its cell, not push the columns apart
HOSTILE = [
    {"item_id": "Hostile_0", "bench": "Hostile", "question": XSS_Q, "options": [XSS_OPT, "blue", "green"],
     "answer": 0},
    {"item_id": LONG_ID, "bench": "Hostile", "question": "Which " + "very " * 60 + "long question is this?",
     "options": ["one", "two " * 40, "three"], "answer": 1},
    {"item_id": "Hostile_dup", "bench": "Hostile", "question": "A duplicate question?", "options": ["a", "b"],
     "answer": 0},
]
# The hostile item's gold (the <img> option) is confident wherever a permutation puts it, so step 1
# removes it and it is among the benchmark page's examples.
HOSTILE_RULES = [{"match": f"<b>ball</b>.*\nOptions:\n(?:.*\n){{{k}}}{'ABC'[k]}\\. <img",
                  "letters": {c: (-0.01 if c == "ABC"[k] else -6.0) for c in "ABC"}} for k in range(3)]
WIDTHS = (1100, 1400, 1920)


def keep_shot(path: Path) -> None:
    target = os.environ.get("BENCHCHECK_SCREENSHOTS")
    if target:
        Path(target).mkdir(parents=True, exist_ok=True)
        shutil.copy(path, Path(target) / path.name)


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Demo items plus the hostile benchmark, step 0 run (a kept list leaves out one duplicate per
    benchmark), steps 1 and 4 by the scripted engine, the report built with ``--step0``."""
    root = tmp_path_factory.mktemp("layout")
    items, res = root / "items", root / "results"
    r = cli("demo", "items", "--out", str(items))
    assert r.returncode == 0, r.stderr
    (items / "Hostile.jsonl").write_text("".join(json.dumps(x) + "\n" for x in HOSTILE))
    from benchcheck.items import load_items

    every = load_items([items]).items
    dups = {"Hostile_dup", "DemoJson_1"}
    step0 = root / "step0"
    step0.mkdir()
    (step0 / "step0_removed.jsonl").write_text("".join(json.dumps(
        {"item_id": i, "bench": i.split("_")[0], "verdict": "exact", "kind": "within", "similarity": 1.0,
         "duplicate_of": "DemoJson_0" if i == "DemoJson_1" else "Hostile_0"}) + "\n" for i in sorted(dups)))
    keep = root / "kept.txt"
    keep.write_text("".join(f"{it.item_id}\n" for it in every if it.item_id not in dups))
    rules = root / "rules.json"
    rules.write_text(json.dumps([*HOSTILE_RULES, *RULES]))
    for step in (1, 4):
        r = cli("screen", "--items", str(items), "--step", str(step), "--results", str(res), "--engine", "scripted",
                "--rules", str(rules), "--keep", str(keep), "--no-progress")
        assert r.returncode == 0, r.stderr
    out = root / "report"
    r = cli("report", "--results", str(res), "--items", str(items), "--out", str(out), "--step0", str(step0),
            "--no-progress", "--workers", "1")
    assert r.returncode == 0, r.stderr
    return {"items": items, "results": res, "out": out, "step0": step0}


def boxes(page: Any) -> dict[str, dict[str, float]]:
    return page.evaluate("""() => Object.fromEntries(['list-pane', 'list', 'detail'].map(id => {
        const r = document.getElementById(id).getBoundingClientRect();
        return [id, {left: r.left + scrollX, right: r.right + scrollX,
                     top: r.top + scrollY, bottom: r.bottom + scrollY}];
    }))""")


def overlap(a: dict[str, float], b: dict[str, float]) -> bool:
    return a["left"] < b["right"] and b["left"] < a["right"] and a["top"] < b["bottom"] and b["top"] < a["bottom"]


@pytest.mark.parametrize("width", WIDTHS)
def test_item_browser_never_overlaps(site: dict[str, Path], tmp_path: Path, width: int) -> None:
    """With an item open (the long one: a long id, a long question, a long option), the evidence
    panel's box and the list's box never intersect, and no list cell spills out of the list."""
    with browser_page() as (page, errors):
        page.set_viewport_size({"width": width, "height": 900})
        page.goto((site["out"] / "items.html").as_uri() + "#bench=Hostile")
        page.wait_for_selector("#status[data-done='1']")
        page.locator(f"#list tbody tr[data-id='{LONG_ID}'] a").click()
        page.wait_for_selector("#d-question")
        b = boxes(page)
        assert not overlap(b["list-pane"], b["detail"]), (width, b)
        assert not overlap(b["list"], b["detail"]), (width, b)
        assert b["list"]["right"] <= b["list-pane"]["right"] + 0.5, (width, b)
        # every cell ends inside the list (text clips with an ellipsis, the full text is its tooltip)
        spill = page.evaluate("""() => { const pane = document.getElementById('list-pane').getBoundingClientRect();
            return [...document.querySelectorAll('#list td, #list th')]
                .filter(td => td.getBoundingClientRect().right > pane.right + 0.5).length; }""")
        assert spill == 0
        # and every item link ends inside its own cell (a long id clips, it does not vanish or spill)
        links = page.evaluate("""() => [...document.querySelectorAll('#list tbody td a')].map(a => {
            const r = a.getBoundingClientRect(), c = a.parentElement.getBoundingClientRect();
            return [r.width > 20, r.right <= c.right + 0.5]; })""")
        assert links and all(ok for pair in links for ok in pair), links
        side_by_side = b["detail"]["left"] >= b["list-pane"]["right"]
        assert side_by_side == (width >= 1200), (width, b)  # stacked below 1200 px, evidence under the list
        if not side_by_side:
            assert b["detail"]["top"] >= b["list-pane"]["bottom"]
        # the evidence is readable: its question is not squeezed under 300 px
        assert page.locator("#d-question").bounding_box()["width"] >= 300
        shot = tmp_path / f"items_{width}.png"
        page.screenshot(path=str(shot), full_page=True)
        keep_shot(shot)
        assert errors == []
    assert shot.stat().st_size > 10_000


def test_item_text_never_runs(site: dict[str, Path], tmp_path: Path) -> None:
    """A question with a <script> and an option with an onerror handler show as text on the item
    view, in the list and on the benchmark page's removed examples; neither ever runs."""
    with browser_page() as (page, errors):
        page.goto((site["out"] / "items.html").as_uri() + "#bench=Hostile&item=Hostile_0")
        page.wait_for_selector("#d-question")
        assert page.locator("#d-question").inner_text() == XSS_Q
        assert page.locator("#d-options li").first.inner_text().startswith(XSS_OPT)
        assert page.locator("#detail img, #detail script, #detail b").count() == 0
        assert page.locator("#list tbody tr[data-id='Hostile_0'] td").last.inner_text() == XSS_Q[:90]
        page.goto((site["out"] / "bench" / "Hostile.html").as_uri())
        assert page.locator("td", has_text="<script>").count() == 1  # the example's question, as text
        assert page.locator("main script, main img").count() == 0
        assert page.evaluate("window.__pwned") is None
        shot = tmp_path / "hostile.png"
        page.screenshot(path=str(shot), full_page=True)
        keep_shot(shot)
        assert errors == []


def test_step0_duplicates_removed_at_step_0(site: dict[str, Path]) -> None:
    """The kept list's left-outs are removed at step 0 with their reason: in the funnel (step 0
    first), in the list ("removed @0", no step reached), on the item; never pending at step 1."""
    with browser_page() as (page, errors):
        page.goto((site["out"] / "index.html").as_uri())
        assert page.locator("#funnel tr").nth(1).locator("td").first.inner_text() == "0 duplicates"
        step0 = page.locator("#funnel tr", has_text="0 duplicates").locator("td").all_inner_texts()
        assert step0[1:3] == [str(every_item(site)), "2"]  # every item looked at, 2 removed
        step1 = page.locator("#funnel tr", has_text="1 blind").locator("td").all_inner_texts()
        assert step1[5] == "0"  # pending: none (the duplicates are not waiting for step 1)
        assert page.locator(".card.pending").count() == 0
        page.goto((site["out"] / "items.html").as_uri() + "#bench=Hostile&item=Hostile_dup")
        page.wait_for_selector("#d-step0")
        assert "duplicate of Hostile_0" in page.locator("#d-step0").inner_text()
        row = page.locator("#list tbody tr[data-id='Hostile_dup'] td")
        assert row.nth(1).inner_text() == "removed @0"
        assert row.nth(2).inner_text() == "------"  # no step of the chain reached it
        assert errors == []


def every_item(site: dict[str, Path]) -> int:
    return int(json.loads((site["out"] / "report.json").read_text())["items"])


def test_filter_starts_on_every_benchmark_and_fates_have_a_legend(site: dict[str, Path]) -> None:
    with browser_page() as (page, errors):
        page.goto((site["out"] / "items.html").as_uri())
        page.wait_for_selector("#status[data-busy='0']")
        assert page.locator("#f-bench").input_value() == ""
        # the scan runs over every benchmark's items (it stops once the first page is full)
        assert page.locator("#status").inner_text().endswith(f" of {every_item(site)} so far)")
        legend = page.locator("#fate-legend").inner_text()
        for code, meaning in (("k", "kept"), ("r", "removed"), ("p", "not screened yet"), ("-", "not reached")):
            assert f"{code} {meaning}" in legend
        title = page.locator("#list tbody td.fates").first.get_attribute("title")
        assert title is not None and title.startswith("step 1: ") and "step 4: " in title
        assert errors == []


def test_no_chart_text_leaves_its_chart(site: dict[str, Path]) -> None:
    """Every text of every inline chart lies inside its SVG's box (Chromium's own text metrics),
    and no legend swatch sits on a bar."""
    with browser_page() as (page, errors):
        for name in ("bench/DemoJson.html", "bench/Hostile.html"):
            page.goto((site["out"] / name).as_uri())
            bad = page.evaluate("""() => {
                const out = [];
                for (const svg of document.querySelectorAll('svg.chart')) {
                  const vb = svg.viewBox.baseVal;
                  for (const t of svg.querySelectorAll('text')) {
                    const b = t.getBBox(), m = t.getCTM(), s = svg.getCTM().inverse().multiply(m);
                    const pts = [[b.x, b.y], [b.x + b.width, b.y], [b.x, b.y + b.height],
                                 [b.x + b.width, b.y + b.height]]
                      .map(([x, y]) => new DOMPoint(x, y).matrixTransform(s));
                    if (pts.some(p => p.x < -0.5 || p.y < -0.5 || p.x > vb.width + 0.5 || p.y > vb.height + 0.5))
                      out.push(t.textContent);
                  }
                  const bars = [...svg.querySelectorAll('rect:not(.legend)')].map(r => r.getBBox());
                  for (const l of svg.querySelectorAll('rect.legend')) {
                    const a = l.getBBox();
                    if (bars.some(b => b.height > 0 && a.x < b.x + b.width && b.x < a.x + a.width &&
                                       a.y < b.y + b.height && b.y < a.y + a.height)) out.push('legend on a bar');
                  }
                }
                return out; }""")
            assert bad == [], (name, bad)
        assert errors == []
