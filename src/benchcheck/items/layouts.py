"""Record layouts beyond one object per line (pure): the top level of a ``.json`` file, and options
written into the question as ``A. ...`` lines.

Real releases are not always a list of item objects: TempCompass's ``multi-choice.json`` is keyed
by video and then by dimension, others are keyed by item id, some hold one item object, and an answer key (EgoSchema's
``subset_answers.json``: question id -> gold index) holds no items at all. Each layout read here
becomes plain records (the outer key as the record's ``video``, an inner key as its ``task``); any
other top level is refused in one line that says what the file holds.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

from benchcheck.items.ids import ID_KEYS

# Keys that name an item's question or options: an object holding one of them is one item.
ITEM_KEYS = ("question", "query", "options", "candidates", "choices")
VIDEO_KEYS = ("video", "video_key", "video_path", "video_id")
# A single key wrapping the list of records (``{"data": [...]}``): not a video name.
WRAPPER_KEYS = ("data", "items", "questions", "annotations", "test", "val", "validation", "train")

_LETTERED = re.compile(r"^\s*([A-Z])[.)]\s+\S")

Record = tuple[str, "dict[str, Any] | str"]


def _kind(v: Any, plural: bool = False) -> str:
    if v is None:
        return "nulls" if plural else "null"
    if isinstance(v, bool):
        return "booleans" if plural else "a boolean"
    if isinstance(v, (int, float)):
        return "numbers" if plural else "a number"
    if isinstance(v, str):
        return "texts" if plural else "text"
    if isinstance(v, list):
        return "lists" if plural else "a list"
    return "objects" if plural else "an object"


def _values_kind(values: Iterable[Any]) -> str:
    kinds = {_kind(v, plural=True) for v in values}
    return kinds.pop() if len(kinds) == 1 else "mixed values"


def _is_records(v: Any) -> bool:
    return isinstance(v, list) and bool(v) and all(isinstance(o, dict) for o in v)


def _with(obj: Any, **extra: str) -> dict[str, Any] | str:
    """A record with the keys its place in the file gives it, unless it names them itself."""
    if not isinstance(obj, dict):
        return "record is not a JSON object"
    row = dict(obj)
    if "video" in extra and not any(k in row for k in VIDEO_KEYS):
        row["video"] = extra["video"]
    if "task" in extra and "task" not in row:
        row["task"] = extra["task"]
    if "item_id" in extra and not any(k in row for k in ID_KEYS):
        row["item_id"] = extra["item_id"]
    return row


def json_records(data: Any) -> tuple[list[Record], str | None]:
    """(where, record or error) per record of a parsed ``.json`` file, or a file-level refusal."""
    if isinstance(data, list):
        if not data:
            return [], "empty list: no items"
        return [(f"#{n}", _with(o)) for n, o in enumerate(data, 1)], None
    if not isinstance(data, dict):
        return [], f"top level is {_kind(data)}, not a list of items"
    if not data:
        return [], "top level is an empty object: no items"
    if any(k in data for k in ITEM_KEYS):
        return [("#1", dict(data))], None
    if len(data) == 1 and (key := next(iter(data))) in WRAPPER_KEYS and isinstance(data[key], list):
        return json_records(data[key])
    values = list(data.values())
    if all(isinstance(v, dict) and any(k in v for k in ITEM_KEYS) for v in values):  # {id: item}
        return [(str(key), _with(o, item_id=str(key))) for key, o in data.items()], None
    if all(_is_records(v) for v in values):  # {video: [item, ...]}
        return [(f"{video}#{n}", _with(o, video=video))
                for video, rows in data.items() for n, o in enumerate(rows, 1)], None
    if all(isinstance(v, dict) and v and all(_is_records(r) for r in v.values()) for v in values):
        return [(f"{video}/{task}#{n}", _with(o, video=video, task=task))  # {video: {task: [item, ...]}}
                for video, tasks in data.items() for task, rows in tasks.items()
                for n, o in enumerate(rows, 1)], None
    example = next(iter(data.items()))
    kinds = _values_kind(values).removesuffix("s") if len(data) == 1 else _values_kind(values)
    return [], (f"top level is an object of {len(data)} {kinds} (first: {example[0][:40]!r}: "
                f"{str(example[1])[:40]!r}), not a list of items; read as items: a list of objects, one "
                "item object, items keyed by id, or lists of items keyed by video")


def split_lettered_options(question: str) -> tuple[str, list[str]] | None:
    """``"Q?\\nA. x\\nB. y"`` -> ``("Q?", ["A. x", "B. y"])``: the last lines lettered A, B, C... in
    order (at least two); ``None`` when the question has no such lines."""
    lines = [ln for ln in question.strip().splitlines() if ln.strip()]
    start = next((i for i, ln in enumerate(lines) if (m := _LETTERED.match(ln)) and m.group(1) == "A"), None)
    if start is None or start == 0:
        return None
    tail = lines[start:]
    letters = [m.group(1) if (m := _LETTERED.match(ln)) else None for ln in tail]
    if len(tail) < 2 or letters != [chr(ord("A") + i) for i in range(len(tail))]:
        return None
    return "\n".join(lines[:start]).strip(), [ln.strip() for ln in tail]
