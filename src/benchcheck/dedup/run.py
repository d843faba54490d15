"""Step 0 end to end: units, embeddings (through the per-benchmark cache), groups, verdicts."""

from __future__ import annotations

import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from benchcheck.dedup.cache import BenchCache, text_hash
from benchcheck.dedup.compare import BLOCK, TILE, greedy_matches
from benchcheck.dedup.model import Embedder, Embeddings, cache_tag
from benchcheck.dedup.units import TextUnit, comparison_groups, text_units
from benchcheck.dedup.verdict import ItemVerdict, decide
from benchcheck.items import Item

ENCODE_CHUNK = 4096  # texts per encode call: bounds memory and sets the progress granularity
SAVE_EVERY = 16384  # rewrite a benchmark's cache after this many new rows, so a kill loses little


@dataclass(slots=True)
class DedupStats:
    """What a run did: embeddings encoded vs reused, groups compared, time per phase."""

    encoded: int = 0
    reused: int = 0
    groups: int = 0
    largest_group: int = 0
    embed_s: float = 0.0
    compare_s: float = 0.0


@dataclass(slots=True)
class DedupResult:
    """Verdicts in pool order, with the model and threshold that produced them."""

    verdicts: list[ItemVerdict]
    model: str
    threshold: float
    stats: DedupStats = field(default_factory=DedupStats)


def embed_units(units: Sequence[TextUnit], needed: Sequence[int], embedder: Embedder, cache_root: Path,
                stats: DedupStats, progress: bool = False) -> dict[int, Embeddings]:
    """Embeddings of the ``needed`` units, read from or added to their leader's benchmark cache.

    The cache of a benchmark also carries forward the rows of its other unchanged items, so a
    run on part of the pool does not throw away what a full run encoded.
    """
    from tqdm import tqdm

    tag = cache_tag(embedder.name, embedder.fingerprint)
    digests: dict[str, dict[str, str]] = {}
    for u in units:
        for it in u.members:
            digests.setdefault(it.bench, {})[it.item_id] = text_hash(u.text)
    by_bench: dict[str, list[int]] = {}
    for n in needed:
        by_bench.setdefault(units[n].leader.bench, []).append(n)
    out: dict[int, Embeddings] = {}
    total = sum(len(v) for v in by_bench.values())
    bar = tqdm(total=total, desc="embed", unit="text", file=sys.stderr, disable=not progress or total == 0)
    for bench, idxs in by_bench.items():
        cache = BenchCache.open(cache_root, tag, bench, embedder.name, embedder.fingerprint)
        todo: list[int] = []
        for n in idxs:
            row = cache.lookup(units[n].leader.item_id, digests[bench][units[n].leader.item_id])
            if row is None:
                todo.append(n)
            else:
                out[n] = row
        stats.reused += len(idxs) - len(todo)
        bar.update(len(idxs) - len(todo))
        new: dict[str, tuple[str, Embeddings]] = {}
        unsaved = 0
        for c in range(0, len(todo), ENCODE_CHUNK):
            chunk = todo[c : c + ENCODE_CHUNK]
            vecs = embedder.encode([units[n].text for n in chunk])
            for n, v in zip(chunk, vecs, strict=True):
                out[n] = v
                new[units[n].leader.item_id] = (text_hash(units[n].text), v)
            stats.encoded += len(chunk)
            unsaved += len(chunk)
            bar.update(len(chunk))
            if unsaved >= SAVE_EVERY:
                cache.save(new, keep=_still_valid(cache, digests[bench]))
                unsaved = 0
        if unsaved or set(_still_valid(cache, digests[bench])) != set(cache.rows):
            cache.save(new, keep=_still_valid(cache, digests[bench]))
    bar.close()
    return out


def _still_valid(cache: BenchCache, digests: dict[str, str]) -> list[str]:
    """Cached ids whose item is still in the pool with the same text."""
    return [i for i, h in cache.hashes.items() if digests.get(i) == h]


def dedup_items(items: Sequence[Item], embedder: Embedder, threshold: float, cache_root: str | Path,
                block: int = BLOCK, tile: int = TILE, progress: bool = False) -> DedupResult:
    """Step 0 over a pool: exact duplicates by text, near ones by embedding, within each group."""
    stats = DedupStats()
    units = text_units(items)
    groups = comparison_groups(units)
    t0 = time.perf_counter()
    vectors = embed_units(units, [n for g in groups for n in g], embedder, Path(cache_root), stats, progress)
    t1 = time.perf_counter()
    sig_ids: dict[frozenset[str], int] = {}
    near: dict[int, tuple[int, float]] = {}
    for g in groups:
        emb = np.stack([vectors[n] for n in g])
        sig = np.array([sig_ids.setdefault(units[n].signature, len(sig_ids)) for n in g], dtype=np.int64)
        res = greedy_matches(emb, sig, threshold, block=block, tile=tile)
        for pos in np.flatnonzero(res.match >= 0):
            near[g[pos]] = (g[int(res.match[pos])], float(res.similarity[pos]))
        stats.largest_group = max(stats.largest_group, len(g))
    stats.groups = len(groups)
    stats.embed_s, stats.compare_s = t1 - t0, time.perf_counter() - t1
    return DedupResult(decide(units, near, items), embedder.name, threshold, stats)
