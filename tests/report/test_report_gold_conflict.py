"""A gold conflict found by step 0 reaches the report's item view with both golds: the copy is
removed at step 0 like any duplicate, and the page says why its removal is not the whole story."""

from __future__ import annotations

import json
from pathlib import Path

from report_helpers import RULES, browser_page, cli

QUESTION = "What is the man holding in his hand?"
OPTIONS = ["a cup", "a phone", "a book", "a pen"]


def _step0_on_the_removed_item(tmp_path: Path, question: str, rows: dict[str, tuple[list[str], int]]) -> str:
    """One item a bench (``rows``: bench -> its options and gold) asking ``question`` about one video,
    through dedup, screening and the report: the text the report's item view gives the copy removed
    at step 0 (``beta_1``), read in the browser without a console error."""
    items = tmp_path / "items"
    items.mkdir()
    for bench, (options, gold) in rows.items():
        row = {"item_id": f"{bench}_1", "question": question, "options": options, "answer": gold, "video_id": "v1"}
        (items / f"{bench}.jsonl").write_text(json.dumps(row) + "\n")
    step0, out = tmp_path / "step0", tmp_path / "report"
    r = cli("dedup", "--items", str(items / "alpha.jsonl"), "--items", str(items / "beta.jsonl"), "--out", str(step0),
            "--model", "minilm", "--quiet")
    assert r.returncode == 0, r.stderr
    rules = tmp_path / "rules.json"
    rules.write_text(json.dumps(RULES))
    r = cli("screen", "--items", str(items), "--step", "1", "--results", str(tmp_path / "results"), "--engine",
            "scripted", "--rules", str(rules), "--keep", str(step0 / "step0_kept.parquet"), "--no-progress")
    assert r.returncode == 0, r.stderr
    r = cli("report", "--results", str(tmp_path / "results"), "--items", str(items), "--out", str(out),
            "--chain", "1", "--step0", str(step0), "--no-progress", "--no-plots")
    assert r.returncode == 0, r.stderr
    with browser_page() as (page, errors):
        page.goto((out / "items.html").as_uri() + "#bench=beta&item=beta_1")
        page.wait_for_selector("#d-step0")
        why: str = page.locator("#d-step0").inner_text()
        assert errors == []
    return why


def test_gold_conflict_shown_on_the_removed_item(tmp_path: Path) -> None:
    why = _step0_on_the_removed_item(tmp_path, QUESTION, {"alpha": (OPTIONS, 0), "beta": (OPTIONS, 2)})
    assert "gold_conflict (cross) duplicate of alpha_1 in alpha" in why
    assert "gold C here, A there: at most one is right" in why


def test_near_gold_conflict_shows_both_gold_texts(tmp_path: Path) -> None:
    """A near duplicate's letters name options of two different lists: the page gives their texts."""
    door = "What does the woman do after opening the door?"
    why = _step0_on_the_removed_item(tmp_path, door, {
        "alpha": (["she sits down", "she leaves", "she waves", "she laughs"], 1),
        "beta": (["she waves", "she laughs", "she leaves", "she sits down"], 1)})
    assert "gold_conflict (cross) duplicate of alpha_1 in alpha" in why
    assert 'gold B "she laughs" here, B "she leaves" there: at most one is right' in why
