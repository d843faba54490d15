"""The Poisson-binomial distribution (a sum of independent Bernoullis with their own probabilities),
computed exactly, and the exact confidence bounds of a chance-removal count built on it.

The null makes item i's removal a Bernoulli(p_i); the number of chance removals among a set of
items is then Poisson-binomial. Its pmf is the exact convolution (one pass per item), so tail
probabilities hold for small counts where a normal approximation does not.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from benchcheck.stats.normal import norm_cdf, norm_sf

CERTAIN = 1.0 - 1e-12  # a probability this close to 1 is a certain removal
EXACT_MAX = 3000  # Bernoullis up to which the bounds convolve exactly; beyond, a normal approximation


def pmf(p: Sequence[float] | np.ndarray) -> np.ndarray:
    """P(X = x) for x = 0..len(p), X the sum of independent Bernoulli(p_i)."""
    out = np.zeros(len(p) + 1)
    out[0] = 1.0
    for i, q in enumerate(np.clip(np.asarray(p, dtype=np.float64), 0.0, 1.0)):
        add(out, i, q)
    return out


def add(dist: np.ndarray, n: int, q: float) -> None:
    """Convolve ``dist`` (the pmf of a sum of ``n`` Bernoullis, stored in a longer array) with one
    more Bernoulli(q), in place."""
    dist[1:n + 2] = dist[1:n + 2] * (1.0 - q) + dist[:n + 1] * q
    dist[0] *= 1.0 - q


def sf(dist: np.ndarray, x: int) -> float:
    """P(X >= x) from a pmf."""
    return float(dist[max(x, 0):].sum()) if x < len(dist) else 0.0


def cdf(dist: np.ndarray, x: int) -> float:
    """P(X <= x) from a pmf."""
    return float(dist[:x + 1].sum()) if x >= 0 else 0.0


def p_value(p: Sequence[float] | np.ndarray, observed: int) -> float:
    """One-sided P(X >= observed) under the null: the excess test of a cell."""
    return min(1.0, sf(pmf(p), observed))


def _normal_sf(x: np.ndarray, mean: np.ndarray, var: np.ndarray) -> np.ndarray:
    """P(X >= x) by the normal approximation with a continuity correction."""
    z = (x - 0.5 - mean) / np.sqrt(np.maximum(var, 1e-12))
    return norm_sf(z)


def _normal_bounds(kept: np.ndarray, rem: np.ndarray, alpha: float) -> tuple[int, int]:
    """``count_bounds`` with the normal approximation (many items: every tail is far from 0)."""
    m = len(rem)
    f = np.arange(0, m + 1, dtype=np.float64)
    mu0, v0 = float(kept.sum()), float((kept * (1 - kept)).sum())
    top, bot = rem[::-1], rem
    mu_t = mu0 + np.concatenate([[0.0], np.cumsum(top)])
    v_t = v0 + np.concatenate([[0.0], np.cumsum(top * (1 - top))])
    mu_b = mu0 + np.concatenate([[0.0], np.cumsum(bot)])
    v_b = v0 + np.concatenate([[0.0], np.cumsum(bot * (1 - bot))])
    up_ok = _normal_sf(f, mu_t, v_t) > alpha
    up_ok[0] = True
    # P(X <= f) = P(-X >= -f): the same approximation mirrored.
    low_ok = _normal_sf(-f, -mu_b, v_b) > alpha
    hi = int(np.argmin(up_ok) - 1) if not up_ok.all() else m
    lo = int(np.argmax(low_ok)) if low_ok.any() else m
    return min(lo, hi), hi


def quantiles(p: Sequence[float] | np.ndarray, lo: float = 0.025, hi: float = 0.975) -> tuple[int, int]:
    """The ``lo`` and ``hi`` quantiles of X (smallest x with P(X <= x) >= level)."""
    c = np.cumsum(pmf(p))
    return int(np.searchsorted(c, lo - 1e-12)), int(np.searchsorted(c, hi - 1e-12))


def count_quantiles(p: Sequence[float] | np.ndarray, lo: float = 0.025, hi: float = 0.975) -> tuple[int, int]:
    """``quantiles``, exact up to ``EXACT_MAX`` Bernoullis and by the normal approximation (with a
    continuity correction) beyond: pooling every cell of an audit can reach many items, where the
    exact convolution is quadratic in their number."""
    q = np.clip(np.asarray(p, dtype=np.float64), 0.0, 1.0)
    if len(q) <= EXACT_MAX:
        return quantiles(q, lo, hi)
    x = np.arange(len(q) + 1, dtype=np.float64)
    c = norm_cdf((x + 0.5 - q.sum()) / np.sqrt(max(float((q * (1 - q)).sum()), 1e-12)))
    return int(np.searchsorted(c, lo - 1e-12)), min(int(np.searchsorted(c, hi - 1e-12)), len(q))


def count_bounds(p_kept: Sequence[float], p_removed: Sequence[float], alpha: float = 0.025) -> tuple[int, int]:
    """Exact bounds for the number F of removed items that are chance removals.

    Model: an item that is not a shortcut is removed with probability p_i (the null), a shortcut
    is removed whatever. The kept items are all non-shortcuts; F of the removed items are too.
    Had a set A of the removed items been the non-shortcuts, F = |A| would be one draw of
    X = sum over kept + A of Bernoulli(p_i). A value f stays in the confidence set unless every
    A of size f makes it implausible: the upper bound keeps f while P(X >= f) > alpha with A
    the f removed items of highest p (the most favourable), the lower bound while
    P(X <= f) > alpha with A those of lowest p. Each side errs with probability at most alpha
    whatever the truth (the true A is among those tried), so [lo, hi] covers F with probability
    at least 1 - 2 alpha. A removal the null makes whatever the gold (p_i = 1) can be chance or
    shortcut: it widens the interval rather than disappearing from it."""
    kept = np.clip(np.asarray(p_kept, dtype=np.float64), 0.0, 1.0)
    rem = np.sort(np.clip(np.asarray(p_removed, dtype=np.float64), 0.0, 1.0))
    m = len(rem)
    if m == 0:
        return 0, 0
    if len(kept) + m > EXACT_MAX:
        return _normal_bounds(kept, rem, alpha)
    base = np.zeros(len(kept) + m + 1)
    base[0] = 1.0
    for i, q in enumerate(kept):
        add(base, i, q)
    n0 = len(kept)
    # Upper bound: add the highest p first; stop at the first f that fails.
    dist = base.copy()
    hi = 0
    for f, q in enumerate(rem[::-1], start=1):
        add(dist, n0 + f - 1, float(q))
        if sf(dist, f) <= alpha:
            break
        hi = f
    # Lower bound: add the lowest p first; the first f that passes.
    dist = base.copy()
    lo = m
    if cdf(dist, 0) > alpha:
        lo = 0
    else:
        for f, q in enumerate(rem, start=1):
            add(dist, n0 + f - 1, float(q))
            if cdf(dist, f) > alpha:
                lo = f
                break
    return min(lo, hi), hi
