"""The blocked greedy comparison against its row-by-row definition, and its memory bound."""

from __future__ import annotations

import tracemalloc

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from benchcheck.dedup.compare import GroupMatches, greedy_matches


def reference(emb: np.ndarray, sig: np.ndarray, threshold: float) -> GroupMatches:
    """The rule, row by row against the full matrix: a row duplicates the most similar earlier
    kept row with its signature at or above the threshold (ties to the earliest)."""
    sims = emb @ emb.T
    match = np.full(len(emb), -1, dtype=np.int64)
    similarity = np.full(len(emb), np.nan, dtype=np.float32)
    kept: list[int] = []
    for i in range(len(emb)):
        cands = [(float(sims[i, j]), -j) for j in kept if sig[j] == sig[i] and sims[i, j] >= threshold]
        if cands:
            v, neg_j = max(cands)
            match[i], similarity[i] = -neg_j, v
        else:
            kept.append(i)
    return GroupMatches(match, similarity)


# Small integer vectors: every dot product is exact in float32, so ties and values right at the
# threshold really happen and blocked and unblocked arithmetic cannot disagree by rounding.
vectors = st.integers(1, 40).flatmap(lambda n: st.tuples(
    st.lists(st.lists(st.integers(-2, 2), min_size=3, max_size=3), min_size=n, max_size=n),
    st.lists(st.integers(0, 1), min_size=n, max_size=n),
    st.integers(1, 6), st.integers(1, 7), st.integers(2, 6)))


@settings(max_examples=200, deadline=None)
@given(vectors)
def test_blocked_equals_reference(case: tuple[list[list[int]], list[int], int, int, int]) -> None:
    rows, sigs, block, tile, threshold = case
    emb = np.array(rows, dtype=np.float32)
    sig = np.array(sigs, dtype=np.int64)
    want = reference(emb, sig, threshold)
    got = greedy_matches(emb, sig, threshold, block=block, tile=tile)
    np.testing.assert_array_equal(got.match, want.match)
    np.testing.assert_array_equal(got.similarity, want.similarity)
    # Kept rows are pairwise below the threshold (within a signature); removed rows name kept rows.
    kept = np.flatnonzero(got.kept)
    sims = emb[kept] @ emb[kept].T
    same = sig[kept][:, None] == sig[kept][None, :]
    assert not ((sims >= threshold) & same & ~np.eye(len(kept), dtype=bool)).any()
    assert got.kept[got.match[~got.kept]].all()


def test_chain_does_not_remove_through_a_removed_row() -> None:
    # A~B and B~C but A!~C: B goes (duplicate of A), C stays, since B is not kept.
    a, b, c = np.array([[1.0, 0.0]]), np.array([[0.8, 0.6]]), np.array([[0.28, 0.96]])
    emb = np.vstack([a, b, c]).astype(np.float32)
    got = greedy_matches(emb, np.zeros(3, dtype=np.int64), 0.75, block=1)
    assert got.match.tolist() == [-1, 0, -1]


def test_guard_signature_keeps_lookalikes_apart() -> None:
    emb = np.ones((2, 4), dtype=np.float32) / 2
    assert greedy_matches(emb, np.array([0, 1]), 0.9).match.tolist() == [-1, -1]
    assert greedy_matches(emb, np.array([3, 3]), 0.9).match.tolist() == [-1, 0]


@pytest.mark.parametrize("block,tile", [(256, 512), (1000, 100)])
def test_memory_stays_bounded(block: int, tile: int) -> None:
    n, d = 4000, 16
    rng = np.random.default_rng(0)
    emb = rng.standard_normal((n, d)).astype(np.float32)
    emb /= np.linalg.norm(emb, axis=1, keepdims=True)
    sig = np.zeros(n, dtype=np.int64)
    tracemalloc.start()
    try:
        greedy_matches(emb, sig, 0.99, block=block, tile=tile)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    full = n * n * 4  # what one all-pairs float32 matrix of the group would take
    # A few block x tile (or block x block) temporaries, whatever the group size.
    assert peak < min(full / 4, 3 * 4 * block * max(block, tile) + 2 * emb.nbytes), f"peak {peak} bytes"
