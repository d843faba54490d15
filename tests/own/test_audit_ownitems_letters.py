"""A lab's CSV with options in letter columns (A, B, C, D) and the gold as a letter."""

from __future__ import annotations

from pathlib import Path

from own_helpers import bc

from benchcheck.items.load import load_items


def test_a_gold_letter_is_read_as_a_letter_when_an_option_text_is_that_letter(tmp_path: Path) -> None:
    # "Which letter follows A?" with options B, C, D, E: the gold "B" is option B (C), not the
    # option whose text is "B" (option A). It was read as the text, so the gold was A.
    path = tmp_path / "letters.csv"
    path.write_text("item_id,video,question,A,B,C,D,answer\n"
                    "l1,a.mp4,Which letter follows B?,B,C,D,E,B\n"
                    "l2,a.mp4,Which letter follows A?,B,C,D,E,A\n"
                    "l3,a.mp4,Which one?,x,y,z,w,c\n")
    r = bc("items", "validate", path)
    assert r.exit_code == 0, r.stderr
    assert [i.answer for i in load_items([path]).items] == [1, 0, 2]
    # items stats counts the same gold positions.
    r = bc("items", "stats", path)
    assert "answer position:  A:1 (33%), B:1 (33%), C:1 (33%)" in r.stdout, r.stdout
