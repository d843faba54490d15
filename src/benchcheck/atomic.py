"""The one way a file (or a folder) that is written whole reaches disk: temporary file, fsync, rename.

A reader (another process, a rerun after a kill) sees either the old file or the new one,
never a half-written one; the temporary file lives in the target's folder so the rename is
atomic on the same filesystem, and the folder is fsynced so the rename survives a crash.
"""

from __future__ import annotations

import errno
import hashlib
import json
import os
import re
import shutil
import socket
import uuid
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any, BinaryIO

# Rounds of ``swap_folder`` against other writers publishing the same folder at once.
SWAP_TRIES = 8


def _umask() -> int:
    """The process's umask, read without setting it where Linux shows it (``os.umask`` sets it, and
    a file another thread creates meanwhile would get the wrong mode)."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("Umask:"):
                return int(line.split()[1], 8)
    except (OSError, ValueError, IndexError):
        pass
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


# A file written whole gets the mode ``open()`` would give it: ``mkstemp`` makes it 0600, so a
# results folder shared with a group held rows it could read and a run_spec.json it could not.
FILE_MODE = 0o666 & ~_umask()


def write_atomic(path: str | Path, write: Callable[[BinaryIO], object]) -> None:
    """Call ``write`` on a temporary file beside ``path``, fsync it, rename it over ``path``.

    The temporary file is ``.NAME.{file_tag()}.tmp``: a kill -9 inside ``write`` leaves it behind
    (nothing runs to remove it), and with the writer's host and PID in its name the next write of
    the same file removes it once that writer is dead (``clear_dead_files``), while a live writer's
    file, however long it takes, is left alone. One folder listing per write: a kill leaves at most
    one file per target, and a rerun writes the same targets again."""
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    prefix = f".{target.name}."
    clear_dead_files(target.parent, prefix)
    tmp = target.parent / f"{prefix}{file_tag()}.tmp"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0), 0o600)
    try:
        with os.fdopen(fd, "wb") as f:
            os.fchmod(f.fileno(), FILE_MODE)
            write(f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, target)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    _fsync_dir(target.parent)


def _fsync_dir(folder: Path) -> None:
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:
        return  # some filesystems do not open folders; the rename itself already happened
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def replace_atomic(tmp: str | Path, path: str | Path) -> None:
    """Publish a file another library wrote at ``tmp`` (beside ``path``; e.g. a DuckDB database):
    fsync it, rename it over ``path``, fsync the folder. The same guarantee as ``write_atomic``."""
    fd = os.open(tmp, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(tmp, path)
    _fsync_dir(Path(path).parent)


def write_bytes_atomic(path: str | Path, data: bytes) -> None:
    write_atomic(path, lambda f: f.write(data))


def write_text_atomic(path: str | Path, text: str) -> None:
    write_bytes_atomic(path, text.encode("utf-8"))


def json_utf8(data: Any, **kwargs: Any) -> bytes:
    """``json.dumps`` as UTF-8 bytes, non-ASCII kept. A string holding a lone surrogate (a file
    name that is not UTF-8, as Python decodes it) has no UTF-8 form: that text is written with
    ASCII escapes instead, which every JSON reader turns back into the same string."""
    try:
        return json.dumps(data, ensure_ascii=False, **kwargs).encode("utf-8")
    except UnicodeEncodeError:
        return json.dumps(data, ensure_ascii=True, **kwargs).encode("ascii")


# Line breaks to ``str.splitlines`` (and so to many JSON-lines readers) that JSON leaves raw in a
# string: escaped, each line is still one record to a reader that splits at every line break.
_SPLITLINES_BREAKS = ((b"\xe2\x80\xa8", b"\\u2028"), (b"\xe2\x80\xa9", b"\\u2029"), (b"\xc2\x85", b"\\u0085"))


def jsonl_bytes(rows: Iterable[Any], **kwargs: Any) -> bytes:
    """JSON lines as UTF-8 bytes (``json_utf8`` each row, a newline after each), with U+2028,
    U+2029 and U+0085 escaped (the same strings to every JSON reader)."""
    data = b"".join(json_utf8(r, **kwargs) + b"\n" for r in rows)
    for raw, escaped in _SPLITLINES_BREAKS:
        if raw in data:
            data = data.replace(raw, escaped)
    return data


def write_json_atomic(path: str | Path, data: Any, *, indent: int | None = None) -> None:
    """JSON (UTF-8, non-ASCII kept, trailing newline), written atomically."""
    write_bytes_atomic(path, json_utf8(data, indent=indent, sort_keys=False) + b"\n")


def writer_tag() -> str:
    """``PID-RANDOM``, the last part of a writer's temporary folder names: a folder whose writer
    is dead is found by its PID (``clear_dead``), and two writers never share a name."""
    return f"{os.getpid()}-{uuid.uuid4().hex[:8]}"


# This machine, in a temporary file's name: a PID says whether a writer is alive only on the host
# that ran it, and array tasks on several hosts write the same files of a shared results folder.
_HOST = hashlib.sha256(socket.gethostname().encode()).hexdigest()[:8]


def file_tag() -> str:
    """``HOST.PID-RANDOM``, the last part of a writer's temporary file names (``clear_dead_files``)."""
    return f"{_HOST}.{writer_tag()}"


