"""Greedy near-duplicate resolution of one group, blocked so memory stays bounded (pure).

Rows are in priority order. Row ``i`` is a duplicate when some *kept* row before it has cosine
similarity >= threshold and the same guard signature; it then points at the most similar such
row (ties to the earliest). Otherwise it is kept. So kept rows are pairwise below the threshold,
every removed row names a kept row, and chains (A~B, B~C, A!~C) cannot remove C through B.

Memory: rows go in blocks of ``block``; each block meets the kept rows before it in tiles of
``tile`` columns, so the largest temporary is ``block x tile`` floats whatever the group size.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from benchcheck.dedup.model import Embeddings

Ints = npt.NDArray[np.int64]
Floats = npt.NDArray[np.float32]

BLOCK = 1024
TILE = 8192


@dataclass(frozen=True, slots=True)
class GroupMatches:
    """Per row: the index of the kept row it duplicates (-1 when kept) and the similarity (NaN)."""

    match: Ints
    similarity: Floats

    @property
    def kept(self) -> npt.NDArray[np.bool_]:
        return self.match < 0


def _best_earlier(rows: Embeddings, rsig: Ints, emb: Embeddings, sig: Ints, kept: Ints, tile: int
                  ) -> tuple[Floats, Ints]:
    """Per row of the block: the highest similarity to an already kept row with the same
    signature (-inf when none) and that row's index; earlier tiles win ties."""
    best = np.full(len(rows), -np.inf, dtype=np.float32)
    best_idx = np.full(len(rows), -1, dtype=np.int64)
    for t in range(0, len(kept), tile):
        cols = kept[t : t + tile]
        sims = rows @ emb[cols].T
        sims[rsig[:, None] != sig[cols][None, :]] = -np.inf
        j = sims.argmax(axis=1)
        v = sims[np.arange(len(rows)), j]
        better = v > best
        best[better] = v[better]
        best_idx[better] = cols[j[better]]
    return best, best_idx


def greedy_matches(emb: Embeddings, sig: Ints, threshold: float, block: int = BLOCK, tile: int = TILE
                   ) -> GroupMatches:
    """Resolve one group: ``emb`` are L2-normalized rows in priority order, ``sig`` their guard
    signature ids."""
    n = len(emb)
    match = np.full(n, -1, dtype=np.int64)
    similarity = np.full(n, np.nan, dtype=np.float32)
    kept_parts: list[Ints] = []
    for s in range(0, n, block):
        e = min(n, s + block)
        rows, rsig = emb[s:e], sig[s:e]
        kept_before = np.concatenate(kept_parts) if kept_parts else np.empty(0, dtype=np.int64)
        best, best_idx = _best_earlier(rows, rsig, emb, sig, kept_before, tile)
        inner = rows @ rows.T
        inner[rsig[:, None] != rsig[None, :]] = -np.inf
        pos = np.arange(e - s)
        inner[pos[:, None] <= pos[None, :]] = -np.inf  # only rows before i in the block can be its original
        # Rows without an in-block candidate are decided by the earlier blocks alone; only rows
        # with one need the sequential pass (whether the candidate is kept decides their fate).
        has_inner: npt.NDArray[np.bool_] = np.asarray((inner >= threshold).any(axis=1))
        local_kept = np.zeros(e - s, dtype=bool)
        for i in range(e - s):
            b, bi = best[i], best_idx[i]
            if has_inner[i]:
                cand = np.where(local_kept[:i], inner[i, :i], -np.inf)
                if i and cand.max() > b:  # strict: an earlier block's row wins a tie
                    k = int(cand.argmax())
                    b, bi = cand[k], s + k
            if b >= threshold:
                match[s + i], similarity[s + i] = bi, b
            else:
                local_kept[i] = True
        kept_parts.append(s + np.flatnonzero(local_kept).astype(np.int64))
    return GroupMatches(match, similarity)

