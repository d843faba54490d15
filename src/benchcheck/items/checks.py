"""Field checks of one item row (pure): types, safe names, plain video ids.

Each check answers ``None`` when the value is fine and a one-line message naming the field when it
is not, so the loader can report it as that row's problem and go on with the next row.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

# The longest name a results file may get is NAME_MAX (255 bytes on Linux, macOS and the usual
# cluster file systems). A benchmark name becomes ``{bench}.p{part}.jsonl`` (and a lock or lease
# file beside it, ``.lock``); LONGEST_SUFFIX is the longest of those, with a 9-digit part number,
# so a name that passes here never meets ENAMETOOLONG later.
NAME_MAX_BYTES = 255
LONGEST_SUFFIX = ".p123456789.jsonl.lock"
MAX_BENCH_BYTES = NAME_MAX_BYTES - len(LONGEST_SUFFIX.encode())

_PART_SUFFIX = re.compile(r"\.p\d+$")


def _kind(v: Any) -> str:
    if v is None:
        return "null"
    if isinstance(v, bool):
        return "a boolean"
    if isinstance(v, (list, tuple)):
        return "a list"
    if isinstance(v, dict):
        return "an object"
    if isinstance(v, str):
        return "text"
    return f"a {type(v).__name__}"


def is_text_like(v: Any) -> bool:
    """Text, or a number written as text (CSV cells, numeric options): never a list, object or bool."""
    return isinstance(v, str) or (isinstance(v, (int, float)) and not isinstance(v, bool))


def field_type_problem(name: str, v: Any) -> str | None:
    """A scalar field (id, question, video, task) that is a list, object or boolean."""
    if v is None or is_text_like(v):
        return None
    return f"field {name!r} is {_kind(v)}, not text"


def options_problem(opts: Any, cols: Sequence[str]) -> str | None:
    """Options must be a list of texts; a list, object or null inside it is an error, not ``str(x)``."""
    if isinstance(opts, str):  # "a, b, c": which separator is meant cannot be known, so never split
        return f"options is text ({opts[:60]!r}), not a list (write [\"a\", \"b\", \"c\"])"
    if not isinstance(opts, (list, tuple)):
        return f"options is {_kind(opts)}, not a list"
    for i, o in enumerate(opts):
        if not is_text_like(o):
            where = f" (column {cols[i]!r})" if len(cols) > 1 and i < len(cols) else ""
            return f"option {i}{where} is {_kind(o)}, not text"
    return None


def filled_options(texts: Sequence[str]) -> tuple[list[str], str | None]:
    """Options without the blank ones a list is padded with at its end (``["a", "b", ""]``: a release
    that pads every item to one length), and a problem when a blank option stands before a filled one:
    a model would be shown ``"B. "`` as a choice, and the chance rate would count it."""
    kept = list(texts)
    while kept and not kept[-1].strip():
        kept.pop()
    blank = next((i for i, t in enumerate(kept) if not t.strip()), None)
    if blank is None:
        return kept, None
    letter = chr(65 + blank) if blank < 26 else str(blank)
    return kept, f"option {letter} is empty but a later option is not"


def bench_name_problem(name: str) -> str | None:
    """A benchmark name becomes a results file name: it must not leave the results folder, must
    not end like a part file (``X.p1.jsonl`` is part 1 of ``X``), and must fit in a file name with
    the longest suffix a run gives it."""
    if not name or name.startswith(".") or any(c in name for c in "/\\\x00") or _PART_SUFFIX.search(name):
        return (f"benchmark name {name!r} is not a safe file name (results go to <bench>.jsonl; "
                "no '/', no leading '.', no '.p<digits>' ending)")
    size = len(name.encode("utf-8", "surrogateescape"))
    if size > MAX_BENCH_BYTES:
        return (f"benchmark name {name[:40]!r}... is {size} bytes: too long for a file name "
                f"(at most {MAX_BENCH_BYTES}, so that <bench>{LONGEST_SUFFIX} fits in {NAME_MAX_BYTES})")
    return None


def video_id_problem(video_id: str) -> str | None:
    """A video id names a folder under the store and the frame cache: one plain path component."""
    if (video_id in (".", "..") or video_id.startswith(".") or any(c in video_id for c in "/\\\x00")
            or len(video_id.encode("utf-8", "surrogateescape")) > NAME_MAX_BYTES):
        return (f"video_id {video_id[:60]!r} is not a plain name (it names a folder under the store and "
                "the frame cache: no '/', no '\\', no leading '.')")
    return None


def not_utf8_fields(row: dict[str, Any]) -> list[str]:
    """Columns of a CSV row read with ``surrogateescape`` whose cell held bytes that are not UTF-8."""
    return [str(k) for k, v in row.items() if isinstance(v, str) and re.search("[\udc80-\udcff]", v)]
