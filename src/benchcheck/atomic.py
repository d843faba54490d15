"""The one way a file that is written whole reaches disk: temporary file, fsync, rename.

A reader (another process, a rerun after a kill) sees either the old file or the new one,
never a half-written one; the temporary file lives in the target's folder so the rename is
atomic on the same filesystem, and the folder is fsynced so the rename survives a crash.
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any, BinaryIO


def write_atomic(path: str | Path, write: Callable[[BinaryIO], object]) -> None:
    """Call ``write`` on a temporary file beside ``path``, fsync it, rename it over ``path``."""
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
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


def write_json_atomic(path: str | Path, data: Any, *, indent: int | None = None) -> None:
    """JSON (UTF-8, non-ASCII kept, trailing newline), written atomically."""
    text = json.dumps(data, ensure_ascii=False, indent=indent, sort_keys=False) + "\n"
    write_text_atomic(path, text)
