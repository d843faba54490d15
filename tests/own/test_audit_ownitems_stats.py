"""``items stats`` on a lab's file where some items are bad."""

from __future__ import annotations

import json
from pathlib import Path

from own_helpers import bc, item


def test_stats_says_when_bad_items_are_left_out_of_its_counts(tmp_path: Path) -> None:
    # Two of four items have a gold out of range: stats printed "2 items" and a histogram of the
    # other two, exit 0, without a word that half the file was not counted.
    path = tmp_path / "mine.jsonl"
    rows = [item(0, "a.mp4"), item(1, "a.mp4"), {**item(2, "a.mp4"), "answer": 3}, {**item(3, "a.mp4"), "answer": 7}]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    r = bc("items", "stats", path)
    assert r.exit_code == 0, r.stderr
    assert "mine: 2 items" in r.stdout
    assert "warning: 2 bad items are left out of the counts" in r.stderr, r.stderr
    assert "mine.jsonl:3: q2: gold index 3 out of range for 3 options" in r.stderr


def test_a_record_with_two_problems_is_one_bad_item_left_out(tmp_path: Path) -> None:
    # an empty question and a single option: two problem lines, one item, as items validate counts it
    path = tmp_path / "mine.jsonl"
    rows = [item(0, "a.mp4"), {**item(1, "a.mp4"), "question": "", "options": ["only"], "answer": 0}]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    r = bc("items", "stats", path)
    assert r.exit_code == 0, r.stderr
    assert "warning: 1 bad items are left out of the counts (first: " in r.stderr, r.stderr
