"""Per-item verdicts from text units and their group matches (pure)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

from benchcheck.dedup.units import TextUnit, answer_form
from benchcheck.items import Item

VerdictName = Literal["kept", "exact", "near", "gold_conflict"]
Kind = Literal["within", "cross"]


@dataclass(frozen=True, slots=True)
class ItemVerdict:
    """One item's step-0 verdict; ``duplicate_of`` is always a kept item.

    ``gold_conflict``: a duplicate whose gold differs from the kept item's: an exact duplicate (same
    text, same video) with another gold index, or a near duplicate (``near_match``) whose gold option
    reads as another text. It is removed as a copy is, but named apart: at most one of the two golds
    is right.
    """

    item: Item
    text: str
    verdict: VerdictName
    duplicate_of: Item | None = None
    duplicate_text: str | None = None
    similarity: float | None = None
    near_match: bool = False  # matched by embedding (a near duplicate), not by the same text

    @property
    def kept(self) -> bool:
        return self.verdict == "kept"

    @property
    def gold_unchecked(self) -> bool:
        """A removed item whose gold, or its kept item's, cannot be read: the two were not compared."""
        if self.duplicate_of is None:
            return False
        return gold_index(self.item) is None or gold_index(self.duplicate_of) is None

    @property
    def match(self) -> Literal["exact", "near"] | None:
        """How the item matched its kept item; None for a kept item."""
        if self.duplicate_of is None:
            return None
        return "near" if self.near_match else "exact"

    @property
    def kind(self) -> Kind | None:
        """``cross`` when the kept item is in another benchmark; None for a kept item."""
        if self.duplicate_of is None:
            return None
        return "within" if self.duplicate_of.bench == self.item.bench else "cross"


def gold_index(item: Item) -> int | None:
    """The gold as an index into the item's options; None when there is none or it is out of range.
    The loader refuses such items, but the Python API takes any ``Item``, and a negative index
    would silently name the last option."""
    a: object = item.answer
    if isinstance(a, bool) or not isinstance(a, int) or not 0 <= a < len(item.options):
        return None
    return a


def gold_text(item: Item) -> str | None:
    """The text of the gold option as given; None when the gold cannot be read."""
    g = gold_index(item)
    return None if g is None else item.options[g]


def _golds_differ(removed: Item, kept: Item, near: bool) -> bool:
    """Whether two duplicates name different golds: the same option index for an exact copy (the
    same options in the same order), the same option text for a near one (its options may be
    reordered or redrawn, so its index says nothing). Unreadable golds are never compared."""
    if near:
        a, b = gold_text(removed), gold_text(kept)
        return a is not None and b is not None and answer_form(a) != answer_form(b)
    i, j = gold_index(removed), gold_index(kept)
    return i is not None and j is not None and i != j


def decide(units: Sequence[TextUnit], near: Mapping[int, tuple[int, float]], order: Sequence[Item]
           ) -> list[ItemVerdict]:
    """Verdicts in the order of ``order``.

    ``near`` maps a removed unit's index to (index of the kept unit it duplicates, similarity).
    A kept unit keeps its leader and makes its other members exact duplicates of the leader, or
    gold conflicts where their gold differs from the leader's (the same text lists the same
    options in the same order, so the gold indexes compare; a gold that cannot be read is not
    compared, see :func:`gold_index`); every member of a removed unit is a near duplicate of the
    kept unit's leader, or a gold conflict where its gold option reads as another text than the
    leader's (:func:`benchcheck.dedup.units.answer_form`).
    """
    by_id: dict[str, ItemVerdict] = {}
    for n, unit in enumerate(units):
        if n in near:
            k, sim = near[n]
            original = units[k]
            for it in unit.members:
                near_name: VerdictName = "gold_conflict" if _golds_differ(it, original.leader, True) else "near"
                by_id[it.item_id] = ItemVerdict(it, unit.text, near_name, original.leader, original.text, sim, True)
            continue
        by_id[unit.leader.item_id] = ItemVerdict(unit.leader, unit.text, "kept")
        for it in unit.members[1:]:
            name: VerdictName = "gold_conflict" if _golds_differ(it, unit.leader, False) else "exact"
            by_id[it.item_id] = ItemVerdict(it, unit.text, name, unit.leader, unit.text, 1.0)
    return [by_id[it.item_id] for it in order]
