"""The item browser's search on long questions, in Chromium: the list chunks keep only the first
QUESTION_CHARS characters of a question, so a word further in is never found. The field said "id or
question", and a user searching a long question's later words was told no item matches; it now says
how much of the question it searches."""

from __future__ import annotations

import json
from pathlib import Path

from report_helpers import browser_page, cli

from benchcheck.report.browser import QUESTION_CHARS

RULES = [{"match": "", "letters": {"A": -1.2, "B": -1.5, "C": -1.4, "D": -1.3}}]


def test_search_says_how_much_of_the_question_it_reads(tmp_path: Path) -> None:
    items = tmp_path / "items"
    items.mkdir()
    head = "Which of these happens first in the clip "
    question = head + "x" * QUESTION_CHARS + " zebracrossing?"
    rows = [{"item_id": "Long_0", "question": question, "options": ["a", "b", "c", "d"], "answer": 1},
            {"item_id": "Long_1", "question": "Short one?", "options": ["a", "b", "c", "d"], "answer": 2}]
    (items / "Long.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    (tmp_path / "rules.json").write_text(json.dumps(RULES))
    res, out = tmp_path / "results", tmp_path / "report"
    r = cli("screen", "--items", str(items), "--step", "1", "--results", str(res), "--engine", "scripted",
            "--rules", str(tmp_path / "rules.json"), "--no-progress")
    assert r.returncode == 0, r.stderr
    r = cli("report", "--results", str(res), "--items", str(items), "--out", str(out), "--chain", "1",
            "--no-plots", "--no-progress")
    assert r.returncode == 0, r.stderr
    with browser_page() as (page, errors):
        page.goto((out / "items.html").as_uri())
        page.wait_for_selector("#list tbody tr")

        def search(q: str) -> list[str]:
            page.fill("#f-q", q)
            page.click("#f-go")
            page.wait_for_function("() => !document.getElementById('status').textContent.includes('loading')")
            ids: list[str] = page.locator("#list tbody tr").evaluate_all("rs => rs.map(r => r.dataset.id)")
            return ids

        assert search("happens first") == ["Long_0"]
        assert search("zebracrossing") == []  # past the searchable start: the field must say so
        field = page.locator("#f-q")
        title = page.locator("label", has=field).get_attribute("title") or ""
        said = (field.get_attribute("placeholder") or "") + " " + title
        assert f"{QUESTION_CHARS}" in said and "start" in said, said
        assert not errors
