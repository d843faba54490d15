"""The numbers behind the sweep's verdicts (pure numpy): a video-clustered t interval that is never
zero-width, and a within-video permutation test of the statistic a verdict uses.

**Interval** (:data:`INTERVAL_METHOD`). Items of one video are correlated, so the standard error of
a mean over items is the cluster-robust one over videos, CR2 (Bell-McCaffrey),
``SE^2 = sum_v (S_v - est * n_v)^2 / (1 - n_v / N) / N^2`` (``S_v`` the video's sum, ``n_v`` its
items, ``N`` all items), with a Student t critical value on the Satterthwaite degrees of freedom of
that variance (``stats.cluster.cr2``; ``V - 1`` when the videos have equal sizes, fewer when a few
large videos carry the variance: CR1 on ``V - 1`` undercovered there, docs/sweep.md). One video:
no estimate of the between-video spread, so the interval is the whole range. The SE of a paired
difference never goes below the item-level SE of the Agresti-Min interval (1/2 added to each cell),
which is positive by construction: when every video shows the same mean (all answers equal under
two conditions, say) the interval still has the width the item count allows. An accuracy (one
proportion) takes the Wilson interval at the effective sample size ``N / deff`` with the same t
(``stats.cluster.clustered_wilson``): near 0 or 1 with correlated videos the symmetric one covered
65-87 %.
A family of ``k`` intervals meant to hold together uses ``alpha / k`` each (Bonferroni).

**The verdict's two effects** (:data:`PIXELS_METHOD`, :func:`max_effect_interval`; decision 136).
The pixels effect takes Tango's score interval for a paired difference at the effective sample
size ``n / deff`` (``deff`` the CR2 variance of the mean difference over its item-level variance,
1 where no answer differs) with the t quantile on the CR2 df: where few answers differ or a few
videos carry them, the symmetric interval's bound on the side away from 0 fell below the truth
in 4-12 % of runs (nominal 2.5 %), and a verdict of no effect rests on that bound. The frames
effect is the max over its rungs: its lower bound (a gain) is the max of the rungs' lower bounds
at ``alpha / H``, which pays for picking the best rung; its upper bound is the max of the rungs'
upper bounds at ``alpha`` each, which needs no multiplicity: the largest true rung effect lies
below it whenever the bound of the rung that attains the max holds (intersection-union).

**Test** (:func:`permutation_pvalue`). The statistic is ``max_h mean(h) - mean(lo)`` over the
conditions' columns (one ``h`` for a plain contrast). Under the null that a video's answers are
exchangeable across the conditions (the ladder changes nothing), permuting the condition labels of
all items of a video together leaves the data's distribution unchanged, so the Monte Carlo
permutation p-value ``(1 + #{T* >= T}) / (B + 1)`` is valid at any number of videos, including the
max over rungs; with few videos it simply cannot get small (2 videos, 2 conditions: at least 1/4).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from benchcheck.stats.cluster import clustered_wilson, cr2
from benchcheck.stats.student import t_quantile

INTERVAL_METHOD = ("video-clustered t interval (CR2 sandwich SE over videos, Student t with Bell-McCaffrey df; "
                   "SE at least the item-level Agresti-Min SE, so never zero-width; an accuracy: Wilson at the "
                   "effective sample size with that t)")
PIXELS_METHOD = ("Tango score interval for a paired difference at the effective sample size n / deff (deff from the "
                 "CR2 variance over videos), with the t quantile on the CR2 (Bell-McCaffrey) df")
TEST_METHOD = "within-video permutation test of condition labels (one-sided, Monte Carlo)"

Array = npt.NDArray[np.float64]


@dataclass(frozen=True, slots=True)
class Interval:
    """An estimate with its interval over ``n`` items from ``n_videos`` videos."""

    est: float
    lo: float
    hi: float
    n: int
    n_videos: int = 0

    @property
    def width(self) -> float:
        return self.hi - self.lo


NAN_INTERVAL = Interval(float("nan"), float("nan"), float("nan"), 0, 0)


# --- intervals ---

def agresti_min_se(b: float, c: float, n: int) -> float:
    """SE of a paired difference after adding 1/2 to each cell of the 2x2 table (> 0 for any table);
    ``b``: items right only under the first condition, ``c``: right only under the second."""
    m = n + 2.0
    p10, p01 = (b + 0.5) / m, (c + 0.5) / m
    return math.sqrt(max(p10 + p01 - (p10 - p01) ** 2, 0.0) / m)


def clustered_interval(sums: Array, counts: Array, floor_se: float, bounds: tuple[float, float],
                       alpha: float = 0.05, family: int = 1) -> Interval:
    """Mean over items ``sum(sums) / sum(counts)`` (per-video sums and item counts) with the interval
    of :data:`INTERVAL_METHOD` at two-sided level ``1 - alpha / family``, clipped to ``bounds``."""
    n, v = int(counts.sum()), len(counts)
    if n == 0:
        return NAN_INTERVAL
    est = float(sums.sum()) / n
    se, df = cr2(sums, counts)
    se = max(se, floor_se)
    t = t_quantile(alpha / (2.0 * family), df)
    half = t * se
    lo = bounds[0] if math.isinf(half) else max(bounds[0], est - half)
    hi = bounds[1] if math.isinf(half) else min(bounds[1], est + half)
    return Interval(round(est, 6), round(lo, 6), round(hi, 6), n, v)


def per_video(values: Array, cluster: npt.NDArray[np.int64], n_clusters: int) -> tuple[Array, Array]:
    """(V x K sums of an N x K item matrix, V item counts) for item -> cluster indices."""
    counts = np.bincount(cluster, minlength=n_clusters).astype(np.float64)
    sums = np.stack([np.bincount(cluster, weights=values[:, k], minlength=n_clusters)
                     for k in range(values.shape[1])], axis=1).astype(np.float64)
    return sums, counts


def accuracy_interval(correct: Array, cluster: npt.NDArray[np.int64], n_clusters: int,
                      alpha: float = 0.05) -> Interval:
    """Accuracy of 0/1 answers (one column): the Wilson interval at the effective sample size with
    the t quantile on the CR2 degrees of freedom (``stats.cluster.clustered_wilson``, the audit's
    removal-rate interval). A Wald interval ``est +- t SE`` is symmetric, and an accuracy near 0 or
    1 with answers correlated within videos is skewed: at 10 videos it covered 65-87 % (docs/sweep.md)."""
    n = len(correct)
    if n == 0:
        return NAN_INTERVAL
    sums, counts = per_video(correct.reshape(-1, 1), cluster, n_clusters)
    keep = counts > 0
    lo, hi = clustered_wilson(correct, sums[keep, 0], counts[keep], alpha)
    return Interval(round(float(correct.mean()), 6), round(lo, 6), round(hi, 6), n, int(keep.sum()))


def difference_interval(a: Array, b: Array, cluster: npt.NDArray[np.int64], n_clusters: int,
                        alpha: float = 0.05, family: int = 1) -> Interval:
    """Paired difference mean(a) - mean(b) of 0/1 answers on the same items, floor Agresti-Min."""
    d = (a - b).reshape(-1, 1)
    sums, counts = per_video(d, cluster, n_clusters)
    floor = agresti_min_se(float(((a == 1) & (b == 0)).sum()), float(((a == 0) & (b == 1)).sum()), len(a))
    return clustered_interval(sums[:, 0], counts, floor, (-1.0, 1.0), alpha, family)


def tango_bounds(b: Array, c: Array, n: Array, t: Array) -> tuple[Array, Array]:
    """Tango's score interval of a paired difference ``(b - c) / n`` (``b``: items right only under
    the first condition, ``c``: only under the second; arrays, one interval each) with critical
    value ``t``: the ``theta`` with ``|b - c - n theta| <= t sqrt(n (2 q(theta) + theta (1 - theta)))``,
    ``q`` the restricted MLE of the second-only cell. The statistic falls in theta, so each bound
    is found by bisection; an infinite ``t`` gives [-1, 1]."""
    def stat(th: Array) -> Array:
        a_, b_ = 2.0 * n, -b - c + (2.0 * n - b + c) * th
        c_ = -c * th * (1.0 - th)
        q = (np.sqrt(np.maximum(b_ * b_ - 4.0 * a_ * c_, 0.0)) - b_) / (2.0 * a_)
        out: Array = (b - c - n * th) / np.sqrt(np.maximum(n * (2.0 * q + th * (1.0 - th)), 1e-300))
        return out

    bounds = []
    for sign in (1.0, -1.0):  # the lower bound solves stat = +t, the upper stat = -t
        lo, hi = np.full(b.shape, -1.0), np.full(b.shape, 1.0)
        for _ in range(50):
            mid = (lo + hi) / 2.0
            above = stat(mid) > sign * t
            lo, hi = np.where(above, mid, lo), np.where(above, hi, mid)
        bounds.append(np.where(np.isinf(t), -sign, (lo + hi) / 2.0))
    return bounds[0], bounds[1]


def score_difference_interval(a: Array, b: Array, cluster: npt.NDArray[np.int64], n_clusters: int,
                              alpha: float = 0.05) -> Interval:
    """Paired difference mean(a) - mean(b) of 0/1 answers on the same items by :data:`PIXELS_METHOD`
    (the pixels effect's interval). One video: the whole range (no spread between videos seen)."""
    n = len(a)
    if n == 0:
        return NAN_INTERVAL
    d = a - b
    sums, counts = per_video(d.reshape(-1, 1), cluster, n_clusters)
    keep = counts > 0
    se, df = cr2(sums[keep, 0], counts[keep])
    var_iid = float(d.var(ddof=1)) / n if n > 1 else 0.0
    # no answer differing: nothing shows a clustering, deff 1
    deff = max(1.0, se * se / var_iid) if var_iid > 0 else 1.0
    t = np.array([t_quantile(alpha / 2.0, df)])
    disc = [np.array([float(x)]) for x in (((a == 1) & (b == 0)).sum(), ((a == 0) & (b == 1)).sum())]
    lo, hi = tango_bounds(disc[0] / deff, disc[1] / deff, np.array([n / deff]), t)
    return Interval(round(float(d.mean()), 6), round(float(lo[0]), 6), round(float(hi[0]), 6), n, int(keep.sum()))


def max_effect_interval(hi: Array, lo: Array, cluster: npt.NDArray[np.int64], n_clusters: int,
                        alpha: float = 0.05) -> tuple[Interval, list[Interval]]:
    """``max_h mean(hi[:, h]) - mean(lo)`` over ``H`` rungs: the lower bound is the max of the rungs'
    lower bounds at level ``1 - alpha / H`` (Bonferroni: when all hold, the max difference is above
    it), the upper bound the max of the rungs' upper bounds at ``1 - alpha`` each (the max is below
    it whenever the bound of the rung attaining it holds; see the module doc). Returns that interval
    and the rungs' Bonferroni intervals."""
    h = hi.shape[1]
    rungs = [difference_interval(hi[:, k], lo, cluster, n_clusters, alpha, h) for k in range(h)]
    uppers = rungs if h == 1 else [difference_interval(hi[:, k], lo, cluster, n_clusters, alpha) for k in range(h)]
    best = max(rungs, key=lambda r: r.est)
    return Interval(best.est, max(r.lo for r in rungs), max(r.hi for r in uppers), best.n, best.n_videos), rungs


# --- the permutation test ---

def max_contrast(col_means: Array) -> Array:
    """max over the leading columns minus the last column (along the last axis)."""
    return np.asarray(col_means[..., :-1].max(axis=-1) - col_means[..., -1], dtype=np.float64)


def permutation_pvalue(sums: Array, n_items: float, n_perm: int, rng: np.random.Generator,
                       chunk: int = 250) -> float:
    """One-sided p-value of ``max_h mean(h) - mean(last)`` from V x K per-video sums (columns: the
    high rungs, then the base condition last), permuting each video's K column labels together."""
    v, k = sums.shape
    if v == 0 or k < 2:
        return 1.0
    observed = float(max_contrast(sums.sum(axis=0) / n_items))
    hits, done = 0, 0
    tol = 1e-9 / max(n_items, 1.0)
    while done < n_perm:
        b = min(chunk, n_perm - done)
        perm = np.argsort(rng.random((b, v, k)), axis=2)
        permuted = np.take_along_axis(np.broadcast_to(sums, (b, v, k)), perm, axis=2).sum(axis=1) / n_items
        hits += int((max_contrast(permuted) >= observed - tol).sum())
        done += b
    return (1 + hits) / (n_perm + 1)
