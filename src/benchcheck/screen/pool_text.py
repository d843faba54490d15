"""An item's own text beside its decisions in ``pool_items`` (pure): question, options, gold answer,
and where the item was read from, so one DuckDB query shows why an item left without joining the
item files by hand.
"""

from __future__ import annotations

from typing import Any

from benchcheck.items import Item
from benchcheck.protocol import LETTERS


def item_text_columns(item: Item) -> dict[str, Any]:
    """The columns ``pool_items`` takes from the item itself."""
    letter = LETTERS[item.answer] if item.answer < len(LETTERS) else None  # open format: no letter
    return {"question": item.question, "options": list(item.options), "answer": item.answer,
            "answer_letter": letter, "answer_text": item.options[item.answer], "task": item.task,
            "item_file": item.source_file, "item_line": item.source_line}


def with_item_text(record: dict[str, Any], item: Item) -> dict[str, Any]:
    """``record`` (an item's fates) with its text columns after the id and benchmark."""
    head: dict[str, Any] = {k: record[k] for k in ("item_id", "bench") if k in record}
    return {**head, **item_text_columns(item), **{k: v for k, v in record.items() if k not in head}}
