"""Item text as real releases write it: padded option lists, blank options, odd whitespace and forms."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from benchcheck.items import load_items


def _jsonl(path: Path, rows: list[dict[str, object]]) -> Path:
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")
    return path


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "benchcheck", *args], capture_output=True, text=True, timeout=120)


def test_blank_options_padding_a_list_are_not_options(tmp_path: Path) -> None:
    p = _jsonl(tmp_path / "Pad.jsonl", [
        {"item_id": "p1", "question": "What falls?", "options": ["a cup", "a ball", "a hat", ""], "answer": 1},
        {"item_id": "p2", "question": "Which one?", "options": ["A. a cup", "B. a ball", "C. "], "answer": "A"},
        {"item_id": "p3", "question": "Which two?", "options": ["A. a cup", "B. a ball", "  "], "answer": "B"},
    ])
    items = {it.item_id: it for it in load_items([p]).items}
    assert items["p1"].options == ("a cup", "a ball", "a hat")
    assert items["p2"].options == ("a cup", "a ball")
    assert items["p3"].options == ("a cup", "a ball") and items["p3"].answer == 1


def test_a_blank_option_before_a_filled_one_is_that_items_error(tmp_path: Path) -> None:
    p = _jsonl(tmp_path / "Gap.jsonl", [
        {"item_id": "g1", "question": "What falls?", "options": ["a cup", "", "a hat"], "answer": 0},
        {"item_id": "g2", "question": "What rises?", "options": ["a cup", "a ball"], "answer": 0},
    ])
    r = _cli("items", "validate", str(p))
    assert r.returncode == 1
    assert f"{p}:1: g1: option B is empty but a later option is not" in r.stderr
    assert [it.item_id for it in load_items([p]).items] == ["g2"]


def test_gold_text_in_another_unicode_form_matches_its_option(tmp_path: Path) -> None:
    import csv

    p = tmp_path / "Web.csv"
    with p.open("w", encoding="utf-8-sig", newline="") as f:  # as a spreadsheet saves it: BOM, CRLF
        w = csv.writer(f, lineterminator="\r\n")
        w.writerow(["qid", "question", "a0", "a1", "a2", "answer"])
        w.writerow(["1", "Where is it?", "left of the caf\u00e9", "right", "behind", "left of the cafe\u0301"])
        w.writerow(["2", "What does he say?", "hello\u00a0there", "bye", "nothing", "hello  there"])
        w.writerow(["3", "Which animal?", "\uff43\uff41\uff54", "dog", "cow", "cat"])
        w.writerow(["4", "Which one?", "caf\u00e9", "cafe\u0301", "tea", "cafe\u0301"])  # exact still wins
        w.writerow(["5", "Which spelling?", "caf\u00e9", "caf\u00e9\u00a0", "tea", "cafe\u0301"])  # two match: refused
    r = _cli("items", "validate", str(p))
    items = {it.item_id: it.answer for it in load_items([p]).items}
    assert items == {"1": 0, "2": 0, "3": 0, "4": 1}, r.stderr
    assert "matches no option" in r.stderr and ":6: 5:" in r.stderr
