"""Priority order, text units, groups and guard words (pure)."""

from __future__ import annotations

from benchcheck.dedup.units import comparison_groups, guard_signature, natural_key, priority_order, text_units
from benchcheck.items import Item


def it(item_id: str, bench: str, q: str = "Q?", video: str | None = None, opts: tuple[str, ...] = ("a", "b")) -> Item:
    return Item(item_id, bench, q, opts, 0, video)


def test_priority_is_bench_first_appearance_then_natural_id() -> None:
    items = [it("z_10", "Z"), it("a_2", "A"), it("z_2", "Z"), it("a_10", "A"), it("z_007", "Z"), it("z_7", "Z")]
    assert [i.item_id for i in priority_order(items)] == ["z_2", "z_007", "z_7", "z_10", "a_2", "a_10"]
    assert natural_key("q_9") < natural_key("q_10") < natural_key("q_x")


def test_units_join_same_text_and_video_only() -> None:
    items = [it("b_1", "B", "What  is\nit?", "v1"), it("a_1", "A", "What is it?", "v1"),
             it("a_2", "A", "What is it?", "v2"), it("a_3", "A", "What is it?"), it("b_2", "B", "What is it?")]
    units = text_units(items)
    assert [[m.item_id for m in u.members] for u in units] == [["b_1", "a_1"], ["b_2", "a_3"], ["a_2"]]
    # Near comparison: a video's units across benchmarks; units without a video per leader benchmark.
    assert [u.group for u in units] == ["v:v1", "b:B", "v:v2"]
    assert comparison_groups(units) == []
    more = text_units([*items, it("a_9", "A", "What else?", "v1")])
    assert [[more[n].leader.item_id for n in g] for g in comparison_groups(more)] == [["b_1", "a_9"]]


def test_guard_words() -> None:
    assert guard_signature("What does she do after opening the door?") == {"after"}
    assert guard_signature("After opening the door, what does she do?") == {"after"}
    assert guard_signature("What happens before the 2 dogs bark?") == {"before", "2"}
    assert guard_signature("Which one isn't red?") == {"not"}
    assert guard_signature("What is the man holding?") == frozenset()


def test_guard_words_read_typographic_apostrophes_and_full_width_text() -> None:
    # Web text writes "isn’t" (U+2019): a negation missed would make "isn’t red" pass for "is red".
    assert guard_signature("Which one isn\u2019t red?") == {"not"}
    assert guard_signature("Which one isn\u02bct red?") == {"not"}
    assert guard_signature("What happens \uff21\uff26\uff34\uff25\uff32 the \uff12 dogs bark?") == {"after", "2"}
    assert guard_signature("What happens after the \uff12 dogs bark?") == guard_signature(
        "What happens after the 2 dogs bark?")
