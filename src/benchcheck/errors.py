"""One line of a user-facing error: an exception's first line (libraries' messages run to many
lines), a name said so that it stays on its line."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path


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


@contextmanager
def naming(path: str | Path) -> Iterator[None]:
    """An ``OSError`` raised inside that names no file gets ``path``: the system names no file for a
    full disk, a file too large or a read error, and a one-line message must say which file it was.
    An error naming a file already (an inner ``naming``, an ``open``) goes on as it is."""
    try:
        yield
    except OSError as e:
        if e.filename is not None:
            raise
        raise OSError(e.errno, e.strerror or first_line(e) or type(e).__name__, str(path)) from e


def os_error_line(e: OSError) -> str:
    """``PATH: what is wrong (ErrorKind)``, the file (and the second one of a rename) said first;
    the message alone when the error names none."""
    names = " -> ".join(shown(f) for f in (e.filename, e.filename2) if f is not None)
    what = f"{e.strerror or first_line(e) or 'failed'} ({type(e).__name__})"
    return f"{names}: {what}" if names else what
