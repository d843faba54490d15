"""Helpers for the report tests: real screening rows from the real runner (scripted engine), and a
headless Chromium driven by Playwright through the system browser."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

CHROMIUM = os.environ.get("BENCHCHECK_CHROMIUM", "/usr/bin/chromium")
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--no-first-run"]
RULES = [
    # DemoJson colour questions with red first: confident gold (removed at step 1 when red is gold).
    {"match": "Question: What color.*\nOptions:\nA\\. red", "letters": {"A": -0.05, "B": -4, "C": -4.5, "D": -5}},
    {"match": "", "letters": {"A": -1.2, "B": -1.5, "C": -1.4, "D": -1.3, "E": -3.0}},
]


# Text that breaks naive TSV/YAML/JSON writers: tabs, newlines, quotes, a leading '#', non-ASCII.
TRICKY = [{"item_id": f"Tricky_{i}", "bench": "Tricky", "question": q, "options": opts, "answer": a}
          for i, (q, opts, a) in enumerate([
              ('What color is the "tab"\tcar?', ["red", "blue\tgreen", "#fff"], 0),
              ("Line one\nline two: which?", ['say "yes"', "no", "maybe, later", "café"], 2),
              ("- a YAML-looking question: true", ["null", "1e3", "- x"], 1),
          ])]


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "benchcheck", *args], capture_output=True, text=True, timeout=300)


def screened_pool(root: Path) -> tuple[Path, Path]:
    """Demo items screened at steps 1 and 4 by the scripted engine; returns (items, results)."""
    items, res = root / "items", root / "results"
    r = cli("demo", "items", "--out", str(items))
    assert r.returncode == 0, r.stderr
    (items / "Tricky.jsonl").write_text("".join(json.dumps(x) + "\n" for x in TRICKY))
    rules = root / "rules.json"
    rules.write_text(json.dumps(RULES))
    for step in (1, 4):
        r = cli("screen", "--items", str(items), "--step", str(step), "--results", str(res), "--engine", "scripted",
                "--rules", str(rules), "--no-progress")
        assert r.returncode == 0, r.stderr
    return items, res


@contextmanager
def browser_page() -> Iterator[tuple[Any, list[str]]]:
    """A Playwright page on the system Chromium, and the list its console errors land in."""
    if not Path(CHROMIUM).is_file() and not shutil.which("chromium"):
        pytest.skip("chromium is not installed (apt-get install chromium; .ci/run does it)")
    sync_api = pytest.importorskip("playwright.sync_api")
    errors: list[str] = []
    with sync_api.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM if Path(CHROMIUM).is_file() else shutil.which("chromium"),
                                    args=CHROMIUM_ARGS, headless=True)
        try:
            page = browser.new_page(viewport={"width": 1400, "height": 1000})
            page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
            page.on("pageerror", lambda e: errors.append(str(e)))
            yield page, errors
        finally:
            browser.close()
