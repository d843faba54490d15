"""Field checks of one item row (pure): types, safe names, plain video ids; and one check of a
whole benchmark's golds (counted from 1 instead of 0).

Each check answers ``None`` when the value is fine and a one-line message naming the field when it
is not, so the loader can report it as that row's problem and go on with the next row.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
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


# A benchmark-level check needs enough items for "no gold is A" to mean something: with golds spread
# evenly over k options, a benchmark counted from 0 shows no A in n items with chance ((k-1)/k)**n,
# which at this many items is about 1 in 300 for four options, 1 in 90 for five, 1 in a million for
# two. Fewer items (a sample, a demo file) would warn on chance alone.
ONE_BASED_MIN_ITEMS = 20


@dataclass(slots=True)
class GoldTally:
    """One benchmark's golds given as an index (a number, not a letter or a text), as read from one
    file: how many, how many are 0, how many are the item's last option, how many one past it (those
    rows were refused: the index is out of range), and the chance that a benchmark counted from 0
    shows no 0 among the loaded ones (the product of (k-1)/k over their option counts k)."""

    items: int = 0
    zeros: int = 0
    last: int = 0
    past_end: int = 0
    no_zero_chance: float = 1.0

    def add(self, answer: int, n_options: int) -> None:
        """A gold index as given (``answer == n_options`` is one past the end: a refused row)."""
        self.items += 1
        if answer == n_options:
            self.past_end += 1
            return
        self.zeros += answer == 0
        self.last += answer == n_options - 1
        self.no_zero_chance *= (n_options - 1) / n_options if n_options else 1.0


def one_based_golds_problem(bench: str, tally: GoldTally) -> str | None:
    """A benchmark whose golds look counted from 1: at least :data:`ONE_BASED_MIN_ITEMS` index golds,
    none of them 0, and some on the last option or one past it. Loaded as they are, every gold
    names the option after the right one. A warning, not an error: a benchmark may never have A as
    its gold, only not by chance at this size."""
    if tally.items < ONE_BASED_MIN_ITEMS or tally.zeros or not (tally.last or tally.past_end):
        return None
    past = f" and {tally.past_end} one past it (refused: out of range)" if tally.past_end else ""
    # past a million the exact odds of a large benchmark are a number of many digits that says no more
    odds = f"1 in {1 / tally.no_zero_chance:,.0f}" if tally.no_zero_chance >= 1e-6 else "under 1 in a million"
    return (f"benchmark {bench!r}: golds look 1-based: none of its {tally.items} gold indexes is 0 (A), "
            f"{tally.last} are the last option{past}; golds counted from 0 and spread evenly would give no A "
            f"among the {tally.items - tally.past_end} loaded by chance {odds}. If the file counts from 1, "
            "subtract 1 from every answer (or write the golds as letters A, B, ...) and load it again")