_TAG = re.compile(r"([0-9a-f]{8})\.(\d+)-[0-9a-f]{8}")


def tag_is_dead(tag: str) -> bool:
    """Whether ``tag`` is a ``file_tag()`` of this host whose process is gone (False for anything
    else: another host's writer, a live one, a name that is no tag)."""
    m = _TAG.fullmatch(tag)
    return m is not None and _writer_dead(m.group(1), m.group(2))


def _writer_dead(host: str | None, pid: str) -> bool:
    """The one rule for a tagged writer: gone when it ran on this host (``host`` None: a tag from
    before hosts were named, taken as this host's) and its process is not alive."""
    return host in (None, _HOST) and not _alive(int(pid))


def swap_folder(staging: Path, final: Path, old: Path) -> None:
    """Put the finished folder ``staging`` at ``final`` by renames: a reader, or a kill, finds the
    old folder or the new one whole (between the two renames the old one is at ``old``, a name of
    the writer's own). Another writer that published between them (two on one folder) is moved
    aside in turn, so the last one to publish wins whole and neither fails."""
    for _ in range(SWAP_TRIES):
        moved = True
        try:
            os.replace(final, old)
        except FileNotFoundError:
            moved = False
        try:
            os.replace(staging, final)
        except OSError as e:
            raced = e.errno in (errno.ENOTEMPTY, errno.EEXIST)
            if moved and not raced:
                os.replace(old, final)  # the old folder back where it was: nothing lost
            elif moved:
                shutil.rmtree(old, ignore_errors=True)  # superseded by the other writer's
            if not raced:
                raise
            continue  # another writer's folder took ``final`` meanwhile: move it aside too
        if moved:
            shutil.rmtree(old, ignore_errors=True)
        _fsync_dir(final.parent)
        return
    raise OSError(errno.EBUSY, "other writers keep replacing it", str(final))


def clear_dead(parent: Path, prefixes: tuple[str, ...]) -> int:
    """Remove the folders in ``parent`` named ``PREFIX...-{writer_tag()}`` whose writer process is
    gone (a kill between a writer's renames leaves them); returns how many."""
    removed = 0
    if not parent.is_dir():
        return 0
    for p in parent.iterdir():
        if not p.name.startswith(prefixes) or not p.is_dir():
            continue
        pid = p.name.rsplit("-", 2)[-2] if p.name.count("-") >= 2 else ""
        if pid.isdigit() and _alive(int(pid)):
            continue
        shutil.rmtree(p, ignore_errors=True)
        removed += 1
    return removed


_FILE_TAG = re.compile(r"(?:\.([0-9a-f]{8}))?\.(\d+)-[0-9a-f]{8}\.tmp(?:\.[A-Za-z]+)?$")


def clear_dead_files(parent: Path, prefix: str) -> int:
    """Remove the files in ``parent`` named ``PREFIX...{file_tag()}.tmp`` (or ``{writer_tag()}``;
    or with a suffix after it, such as a database's ``.tmp.wal``) whose writer process is gone: a
    kill before their rename leaves them, and nothing else ever would. A live writer's files are
    left alone, and so are those another host's writer named (its PID is not this host's to
    test); returns how many."""
    removed = 0
    if not parent.is_dir():
        return 0
    for p in parent.iterdir():
        m = _FILE_TAG.search(p.name)
        if not p.name.startswith(prefix) or m is None or not _writer_dead(m.group(1), m.group(2)) or not p.is_file():
            continue
        p.unlink(missing_ok=True)
        removed += 1
    return removed


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
