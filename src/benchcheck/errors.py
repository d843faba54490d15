"""An exception as one line of a user-facing error (libraries' messages run to many lines)."""

from __future__ import annotations


def first_line(e: BaseException, limit: int | None = None) -> str:
    """The first line of ``e``'s message, stripped, at most ``limit`` characters; "" when it has none."""
    line = (str(e).strip().splitlines() or [""])[0]
    return line if limit is None else line[:limit]
