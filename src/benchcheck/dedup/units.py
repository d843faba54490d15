"""From items to what step 0 compares (pure).

* **Priority**: items are ranked by the order in which their benchmark first appears in the pool
  (the order of ``--items``), then by item id in natural order (``b_2`` before ``b_10``). The
  first item of a duplicate set in this order is the one kept: list the benchmark that others
  copy from first, and within a benchmark the earliest item survives.
* **Text unit**: the items with the same ``item_text`` and the same video (or both without one).
  Its first item is its leader; the others are exact duplicates of the leader.
* **Group**: units compared for near duplicates: those of one video (across benchmarks), or the
  units without a video of one benchmark (the leader's), so no pool-wide all-pairs search.
* **Guard words**: words whose change makes a different question even when the wording is
  nearly the same ("after" vs "before", "first" vs "last", "left" vs "right", numbers, "not").
  Sentence embeddings score such pairs as high as paraphrases, so two units are near duplicates
  only when their questions hold the same set of guard words.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from benchcheck.items import Item
from benchcheck.protocol import item_text

_GUARD_TEXT = """
    before after first last second third fourth fifth next previous middle beginning end start
    begin begins ends starts final finally initially earlier later early late
    left right up down above below top bottom front behind inside outside upper lower
    not no never without except none
    more less most least fewer fewest larger smaller largest smallest longer shorter longest
    shortest higher lower highest faster slower fastest slowest bigger biggest
    increase increases decrease decreases same different
    zero two three four five six seven eight nine ten eleven twelve twenty hundred
"""
GUARD_WORDS = frozenset(_GUARD_TEXT.split())
_WORD = re.compile(r"[a-z]+|\d+(?:\.\d+)?")


# Apostrophes other than ASCII's: text copied from the web writes "isn’t" (U+2019) as often as
# "isn't", and a negation missed would let "Which one isn’t red?" pass for "Which one is red?".
_APOSTROPHES = str.maketrans({"\u2019": "'", "\u02bc": "'", "\u2018": "'"})


def _read(text: str) -> str:
    """Text in Unicode's compatibility form (NFKC: full-width "ＡＦＴＥＲ" and "２" are "AFTER" and
    "2") with typographic apostrophes as ASCII ones: how the guard words and the gold check read it."""
    return unicodedata.normalize("NFKC", text).translate(_APOSTROPHES)


def guard_signature(question: str) -> frozenset[str]:
    """The guard words and numbers of a question (``n't`` counts as ``not``), read by ``_read``."""
    words = _WORD.findall(_read(question).lower().replace("n't", " not"))
    return frozenset(w for w in words if w in GUARD_WORDS or w[0].isdigit())


def answer_form(option: str) -> str:
    """An option's text as the gold check of near duplicates compares it: read as the guard words
    are (NFKC, typographic apostrophes as ASCII, case folded) with its whitespace collapsed as in
    ``item_text``. The embedding model does not see case either, so "A cup" and "a cup" are one
    answer; anything else (another word, a number written out) is another answer."""
    return " ".join(_read(option).split()).casefold()


def natural_key(item_id: str) -> tuple[tuple[tuple[int, int, str], ...], str]:
    """Digits compare as numbers: ``q_2`` < ``q_10``; the raw id breaks ties (``007`` vs ``7``)."""
    parts = tuple((1, int(p), "") if p.isdigit() else (0, 0, p) for p in re.split(r"(\d+)", item_id) if p)
    return parts, item_id


def priority_order(items: Sequence[Item]) -> list[Item]:
    """Items in keep-priority order: benchmark rank (first appearance), then natural item id."""
    rank: dict[str, int] = {}
    for it in items:
        rank.setdefault(it.bench, len(rank))
    return sorted(items, key=lambda it: (rank[it.bench], natural_key(it.item_id)))


@dataclass(frozen=True, slots=True)
class TextUnit:
    """Items sharing one text and one video; ``members[0]`` is the leader (highest priority)."""

    text: str
    video_id: str | None
    members: tuple[Item, ...]
    signature: frozenset[str]

    @property
    def leader(self) -> Item:
        return self.members[0]

    @property
    def group(self) -> str:
        """Near-duplicate comparison group: the video, or the leader's benchmark without one."""
        return f"v:{self.video_id}" if self.video_id else f"b:{self.leader.bench}"


def text_units(items: Iterable[Item]) -> list[TextUnit]:
    """Units in priority order of their leaders; members in priority order."""
    ordered = priority_order(list(items))
    by_key: dict[tuple[str | None, str], list[Item]] = {}
    for it in ordered:
        by_key.setdefault((it.video_id, item_text(it.question, list(it.options))), []).append(it)
    return [
        TextUnit(text, video_id, tuple(members), guard_signature(members[0].question))
        for (video_id, text), members in by_key.items()
    ]


def comparison_groups(units: Sequence[TextUnit]) -> list[list[int]]:
    """Indexes into ``units`` per group with at least two units (singletons need no embedding),
    each in priority order."""
    groups: dict[str, list[int]] = {}
    for n, u in enumerate(units):
        groups.setdefault(u.group, []).append(n)
    return [g for g in groups.values() if len(g) > 1]
