"""The conditioned null's parts against known answers: the Poisson-binomial against enumeration,
the exact chance-count bounds' coverage over simulated truths, Benjamini-Hochberg against a hand
computation, and the truncated gold fit against a grid search."""

from __future__ import annotations

import itertools

import numpy as np

from benchcheck.audit.chance import chance_estimate
from benchcheck.audit.fdr import bh_adjust
from benchcheck.audit.golds import leave_one_out, truncated_q
from benchcheck.audit.poisson_binomial import (
    EXACT_MAX,
    _normal_bounds,
    count_bounds,
    count_quantiles,
    p_value,
    pmf,
    quantiles,
)


def test_pmf_matches_enumeration() -> None:
    p = [0.1, 0.5, 0.9, 1.0, 0.0, 0.33]
    want = np.zeros(len(p) + 1)
    for bits in itertools.product((0, 1), repeat=len(p)):
        want[sum(bits)] += np.prod([q if b else 1 - q for q, b in zip(p, bits, strict=True)])
    assert np.allclose(pmf(p), want)
    assert abs(p_value(p, 3) - want[3:].sum()) < 1e-12


def test_count_bounds_cover_the_truth_whatever_the_shortcuts() -> None:
    """Worlds where the shortcuts sit where chance is likeliest too (p_i near 1, the hard case for
    Horvitz-Thompson): the exact interval covers the true number of chance removals in >= 95 %."""
    rng = np.random.default_rng(0)
    covered = runs = 0
    for _ in range(300):
        n = int(rng.integers(5, 80))
        p = rng.choice([0.0, 0.2, 0.6, 0.97, 1.0], size=n, p=[0.3, 0.3, 0.2, 0.15, 0.05])
        shortcut = rng.random(n) < np.where(p > 0.9, 0.5, 0.15)
        removed = shortcut | (rng.random(n) < p)
        truth = int((removed & ~shortcut).sum())
        _, lo, hi, _ = chance_estimate(list(p), list(removed))
        covered += lo <= truth <= hi
        runs += 1
    assert covered >= 0.95 * runs, (covered, runs)


def test_certain_removals_count_and_widen() -> None:
    est, lo, hi, certain = chance_estimate([1.0] * 6 + [0.0] * 10, [True] * 6 + [False] * 10)
    assert (est, lo, hi, certain) == (6.0, 0.0, 6.0, 6)


def test_normal_bounds_agree_with_exact_on_many_items() -> None:
    rng = np.random.default_rng(1)
    kept = rng.uniform(0, 0.5, 1500)
    rem = np.sort(rng.uniform(0.1, 0.9, 500))
    exact = count_bounds(kept, rem)
    approx = _normal_bounds(kept, rem, 0.025)
    assert abs(exact[0] - approx[0]) <= 2 and abs(exact[1] - approx[1]) <= 2, (exact, approx)


def test_pooled_quantiles_agree_with_exact_past_the_exact_limit() -> None:
    """The headline pools every cell's items; past ``EXACT_MAX`` the normal approximation stands in
    for the quadratic convolution and lands on the exact quantiles to within a count."""
    rng = np.random.default_rng(2)
    p = rng.uniform(0, 0.6, EXACT_MAX + 200)
    exact = quantiles(p)
    approx = count_quantiles(p)
    assert abs(exact[0] - approx[0]) <= 1 and abs(exact[1] - approx[1]) <= 1, (exact, approx)
    assert count_quantiles(p[:50]) == quantiles(p[:50])


def test_bh_adjust_by_hand() -> None:
    adj = bh_adjust([0.01, 0.04, 0.03, 0.5])
    # sorted 0.01, 0.03, 0.04, 0.5 -> x m / rank 0.04, 0.06, 0.0533, 0.5 -> running minimum from the top
    assert np.allclose(adj, [0.04, 0.04 * 4 / 3, 0.04 * 4 / 3, 0.5])
    assert bh_adjust([]) == []
    assert bh_adjust([0.9, 0.9]) == [0.9, 0.9]


def test_truncated_fit_is_the_maximum_and_ignores_what_it_cannot_see() -> None:
    rng = np.random.default_rng(2)
    n = 300
    golds = rng.choice(2, size=n, p=[0.7, 0.3])
    allowed = np.ones((n, 2), dtype=bool)
    for i in range(n):
        b = int(rng.integers(2))
        if rng.random() < 0.5 and b != golds[i]:
            allowed[i, b] = False
    centre = np.array([0.5, 0.5])
    q = truncated_q(golds, allowed, centre, weight=1.0)
    xs = np.linspace(1e-3, 1 - 1e-3, 20001)
    counts = np.bincount(golds, minlength=2)
    a = allowed.astype(float)
    obj = [(centre + counts) @ np.log([x, 1 - x]) - np.log(a @ np.array([x, 1 - x])).sum() for x in xs]
    assert abs(q[0] - xs[int(np.argmax(obj))]) < 1e-3
    # Every kept item forbids A (a model that always answers A): q(A) is not in the rows, the prior
    # centre keeps it.
    golds2 = rng.choice([1, 2, 3], size=200)
    forbid_a = np.ones((200, 4), dtype=bool)
    forbid_a[:, 0] = False
    centre4 = np.array([0.4, 0.2, 0.2, 0.2])
    assert abs(truncated_q(golds2, forbid_a, centre4)[0] - 0.4) < 1e-6
    loo = leave_one_out(q, golds, allowed, weight=1.0)
    assert loo.shape == (n, 2) and np.allclose(loo.sum(axis=1), 1.0)
    # Without an item its own gold loses mass (an item that allowed only its gold takes away as much
    # from each option as q gives them, so q stays).
    free = allowed.all(axis=1)
    assert np.all(loo[free & (golds == 0), 0] < q[0]) and np.all(loo[free & (golds == 1), 1] < q[1])
    assert np.all(loo[golds == 0, 0] <= q[0] + 1e-12)
