"""The report on a phone: every page lays out at the screen's width (a viewport meta tag; without
it a mobile browser lays the page out 980 px wide and shrinks its text to a third), and no page runs
wider than the screen (the nav wraps, wide tables and long legends scroll or wrap in their own box)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from report_helpers import CHROMIUM, CHROMIUM_ARGS

PHONE = 390


@pytest.fixture(scope="module")
def site(scripted_site: tuple[Path, Path, Path]) -> Path:
    return scripted_site[2]


def test_every_page_fits_a_phone_screen(site: Path, tmp_path: Path) -> None:
    exe = CHROMIUM if Path(CHROMIUM).is_file() else shutil.which("chromium")
    if exe is None:
        pytest.skip("chromium is not installed (apt-get install chromium; .ci/run does it)")
    sync_api = pytest.importorskip("playwright.sync_api")
    pages = sorted(p.relative_to(site).as_posix() for p in site.rglob("*.html"))
    assert "index.html" in pages and "items.html" in pages and any(p.startswith("bench/") for p in pages)
    errors: list[str] = []
    with sync_api.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=exe, args=CHROMIUM_ARGS, headless=True)
        try:
            ctx = browser.new_context(viewport={"width": PHONE, "height": 800}, is_mobile=True, has_touch=True)
            page = ctx.new_page()
            page.on("pageerror", lambda e: errors.append(str(e)))
            for name in pages:
                page.goto((site / name).as_uri())
                if name == "items.html":
                    page.wait_for_selector("#status[data-busy='0']")
                    page.locator("#list tbody a").first.click()  # the evidence, stacked under the list
                    page.wait_for_selector("#detail .question")
                inner, scroll = page.evaluate("[window.innerWidth, document.documentElement.scrollWidth]")
                assert inner == PHONE, f"{name}: laid out {inner} px wide on a {PHONE} px phone"
                assert scroll <= PHONE, f"{name}: {scroll} px wide, the reader must scroll sideways"
            page.goto((site / "index.html").as_uri())
            page.screenshot(path=str(tmp_path / "phone_index.png"), full_page=True)
        finally:
            browser.close()
    assert errors == []
