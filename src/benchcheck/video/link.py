"""Linked item files: items written back with their resolved ``video_id``, so that later commands
read the video straight from the item and need no ``--videos`` or index lookup.

One JSONL file per benchmark, ``<out>/<bench>.jsonl``, each line the fields the loader reads
(``item_id``, ``bench``, ``question``, ``options``, ``answer`` as an index, ``video_id``, ``video``,
``task``, ``duration_s``, ``meta``). What the item named stays in ``video`` and ``meta.video_key``
(exports name the original file); an item whose video was not found keeps only ``video``, so a
later run with ``--videos`` can still resolve it. Whole-file writes: a kill leaves the old file
or the new one.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from benchcheck.atomic import jsonl_bytes, write_bytes_atomic
from benchcheck.items.record import Item
from benchcheck.video.resolve import named_video


def linked_row(item: Item) -> dict[str, Any]:
    """The item as a line the loader reads back to an equal item (its video resolved or not)."""
    named = item.meta.get("video_key") if isinstance(item.meta.get("video_key"), str) else named_video(item)
    row: dict[str, Any] = {"item_id": item.item_id, "bench": item.bench, "question": item.question,
                           "options": list(item.options), "answer": item.answer}
    if item.has_frames_source:
        row["video_id"] = item.video_id
    if named:
        row["video"] = named
    if item.task is not None:
        row["task"] = item.task
    if item.duration_s is not None:
        row["duration_s"] = item.duration_s
    meta = {k: v for k, v in item.meta.items() if k != "video_key" or item.has_frames_source}
    if meta:
        row["meta"] = meta
    return row


def write_linked(items: Sequence[Item], out: Path) -> list[Path]:
    """``<out>/<bench>.jsonl`` per benchmark (module doc); returns the files written."""
    by: dict[str, list[Item]] = defaultdict(list)
    for it in items:
        by[it.bench].append(it)
    out.mkdir(parents=True, exist_ok=True)
    files = []
    for bench in sorted(by):
        path = out / f"{bench}.jsonl"
        # jsonl_bytes: a video named by a file name that is not UTF-8 is written as JSON escapes
        write_bytes_atomic(path, jsonl_bytes(linked_row(i) for i in by[bench]))
        files.append(path)
    return files
