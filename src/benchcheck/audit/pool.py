"""The ``confidence`` column of the assembled pool: how firmly each item's fate stands.

For a removed item, the confidence of the removal at the step that removed it; for a kept item,
the lowest confidence among the keep decisions of the steps that screened it (the weakest link:
any of them flipping would remove it). None where no step with letter log-probs decided it.
"""

from __future__ import annotations

from collections.abc import MutableMapping, Sequence
from pathlib import Path
from typing import Any

from benchcheck.audit.confidence import confidences
from benchcheck.audit.source import read_forwards


def add_confidence(records: Sequence[MutableMapping[str, Any]], results: str | Path) -> None:
    """Set ``record["confidence"]`` on every pool record (``item_id``, ``removed_at``), in place."""
    ids = {str(r["item_id"]) for r in records}
    by_item: dict[str, dict[int, float | None]] = {}
    for c in confidences(read_forwards(results, ids)):
        by_item.setdefault(c.item_id, {})[c.step] = c.confidence
    for r in records:
        steps = by_item.get(str(r["item_id"]), {})
        at = r.get("removed_at")
        if at is not None:
            value = steps.get(int(at))
        else:
            known = [v for v in steps.values() if v is not None]
            value = min(known) if known else None
        r["confidence"] = None if value is None else round(value, 4)
