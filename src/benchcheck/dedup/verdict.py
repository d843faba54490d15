"""Per-item verdicts from text units and their group matches (pure)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

from benchcheck.dedup.units import TextUnit
from benchcheck.items import Item

VerdictName = Literal["kept", "exact", "near", "gold_conflict"]
Kind = Literal["within", "cross"]


@dataclass(frozen=True, slots=True)
class ItemVerdict:
    """One item's step-0 verdict; ``duplicate_of`` is always a kept item.

    ``gold_conflict``: an exact duplicate (same text, same video) whose gold differs from the kept
    item's. It is removed as a copy is, but named apart: at most one of the two golds is right.
    """

    item: Item
    text: str
    verdict: VerdictName
    duplicate_of: Item | None = None
    duplicate_text: str | None = None
    similarity: float | None = None

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


def decide(units: Sequence[TextUnit], near: Mapping[int, tuple[int, float]], order: Sequence[Item]
           ) -> list[ItemVerdict]:
    """Verdicts in the order of ``order``.

    ``near`` maps a removed unit's index to (index of the kept unit it duplicates, similarity).
    A kept unit keeps its leader and makes its other members exact duplicates of the leader, or
    gold conflicts where their gold differs from the leader's (the same text lists the same
    options in the same order, so the gold indexes compare; a gold that cannot be read is not
    compared, see :func:`gold_index`); every member of a removed unit is a
    near duplicate of the kept unit's leader.
    """
    by_id: dict[str, ItemVerdict] = {}
    for n, unit in enumerate(units):
        if n in near:
            k, sim = near[n]
            original = units[k]
            for it in unit.members:
                by_id[it.item_id] = ItemVerdict(it, unit.text, "near", original.leader, original.text, sim)
            continue
        by_id[unit.leader.item_id] = ItemVerdict(unit.leader, unit.text, "kept")
        for it in unit.members[1:]:
            golds = gold_index(it), gold_index(unit.leader)
            name: VerdictName = "gold_conflict" if None not in golds and golds[0] != golds[1] else "exact"
            by_id[it.item_id] = ItemVerdict(it, unit.text, name, unit.leader, unit.text, 1.0)
    return [by_id[it.item_id] for it in order]
