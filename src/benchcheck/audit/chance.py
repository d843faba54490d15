"""The chance-removal estimate: how many of a set of removals are chance, from each item's chance
removal probability under the null (``null``) and whether it was removed.

A shortcut is removed whatever its answer, so the kept items are non-shortcuts, each seen with
probability ``1 - p_i``. The estimate weights them so that every non-shortcut adds ``p_i`` on
average (``chance_estimate``); its interval is exact (``poisson_binomial.count_bounds``).
"""

from __future__ import annotations

from collections.abc import Sequence

from benchcheck.audit.poisson_binomial import CERTAIN, count_bounds

BLEND_FROM = 0.5  # below this chance removal probability the estimate is plain Horvitz-Thompson


def blend(p: float) -> float:
    """How much a removal with chance removal probability ``p`` counts as chance by itself (see
    ``chance_estimate``): 0 up to 1/2, rising linearly to 1 at p = 1."""
    return min(1.0, max(0.0, (p - BLEND_FROM) / (1.0 - BLEND_FROM)))


def chance_estimate(p: Sequence[float], removed: Sequence[bool],
                    alpha: float = 0.025) -> tuple[float, float, float, int]:
    """(estimate, lo, hi, certain) of the chance removals among items given by their chance removal
    probability and whether they were removed; ``certain`` counts the removals with p_i = 1.

    Every non-shortcut item adds, on average, exactly p_i whatever the weight h = ``blend(p_i)``:
    a kept item adds (1 - h) p_i / (1 - p_i), a removed one h. At h = 0 (p_i <= 1/2) this is the
    Horvitz-Thompson sum over kept items, which a shortcut never enters; as p_i nears 1 its weight
    p_i / (1 - p_i) makes it erratic (a stratum of such items is rarely seen kept), so there the
    removal itself counts, up to 1 at p_i = 1 (a removal the null makes whatever the gold): a
    shortcut with such a p_i is counted as chance, which its rows cannot contradict. The estimate
    is kept inside the exact interval (``poisson_binomial.count_bounds``), which does not depend
    on the weights."""
    est = 0.0
    kept: list[float] = []
    rem: list[float] = []
    for q, r in zip(p, removed, strict=True):
        h = blend(q)
        if r:
            est += h
            rem.append(q)
        else:
            est += (1.0 - h) * q / (1.0 - q) if q < CERTAIN else 0.0
            kept.append(q)
    certain = sum(q >= CERTAIN for q in rem)
    lo, hi = count_bounds(kept, rem, alpha)
    return float(min(max(est, lo), hi)), float(lo), float(hi), certain


def chance_removals(items: Sequence[tuple[float, bool]]) -> tuple[float, float, float]:
    """(estimate, lo, hi) of the chance removals among items given as (chance removal probability
    ``p_i``, removed); pooling benchmarks or steps is passing all their items."""
    est, lo, hi, _ = chance_estimate([p for p, _ in items], [r for _, r in items])
    return est, lo, hi
