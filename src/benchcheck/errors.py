"""One line of a user-facing error: an exception's first line (libraries' messages run to many
lines), a name said so that it stays on its line."""

from __future__ import annotations


def first_line(e: BaseException, limit: int | None = None) -> str:
    """The first line of ``e``'s message, stripped, at most ``limit`` characters; "" when it has none."""
    line = (str(e).strip().splitlines() or [""])[0]
    return line if limit is None else line[:limit]


def shown(name: object) -> str:
    """A file name, path or key as a one-line message says it: as it is when every character
    prints, else its ``repr`` (the quoting every ``{name!r}`` of a message uses). A line break in a
    name made one line look like two, and a name that is not UTF-8 holds characters no terminal or
    file can write."""
    text = str(name)
    return text if text.isprintable() else repr(text)
