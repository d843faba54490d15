"""A content-addressed embedding cache: a text's row is found by a hash of (model, text).

Layout under ``<cache>/<model tag>/``: 16 buckets (the key's top 4 bits), each a set of parts;
a part is ``keys-<id>.npy`` (sorted uint64 keys) and ``emb-<id>.npy`` (float16 rows in the
same order), ``<id>`` its writer's ``atomic.file_tag()``. The same text asked by any item of any
benchmark is encoded once. A part's rows are written before its keys, each by a temporary file
and a rename, and a part counts only once its keys file exists: a run killed at any moment
leaves whole parts, and a rerun encodes only what no whole part holds (and removes the rows of a
dead writer's part that has no keys). Lookups read the keys and memory-map the rows, so a lookup
costs 8 bytes per cached text plus the rows asked for. A bucket with more than
``MAX_PARTS`` parts is merged into one on the next write.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from numpy.typing import NDArray

from benchcheck.atomic import clear_dead_files, file_tag, tag_is_dead, write_atomic
from benchcheck.dedup.model import cache_tag

BUCKETS = 16
MAX_PARTS = 8
FLUSH_ROWS = 65536  # new rows held in memory before they are written (what a killed run can lose)
Encode = Callable[[Sequence[str]], NDArray[np.float32]]


def text_key(fingerprint: str, text: str) -> int:
    """The address of one text under one model: the first 8 bytes of SHA-256(fingerprint, text)."""
    return int.from_bytes(hashlib.sha256(f"{fingerprint}\0{text}".encode()).digest()[:8], "big")


def _bucket(keys: NDArray[np.uint64]) -> NDArray[np.int64]:
    return (keys >> np.uint64(60)).astype(np.int64)


def _save(path: Path, arr: NDArray[np.generic]) -> None:
    write_atomic(path, lambda f: np.save(f, arr, allow_pickle=False))


def _clear_orphan_rows(d: Path) -> None:
    """Remove the rows files whose keys never came because their writer was killed between the two
    (a part's id is its writer's ``file_tag()``): no lookup reads them, and each kill left one more.
    A live writer's are its part in progress, left alone."""
    for ef in d.glob("emb-*.npy"):
        part = ef.name[len("emb-"):-len(".npy")]
        if not (d / f"keys-{part}.npy").exists() and tag_is_dead(part):
            ef.unlink(missing_ok=True)


@dataclass(slots=True)
class _Part:
    keys: NDArray[np.uint64]
    rows: NDArray[np.float16]  # memory-mapped


