"""Gold answers given as option text in another case: one option only, never a guess."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from own_helpers import bc

from benchcheck.items.load import load_items

US, LEFT = ["US", "us", "them"], ["left", "left", "right"]


@pytest.mark.parametrize(("rows", "refusal", "kept"), [
    # Options "US" and "us" (a country, a pronoun): the gold "Us" names neither exactly. It became
    # option A silently; which one was meant cannot be known. Matching one option apart from case is taken.
    ([(US, "Us"), (["US", "we", "them"], "Us"), (US, "us")],
     "gold 'Us' matches no option exactly and options A, B alike", [("q2", 0), ("q3", 1)]),
    # A release with one option written twice: the gold text names both, so which letter is right
    # cannot be known. It became option A silently.
    ([(LEFT, "left"), (LEFT, "B"), (LEFT, "right")], "gold 'left' matches options A, B alike", [("q2", 1), ("q3", 2)]),
])
def test_a_gold_text_two_options_match_is_refused_not_the_first(tmp_path: Path, rows: list[tuple[list[str], str]],
                                                               refusal: str, kept: list[tuple[str, int]]) -> None:
    path = tmp_path / "mine.jsonl"
    path.write_text("".join(json.dumps({"item_id": f"q{k + 1}", "question": "Which?", "options": options,
                                        "answer": gold}) + "\n" for k, (options, gold) in enumerate(rows)))
    r = bc("items", "validate", path)
    assert r.exit_code == 1
    assert f"mine.jsonl:1: q1: {refusal}" in r.stderr, r.stderr
    assert [(i.item_id, i.answer) for i in load_items([path]).items] == kept


def test_a_boolean_gold_says_so_not_that_the_gold_is_missing(tmp_path: Path) -> None:
    path = tmp_path / "mine.jsonl"
    rows = [{"item_id": "q1", "question": "Does it fall?", "options": ["yes", "no"], "answer": True},
            {"item_id": "q2", "question": "Does it fall?", "options": ["yes", "no"], "answer": None}]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    r = bc("items", "validate", path)
    assert r.exit_code == 1
    assert "mine.jsonl:1: q1: gold is a boolean (true), not an index, letter or option text" in r.stderr, r.stderr
    assert "mine.jsonl:2: q2: no gold answer" in r.stderr, r.stderr
