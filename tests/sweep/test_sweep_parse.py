"""Answer parsing: a corpus of real-looking replies, each with the parse it must give."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from benchcheck.sweep.parse import parse_answer

CORPUS = [json.loads(line) for line in (Path(__file__).parent / "data" / "replies.jsonl").read_text().splitlines()]


@pytest.mark.parametrize("case", CORPUS, ids=[repr(c["reply"])[:40] for c in CORPUS])
def test_corpus(case: dict[str, object]) -> None:
    p = parse_answer(str(case["reply"]), case["options"])  # type: ignore[arg-type]
    assert p.rule == case["rule"]
    if case["letter"] is None:
        assert p.status == "unparsed" and p.index is None and p.letter == ""
    else:
        assert p.status == "ok" and p.letter == case["letter"]


def test_never_guesses_whatever_the_seed() -> None:
    # The same unreadable reply parses the same way every time: no random fallback.
    assert {parse_answer("hmm, hard to say", ["x", "y"]).status for _ in range(20)} == {"unparsed"}


def test_option_inside_another_option_does_not_count() -> None:
    p = parse_answer("It is dark red.", ["red", "dark red", "blue"])
    assert p.status == "ok" and p.letter == "B"
