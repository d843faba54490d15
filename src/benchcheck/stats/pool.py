"""The ``confidence`` column of the assembled pool: how firmly each item's fate stands.

For a removed item, the confidence of the removal at the step that removed it; for a kept item,
the lowest confidence among the keep decisions of the steps that screened it (the weakest link:
any of them flipping would remove it). None where no step with letter log-probs decided it.
"""

from __future__ import annotations

from collections.abc import Mapping, MutableMapping, Sequence
from pathlib import Path
from typing import Any

from benchcheck.stats.cells import cell
from benchcheck.stats.cluster import rate_interval
from benchcheck.stats.confidence import confidences
from benchcheck.stats.source import read_forwards


def add_confidence(records: Sequence[MutableMapping[str, Any]], results: str | Path) -> None:
    """Set ``record["confidence"]`` on every pool record (``item_id``, ``removed_at``), in place."""
    ids = {str(r["item_id"]) for r in records}
    by_item: dict[str, dict[int, float | None]] = {}
    for c in confidences(read_forwards(results, ids)):
        by_item.setdefault(c.item_id, {})[c.step] = c.confidence
    for r in records:
        at = r.get("removed_at")
        value = fate_confidence(by_item.get(str(r["item_id"]), {}), None if at is None else int(at))
        r["confidence"] = cell(value)


def fate_confidence(by_step: Mapping[int, float | None], removed_at: int | None) -> float | None:
    """An item's confidence from its steps' (module docstring): the removing step's, else the
    lowest of its keep decisions'."""
    if removed_at is not None:
        return by_step.get(removed_at)
    known = [v for v in by_step.values() if v is not None]
    return min(known) if known else None


def removal_interval(removed: Sequence[bool], videos: Sequence[str]) -> dict[str, float | None]:
    """``removal_lo`` / ``removal_hi``: the removal rate's 95 % interval clustered by video
    (``stats.cluster.rate_interval``), for ``pool_summary``; None where nothing was decided."""
    lo, hi = rate_interval(removed, videos) if removed else (None, None)
    return {"removal_lo": cell(lo), "removal_hi": cell(hi)}
