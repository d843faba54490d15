"""The video index: source keys to content hashes, in the original runs' manifest format.

JSONL, one row per event, append-only: ``{"key", "status", "content_hash", ...}``; the last
``status="done"`` row of a key wins and other statuses are ignored, so the original runs'
``logs/manifest.jsonl`` reads as is. Keys are ``"repo::zip_path::member"``; a local file gets
``"local::<folder name>::<path below it>"`` (see :func:`local_key`).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any

from benchcheck.store import append_rows, read_rows

INDEX_FILE = "index.jsonl"
FAILURES_FILE = "failures.jsonl"


def local_key(root_name: str, relative: str | PurePosixPath) -> str:
    """The key of a local file: ``local::<name of the folder given>::<posix path below it>``."""
    return f"local::{root_name}::{PurePosixPath(relative).as_posix()}"


def done_rows(path: str | Path) -> dict[str, dict[str, Any]]:
    """key -> the last ``status="done"`` row with a content hash (rows without ``::`` ignored)."""
    out: dict[str, dict[str, Any]] = {}
    p = Path(path)
    if not p.is_file():
        return out
    for row in read_rows(p):
        key = row.get("key")
        if row.get("status") == "done" and row.get("content_hash") and isinstance(key, str) and "::" in key:
            out[key] = row
    return out


def read_index(path: str | Path) -> dict[str, str]:
    """key -> content_hash (the item's ``video_id``); the last ``status="done"`` row wins."""
    return {k: str(r["content_hash"]) for k, r in done_rows(path).items()}


def append_index(path: str | Path, rows: Iterable[dict[str, Any]]) -> int:
    """Append rows under a lock (``benchcheck.store.append_rows``); returns how many."""
    return append_rows(path, list(rows))


RESOLVED = "stored"  # the status of a failures.jsonl row saying a failed source is stored now


def last_failures(path: str | Path) -> dict[str, dict[str, Any]]:
    """key -> the last row of ``failures.jsonl`` for that key, for keys still failed (a later
    ``status="stored"`` row, written when a rerun stores the source, clears the key)."""
    out: dict[str, dict[str, Any]] = {}
    p = Path(path)
    if p.is_file():
        for row in read_rows(p):
            if isinstance(row.get("key"), str):
                if row.get("status") == RESOLVED:
                    out.pop(row["key"], None)
                else:
                    out[row["key"]] = row
    return out


def _is_local(key: str) -> bool:
    return key.startswith("local::") and key.count("::") >= 2


@dataclass(slots=True)
class StoreIndex:
    """The done rows of a store's index, with the lookups the video resolver needs: by key, by the
    path below a local folder (``local::*::<rel>``), and by the source file's absolute path."""

    rows: dict[str, dict[str, Any]] = field(default_factory=dict)
    _by_rel: dict[str, list[str]] = field(default_factory=dict)
    _by_abs: dict[str, list[str]] = field(default_factory=dict)
    failed: dict[str, dict[str, Any]] = field(default_factory=dict)

    @classmethod
    def load(cls, store: str | Path) -> StoreIndex:
        out = cls(done_rows(Path(store) / INDEX_FILE), failed=last_failures(Path(store) / FAILURES_FILE))
        for key, row in out.rows.items():
            if _is_local(key):
                out._by_rel.setdefault(key.split("::", 2)[2], []).append(key)
            # Rows written since the resolver record the resolved path; older ones the path as given.
            for src in (row.get("source_path"), row.get("source")):
                if isinstance(src, str) and Path(src).is_absolute():
                    out._by_abs.setdefault(src, []).append(key)
        return out

    def by_key(self, key: str) -> str | None:
        row = self.rows.get(key)
        return str(row["content_hash"]) if row else None

    def by_relative(self, rel: str) -> list[str]:
        """The distinct content hashes of local keys whose path below their folder is ``rel``."""
        return list(dict.fromkeys(str(self.rows[k]["content_hash"]) for k in self._by_rel.get(rel, ())))

    def by_file(self, path: Path, size: int, mtime_ns: int) -> str | None:
        """The content hash recorded for this very file (same absolute path, size and mtime)."""
        for key in self._by_abs.get(str(path), ()):
            row = self.rows[key]
            if (row.get("source_size"), row.get("source_mtime_ns")) == (size, mtime_ns):
                return str(row["content_hash"])
        return None

    def failure(self, key: str, size: int, mtime_ns: int) -> str | None:
        """Why the store's normalization failed this very file (its key, same size and mtime)."""
        row = self.failed.get(key)
        if row is None or (row.get("source_size"), row.get("source_mtime_ns")) != (size, mtime_ns):
            return None
        return str(row.get("reason") or "no reason recorded")

    def failures_below(self, rel: str) -> list[str]:
        """Why the store failed the local sources whose path below their folder is ``rel``, for
        those still the file that failed (same size and mtime at the path it was read from)."""
        out = []
        for key, row in self.failed.items():
            if not _is_local(key) or key.split("::", 2)[2] != rel or not isinstance(row.get("source"), str):
                continue
            try:
                st = Path(row["source"]).stat()
            except OSError:
                continue
            if (row.get("source_size"), row.get("source_mtime_ns")) == (st.st_size, st.st_mtime_ns):
                out.append(str(row.get("reason") or "no reason recorded"))
        return list(dict.fromkeys(out))

    def row_matches(self, key: str, size: int, mtime_ns: int) -> bool:
        row = self.rows.get(key)
        return row is not None and (row.get("source_size"), row.get("source_mtime_ns")) == (size, mtime_ns)