class EmbeddingCache:
    """Rows of one model, addressed by :func:`text_key`."""

    def __init__(self, root: str | Path, name: str, fingerprint: str, dim: int | None = None) -> None:
        self.folder = Path(root) / cache_tag(name, fingerprint)
        self.fingerprint = fingerprint
        self.dim = dim
        self._parts: dict[int, list[_Part]] = {}

    def _bucket_dir(self, b: int) -> Path:
        return self.folder / f"b{b:x}"

    def _load(self, b: int) -> list[_Part]:
        if b not in self._parts:
            parts = []
            d = self._bucket_dir(b)
            for kf in sorted(d.glob("keys-*.npy")) if d.is_dir() else []:
                ef = d / kf.name.replace("keys-", "emb-", 1)
                try:
                    keys = np.load(kf, allow_pickle=False)
                    rows = np.load(ef, mmap_mode="r", allow_pickle=False)
                except (OSError, ValueError):
                    continue  # a torn or foreign part reads as absent: its texts are encoded again
                if rows.ndim != 2 or len(rows) != len(keys) or (self.dim is not None and rows.shape[1] != self.dim):
                    continue
                self.dim = int(rows.shape[1])
                parts.append(_Part(keys.astype(np.uint64), rows))
            self._parts[b] = parts
        return self._parts[b]

    def lookup(self, keys: NDArray[np.uint64]) -> tuple[NDArray[np.float32] | None, NDArray[np.bool_]]:
        """(rows, found): float32 rows for the keys found (zeros elsewhere), and which were found."""
        found = np.zeros(len(keys), dtype=bool)
        out: NDArray[np.float32] | None = None
        buckets = _bucket(keys)
        for b in np.unique(buckets):
            idx = np.flatnonzero(buckets == b)
            for part in self._load(int(b)):
                want = idx[~found[idx]]
                if not len(want):
                    break
                pos = np.searchsorted(part.keys, keys[want])
                pos = np.minimum(pos, len(part.keys) - 1)
                hit = part.keys[pos] == keys[want]
                if hit.any():
                    if out is None:
                        out = np.zeros((len(keys), part.rows.shape[1]), dtype=np.float32)
                    order = np.argsort(pos[hit])  # read the memory map in file order
                    rows_at, dest = pos[hit][order], want[hit][order]
                    out[dest] = part.rows[rows_at]
                    found[dest] = True
        return out, found

    def add(self, keys: NDArray[np.uint64], rows: NDArray[np.float32]) -> None:
        """Write new rows as one part per bucket (merging a bucket that has too many parts)."""
        if not len(keys):
            return
        keys, first = np.unique(keys, return_index=True)
        rows = rows[first]
        buckets = _bucket(keys)
        for b in np.unique(buckets):
            sel = buckets == b
            d = self._bucket_dir(int(b))
            d.mkdir(parents=True, exist_ok=True)
            # A part's name is new each time, so a killed writer's temporary file is never written
            # over by a rerun: the bucket (files of this cache alone) is cleared of dead ones here.
            clear_dead_files(d, ".")
            _clear_orphan_rows(d)
            pid = file_tag()
            _save(d / f"emb-{pid}.npy", rows[sel].astype(np.float16))
            _save(d / f"keys-{pid}.npy", keys[sel])
            self._parts.pop(int(b), None)
            if len(list(d.glob("keys-*.npy"))) > MAX_PARTS:
                self._merge(int(b))

    def _merge(self, b: int) -> None:
        d = self._bucket_dir(b)
        parts = self._load(b)
        old = sorted(d.glob("keys-*.npy"))
        keys = np.concatenate([p.keys for p in parts])
        rows = np.concatenate([np.asarray(p.rows) for p in parts])
        keys, first = np.unique(keys, return_index=True)
        pid = file_tag()
        _save(d / f"emb-{pid}.npy", rows[first])
        _save(d / f"keys-{pid}.npy", keys)
        self._parts.pop(b, None)
        for kf in old:  # the merged part holds every key of these: drop keys first, then rows
            kf.unlink(missing_ok=True)
            (d / kf.name.replace("keys-", "emb-", 1)).unlink(missing_ok=True)


@dataclass(frozen=True, slots=True)
class EmbedStats:
    """Texts embedded: ``encoded`` (distinct texts encoded now) + ``reused`` (the rest: read from
    the cache, or the row of an identical text of the same call)."""

    encoded: int
    reused: int


def embed(texts: Sequence[str], cache: EmbeddingCache, encode: Encode,
          progress: Callable[[int], None] | None = None) -> tuple[NDArray[np.float32], EmbedStats]:
    """float32 rows for ``texts`` (in order), reading the cache first and encoding the rest in
    blocks of ``FLUSH_ROWS`` that are written as they finish."""
    keys = np.array([text_key(cache.fingerprint, t) for t in texts], dtype=np.uint64)
    rows, found = cache.lookup(keys)
    missing = np.flatnonzero(~found)
    # Texts repeat (an option such as "red" in many items): encode each distinct one once.
    uniq, first, inverse = np.unique(keys[missing], return_index=True, return_inverse=True)
    todo = missing[first]  # one text per distinct key, in key order
    for start in range(0, len(todo), FLUSH_ROWS):
        block = todo[start:start + FLUSH_ROWS]
        # Rounded as the cache stores them, so a rerun reading the cache gives the same numbers.
        new = np.asarray(encode([texts[i] for i in block]), dtype=np.float32).astype(np.float16).astype(np.float32)
        if rows is None:
            rows = np.zeros((len(texts), new.shape[1]), dtype=np.float32)
        cache.add(keys[block], new)
        cache.dim = int(new.shape[1])
        sel = (inverse >= start) & (inverse < start + len(block))
        rows[missing[sel]] = new[inverse[sel] - start]
        if progress is not None:
            progress(len(block))
    if rows is None:
        rows = np.zeros((len(texts), cache.dim or 0), dtype=np.float32)
    # reused: every text not encoded now, from the cache or from an identical text of this call
    return rows, EmbedStats(encoded=len(uniq), reused=len(texts) - len(uniq))


def distinct(texts: Iterable[str]) -> list[str]:
    return list(dict.fromkeys(texts))
