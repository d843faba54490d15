"""Tar extraction that never writes outside its target (docs/PROTOCOL.md, "Returns").

Only regular files and folders are written. A member is refused, by name and with the reason,
when its path is absolute or climbs with ``..``, when it is a link (symbolic or hard), a
device, a FIFO or any other special type, or when a folder on its way is a symlink or a file.
A refused member is skipped and the rest of the shard is still extracted. A member mtime that is
not finite or outside 0..2**32 is not applied (the file keeps its extraction time). Files are created
with ``O_EXCL | O_NOFOLLOW``; whatever already has the name is removed first, so a planted
symlink or hard link in the target is replaced, never written through.
"""

from __future__ import annotations

import math
import os
import stat
import tarfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import IO

_CHUNK = 1 << 20
_FILE_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
_MAX_MTIME = 2**32


def usable_mtime(mtime: float) -> bool:
    """Whether a member's mtime can be set: finite and within 0..2**32 (a pax header may say
    ``1e300``, ``-1e20`` or ``nan``, which ``os.utime`` refuses with OverflowError/ValueError)."""
    return math.isfinite(mtime) and 0 <= mtime <= _MAX_MTIME


@dataclass(frozen=True, slots=True)
class Refusal:
    """A member that was not extracted, and why."""

    member: str
    reason: str

    def __str__(self) -> str:
        return f"refused member {self.member!r}: {self.reason}"


@dataclass(slots=True)
class ExtractResult:
    """What one extraction wrote: files, bytes, the top-level folders (video ids) and refusals."""

    files: int = 0
    bytes: int = 0
    top_level: set[str] = field(default_factory=set)
    refused: list[Refusal] = field(default_factory=list)


def member_parts(member: tarfile.TarInfo) -> tuple[tuple[str, ...] | None, str | None]:
    """The member's path parts (``.`` dropped) or ``None`` with the reason it is refused (pure)."""
    name = member.name
    if "\x00" in name:
        return None, "name contains a NUL byte"
    if name.startswith("/") or (len(name) > 1 and name[1] == ":"):
        return None, "absolute path"
    parts = tuple(p for p in PurePosixPath(name).parts if p != ".")
    if ".." in parts:
        return None, "path climbs out with '..'"
    if any("\\" in p for p in parts):
        return None, "backslash in path"
    if member.issym():
        return None, f"symbolic link (to {member.linkname!r}); links are not extracted"
    if member.islnk():
        return None, f"hard link (to {member.linkname!r}); links are not extracted"
    if member.ischr() or member.isblk():
        return None, "device file"
    if member.isfifo():
        return None, "FIFO"
    if not (member.isreg() or member.isdir()):
        return None, f"unsupported member type {member.type!r}"
    if not parts and not member.isdir():
        return None, "empty name"
    return parts, None


class _Writer:
    """Creates folders and files under one root, checking every folder on the way once."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self._dirs: set[tuple[str, ...]] = {()}

    def ensure_dir(self, parts: tuple[str, ...]) -> str | None:
        """Create the folder ``root/parts``; return a reason when the way is blocked."""
        for i in range(1, len(parts) + 1):
            sub = parts[:i]
            if sub in self._dirs:
                continue
            p = self.root.joinpath(*sub)
            try:
                st = os.lstat(p)
            except FileNotFoundError:
                os.mkdir(p, 0o755)
            else:
                if stat.S_ISLNK(st.st_mode):
                    return f"{'/'.join(sub)} is a symlink in the target"
                if not stat.S_ISDIR(st.st_mode):
                    return f"{'/'.join(sub)} is a file in the target, not a folder"
            self._dirs.add(sub)
        return None

    def write_file(self, parts: tuple[str, ...], src: IO[bytes], mtime: float) -> int:
        p = self.root.joinpath(*parts)
        try:
            fd = os.open(p, _FILE_FLAGS, 0o644)
        except FileExistsError:
            os.unlink(p)  # replaces a planted link (or an earlier copy) instead of writing through it
            fd = os.open(p, _FILE_FLAGS, 0o644)
        n = 0
        try:
            while chunk := src.read(_CHUNK):
                view = memoryview(chunk)
                while view:
                    k = os.write(fd, view)
                    view = view[k:]
                n += len(chunk)
            if usable_mtime(mtime):  # otherwise the file keeps the time it was written
                os.utime(fd, (mtime, mtime))
        finally:
            os.close(fd)
        return n


def would_refuse(tar_path: str | Path) -> list[Refusal]:
    """The members :func:`safe_extract` would refuse by their own header (absolute, ``..``,
    links, devices...), read without extracting anything. Refusals that depend on the target
    (a symlink or file already on the way) can only be known at extraction. Raises
    ``tarfile.TarError`` when the archive cannot be read."""
    refused = []
    with tarfile.open(tar_path, "r:") as tf:
        for m in tf:
            parts, why = member_parts(m)
            if parts is None:
                refused.append(Refusal(m.name, why or "refused"))
    return refused


def safe_extract(tar_path: str | Path, target: str | Path,
                 on_member: Callable[[int], None] | None = None) -> ExtractResult:
    """Extract the regular files and folders of ``tar_path`` under ``target``.

    Raises ``tarfile.TarError`` when the archive itself cannot be read; refused members are
    listed in the result, not raised. ``on_member(bytes)`` is called after each member (progress).
    """
    root = Path(target)
    root.mkdir(parents=True, exist_ok=True)
    writer = _Writer(root)
    result = ExtractResult()
    with tarfile.open(tar_path, "r:") as tf:
        for m in tf:
            parts, why = member_parts(m)
            if parts is None:
                result.refused.append(Refusal(m.name, why or "refused"))
                continue
            blocked = writer.ensure_dir(parts if m.isdir() else parts[:-1])
            if blocked is not None:
                result.refused.append(Refusal(m.name, blocked))
                continue
            if m.isdir():
                if parts:
                    result.top_level.add(parts[0])
                continue
            src = tf.extractfile(m)
            if src is None:
                result.refused.append(Refusal(m.name, "no data"))
                continue
            try:
                n = writer.write_file(parts, src, float(m.mtime))
            except IsADirectoryError:
                result.refused.append(Refusal(m.name, "a folder of that name is in the target"))
                continue
            result.files += 1
            result.bytes += n
            if len(parts) > 1:
                result.top_level.add(parts[0])
            if on_member is not None:
                on_member(m.size)
    return result
