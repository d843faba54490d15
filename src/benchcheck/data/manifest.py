"""The shard manifest in the original runs' format (docs/PROTOCOL.md, "Returns"); its files' sha256 is
:func:`benchcheck.filehash.sha256_file`, named here too for the data commands.

The original runs' manifest is ``{"shards": [{"file", "sha256"}], "n_videos"}``; its readers use only
those keys, so the extra fields we write (``kind`` and ``schema_version`` at the top, ``size``
and ``n_videos`` per shard) sit beside them without breaking an origin reader.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any, Literal

from benchcheck.filehash import sha256_file as sha256_file  # data's file hash is the video store's

ShardKind = Literal["frames", "videos"]
KINDS: tuple[ShardKind, ...] = ("frames", "videos")
SCHEMA_VERSION = 1
_HEX64 = re.compile(r"^[0-9a-f]{64}$")


class ManifestError(ValueError):
    """A manifest that cannot be used; the message names the file and what is wrong."""


def manifest_name(kind: ShardKind) -> str:
    """``frames_manifest.json`` or ``videos_manifest.json``."""
    return f"{kind}_manifest.json"


def shard_name(kind: ShardKind, index: int, n_shards: int) -> str:
    """``frames_000.tar``: zero-padded to at least 3 digits so names sort in order."""
    width = max(3, len(str(max(n_shards - 1, 0))))
    return f"{kind}_{index:0{width}d}.tar"


@dataclass(frozen=True, slots=True)
class ShardEntry:
    """One shard: its file name relative to the manifest's folder and its sha256 (lowercase hex)."""

    file: str
    sha256: str
    size: int | None = None
    n_videos: int | None = None


@dataclass(frozen=True, slots=True)
class Manifest:
    """A parsed manifest; ``kind`` is None for an origin manifest that does not state it."""

    shards: tuple[ShardEntry, ...]
    n_videos: int | None
    kind: ShardKind | None = None

    def to_json(self) -> dict[str, Any]:
        shards: list[dict[str, Any]] = []
        for s in self.shards:
            row: dict[str, Any] = {"file": s.file, "sha256": s.sha256}
            if s.size is not None:
                row["size"] = s.size
            if s.n_videos is not None:
                row["n_videos"] = s.n_videos
            shards.append(row)
        out: dict[str, Any] = {"shards": shards, "n_videos": self.n_videos}
        if self.kind is not None:
            out["kind"] = self.kind
            out["schema_version"] = SCHEMA_VERSION
        return out


def safe_relative(name: str) -> bool:
    """True for a relative POSIX path with no ``..``, no empty or absolute parts, no NUL."""
    if not name or "\x00" in name or "\\" in name or name.startswith("/"):
        return False
    parts = PurePosixPath(name).parts
    return bool(parts) and all(p not in ("", ".", "..") for p in parts)


def parse_manifest(data: Any, where: str) -> Manifest:
    """Validate a decoded manifest; raise :class:`ManifestError` naming ``where`` and the problem."""
    if not isinstance(data, dict) or not isinstance(data.get("shards"), list):
        raise ManifestError(f"{where}: not a manifest (needs a 'shards' list)")
    seen: set[str] = set()
    shards = []
    for i, s in enumerate(data["shards"]):
        if not isinstance(s, dict):
            raise ManifestError(f"{where}: shards[{i}] is not an object")
        file, sha = s.get("file"), s.get("sha256")
        if not isinstance(file, str) or not safe_relative(file):
            raise ManifestError(f"{where}: shards[{i}].file {file!r} is not a safe relative path")
        if not isinstance(sha, str) or not _HEX64.match(sha.lower()):
            raise ManifestError(f"{where}: shards[{i}] ({file}) sha256 {sha!r} is not 64 hex digits")
        if file in seen:
            raise ManifestError(f"{where}: shard {file} is listed twice")
        seen.add(file)
        size, nv = s.get("size"), s.get("n_videos")
        shards.append(ShardEntry(file, sha.lower(), size if isinstance(size, int) else None,
                                 nv if isinstance(nv, int) else None))
    n_videos = data.get("n_videos")
    if n_videos is not None and (not isinstance(n_videos, int) or isinstance(n_videos, bool) or n_videos < 0):
        raise ManifestError(f"{where}: n_videos {n_videos!r} is not a non-negative integer")
    kind = data.get("kind")
    return Manifest(tuple(shards), n_videos, kind if kind in KINDS else None)


def load_manifest(path: str | Path) -> Manifest:
    """Read and validate a manifest file."""
    p = Path(path)
    try:
        data = json.loads(p.read_text(encoding="utf-8"))
    except FileNotFoundError as e:
        raise ManifestError(f"{p}: manifest not found") from e
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise ManifestError(f"{p}: not valid JSON ({e})") from e
    return parse_manifest(data, str(p))
