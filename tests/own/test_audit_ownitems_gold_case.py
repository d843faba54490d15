"""Gold answers given as option text in another case: one option only, never a guess."""

from __future__ import annotations

import json
from pathlib import Path

from own_helpers import bc

from benchcheck.items.load import load_items


def test_a_gold_matching_two_options_ignoring_case_is_refused_not_the_first(tmp_path: Path) -> None:
    # Options "US" and "us" (a country, a pronoun): the gold "Us" names neither exactly. It became
    # option A silently; which one was meant cannot be known.
    path = tmp_path / "mine.jsonl"
    rows = [{"item_id": "q1", "question": "Which word?", "options": ["US", "us", "them"], "answer": "Us"},
            {"item_id": "q2", "question": "Which word?", "options": ["US", "we", "them"], "answer": "Us"},
            {"item_id": "q3", "question": "Which word?", "options": ["US", "us", "them"], "answer": "us"}]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    r = bc("items", "validate", path)
    assert r.exit_code == 1
    assert "mine.jsonl:1: q1: gold 'Us' matches no option exactly and options A, B alike" in r.stderr, r.stderr
    assert [(i.item_id, i.answer) for i in load_items([path]).items] == [("q2", 0), ("q3", 1)]


def test_a_gold_text_written_as_two_options_is_refused_not_the_first(tmp_path: Path) -> None:
    # A release with one option written twice: the gold text names both, so which letter is right
    # cannot be known. It became option A silently.
    path = tmp_path / "mine.jsonl"
    rows = [{"item_id": "q1", "question": "Which way?", "options": ["left", "left", "right"], "answer": "left"},
            {"item_id": "q2", "question": "Which way?", "options": ["left", "left", "right"], "answer": "B"},
            {"item_id": "q3", "question": "Which way?", "options": ["left", "left", "right"], "answer": "right"}]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    r = bc("items", "validate", path)
    assert r.exit_code == 1
    assert "mine.jsonl:1: q1: gold 'left' matches options A, B alike" in r.stderr, r.stderr
    assert [(i.item_id, i.answer) for i in load_items([path]).items] == [("q2", 1), ("q3", 2)]


def test_a_boolean_gold_says_so_not_that_the_gold_is_missing(tmp_path: Path) -> None:
    path = tmp_path / "mine.jsonl"
    rows = [{"item_id": "q1", "question": "Does it fall?", "options": ["yes", "no"], "answer": True},
            {"item_id": "q2", "question": "Does it fall?", "options": ["yes", "no"], "answer": None}]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    r = bc("items", "validate", path)
    assert r.exit_code == 1
    assert "mine.jsonl:1: q1: gold is a boolean (true), not an index, letter or option text" in r.stderr, r.stderr
    assert "mine.jsonl:2: q2: no gold answer" in r.stderr, r.stderr
