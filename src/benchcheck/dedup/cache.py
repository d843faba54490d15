"""The per-benchmark embedding cache: ``<cache>/<model tag>/<bench>/ids.json`` + one ``.npy``.

``ids.json`` lists the item ids, a hash of each item's text, and the name of the ``.npy`` file
holding their rows in the same order. A row is reused only when its item id and text hash
both match, so a changed item is re-encoded and a changed model lands in another folder (the
tag holds the model's fingerprint). Writes are crash-safe: the new ``.npy`` gets a fresh name,
then ``ids.json`` is replaced atomically to point at it, then the old ``.npy`` is deleted; a
reader therefore always sees a matching pair.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from benchcheck.atomic import clear_dead_files, write_atomic
from benchcheck.dedup.model import Embeddings

SCHEMA_VERSION = 1


def text_hash(text: str) -> str:
    """16 hex digits of the text's SHA-256: enough to notice an edited item."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]


def bench_dir_name(bench: str) -> str:
    """A folder name that cannot escape the cache: a cleaned name plus a hash of the real one."""
    clean = re.sub(r"[^A-Za-z0-9._-]+", "_", bench).strip("._")[:64] or "bench"
    return f"{clean}-{hashlib.sha1(bench.encode()).hexdigest()[:8]}"


@dataclass(slots=True)
class BenchCache:
    """The cached rows of one benchmark under one model: item id -> (text hash, row)."""

    folder: Path
    model: str
    fingerprint: str
    hashes: dict[str, str] = field(default_factory=dict)
    rows: dict[str, int] = field(default_factory=dict)
    matrix: Embeddings | None = None

    @classmethod
    def open(cls, root: Path, tag: str, bench: str, model: str, fingerprint: str) -> BenchCache:
        """Read the cache of ``bench``; a missing, torn or foreign cache reads as empty."""
        cache = cls(root / tag / bench_dir_name(bench), model, fingerprint)
        try:
            meta = json.loads((cache.folder / "ids.json").read_text(encoding="utf-8"))
            if meta.get("schema_version") != SCHEMA_VERSION or meta.get("fingerprint") != fingerprint:
                return cache
            ids, hashes = meta["ids"], meta["text_hashes"]
            matrix = np.load(cache.folder / str(meta["npy"]), allow_pickle=False)
        except (OSError, ValueError, KeyError, TypeError):
            return cache
        npy_name = str(meta["npy"])
        if "/" in npy_name or matrix.ndim != 2 or len(ids) != matrix.shape[0] or len(ids) != len(hashes):
            return cache
        cache.matrix = matrix.astype(np.float32, copy=False)
        cache.hashes = dict(zip(map(str, ids), map(str, hashes), strict=True))
        cache.rows = {str(i): n for n, i in enumerate(ids)}
        return cache

    def lookup(self, item_id: str, digest: str) -> Embeddings | None:
        """The cached row of an item whose text still hashes to ``digest``."""
        if self.matrix is None or self.hashes.get(item_id) != digest:
            return None
        row: Embeddings = self.matrix[self.rows[item_id]]
        return row

    def save(self, vectors: Mapping[str, tuple[str, Embeddings]], keep: Sequence[str] = ()) -> None:
        """Write ``vectors`` (id -> (text hash, row)) plus the cached rows of the ids in ``keep``.

        ``keep`` lets a run that needed only some items carry the others' rows forward.
        """
        entries: dict[str, tuple[str, Embeddings]] = {}
        for item_id in keep:
            if item_id in self.rows and item_id not in vectors and self.matrix is not None:
                entries[item_id] = (self.hashes[item_id], self.matrix[self.rows[item_id]])
        entries.update(vectors)
        if not entries:
            return
        ids = sorted(entries)
        matrix = np.stack([entries[i][1] for i in ids]).astype(np.float32, copy=False)
        hashes = [entries[i][0] for i in ids]
        digest = hashlib.sha256(json.dumps([ids, hashes]).encode()).hexdigest()[:16]
        npy = f"emb-{digest}.npy"
        self.folder.mkdir(parents=True, exist_ok=True)
        clear_dead_files(self.folder, ".emb-")  # a killed save's matrix, under a name no rerun may write
        write_atomic(self.folder / npy, lambda f: np.save(f, matrix, allow_pickle=False))
        meta = {
            "schema_version": SCHEMA_VERSION,
            "model": self.model,
            "fingerprint": self.fingerprint,
            "dim": int(matrix.shape[1]),
            "npy": npy,
            "ids": ids,
            "text_hashes": hashes,
        }
        write_atomic(self.folder / "ids.json", lambda f: f.write(json.dumps(meta).encode()))
        for old in self.folder.glob("emb-*.npy"):
            if old.name != npy:
                old.unlink(missing_ok=True)
        self.matrix, self.hashes = matrix, dict(zip(ids, hashes, strict=True))
        self.rows = {i: n for n, i in enumerate(ids)}
