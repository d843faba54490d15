"""Intervals for per-benchmark rates and means with the video as the unit of resampling.

Items of one video share what the model sees and often their answer position, so they are not
independent: an interval over items claims more than the data hold. Both intervals here use the
cluster-robust variance of the mean over videos, CR2 (Bell-McCaffrey: each video's residual sum
divided by ``sqrt(1 - n_v / N)``), with the t quantile on the Satterthwaite degrees of freedom of
that variance under independent items (``cr2``). With videos of equal size this is CR1 with
videos - 1 degrees of freedom; with unequal ones the few large videos carry most of the variance,
the degrees of freedom fall below videos - 1, and CR1 with videos - 1 undercovered (docs/audit.md,
"What it shows", table 5: 0.77-0.88 at 10 videos of log-normal sizes, 0.93-0.97 with CR2).

- ``rate_interval``: a Wilson score interval at the effective sample size ``n / deff``, where
  ``deff`` is the clustered variance over the binomial one (``design_effect``), with the t
  quantile on those degrees of freedom in place of z (the clustered variance of few videos is
  itself uncertain). Never zero-width; a rate of 0 or 1 is taken at the worst case (as many
  items as videos). One video: [0, 1] -- nothing estimates the spread between videos (its items
  taken as independent, the interval undercovered; docs/audit.md, table 5). The t quantile's
  degrees of freedom are at most one more than the number of videos carrying the rarer outcome
  (``carrying_videos``): a rare rate's clustered variance rests on those videos alone.
- ``mean_interval``: mean +- t(0.975, df) x the clustered standard error, with a floor on the
  standard error (``se_floor``, the caller's binomial one) so identical clusters never give a
  zero-width interval, clipped to ``bounds`` (the range the mean can take: with 2 videos t is 12.7
  and an accuracy difference read [-5.3, +6.1]); None with fewer than two videos.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from benchcheck.stats.student import t_quantile

Z975 = 1.959963984540054


def t975(df: float) -> float:
    """The 0.975 quantile of Student t at ``df`` degrees of freedom, fractional ones as they are
    (``stats.student``); inf below one."""
    return t_quantile(0.025, df)


def _cluster_sums(y: np.ndarray, clusters: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
    _, inv = np.unique(np.asarray(clusters, dtype=object).astype(str), return_inverse=True)
    g = int(inv.max()) + 1 if len(inv) else 0
    return np.bincount(inv, weights=y, minlength=g), np.bincount(inv, minlength=g).astype(np.float64)


def cr2(sums: np.ndarray, sizes: np.ndarray) -> tuple[float, float]:
    """(standard error, degrees of freedom) of ``sum(sums) / sum(sizes)`` from per-cluster sums and
    sizes: the CR2 (Bell-McCaffrey) variance ``sum_v (S_v - est n_v)^2 / (1 - n_v / N) / N^2`` and
    the Satterthwaite degrees of freedom ``tr(M)^2 / tr(M^2)`` of that quadratic form under
    independent items of equal variance (``M = sum_v c_v d_v d_v'``, ``d_v`` the residual-maker
    applied to video v's indicator, ``c_v = 1 / (1 - n_v / N)``; closed form for a mean). Equal
    sizes give CR1 and videos - 1 exactly. (0, 0) with fewer than two clusters."""
    g = len(sums)
    n = float(sizes.sum())
    if g < 2 or n <= 0:
        return 0.0, 0.0
    est = float(sums.sum()) / n
    c = 1.0 / np.maximum(1.0 - sizes / n, 1e-12)
    var = float((c * (sums - est * sizes) ** 2).sum()) / (n * n)
    a, u2 = c * sizes, c * sizes**2
    tr = float(a.sum() - u2.sum() / n)
    tr2 = float((a * a).sum() - 2.0 * (a * u2).sum() / n + (u2.sum() / n) ** 2)
    df = tr * tr / tr2 if tr2 > 0 else float(g - 1)
    return math.sqrt(var), min(max(df, 1.0), float(g - 1))


def clustered_se(y: np.ndarray, clusters: Sequence[str]) -> float:
    """CR2 standard error of mean(y) with the given clusters (0 with one cluster; ``cr2``)."""
    return cr2(*_cluster_sums(y, clusters))[0]


def design_effect(y: np.ndarray, clusters: Sequence[str]) -> float:
    """Clustered variance of mean(y) over the independent one (at least 1); where y does not vary,
    the worst case, items per video."""
    return _design_effect(y, clustered_se(y, clusters), len(set(clusters)))


def _design_effect(y: np.ndarray, se: float, videos: int) -> float:
    """``design_effect`` from the clustered standard error ``se`` of mean(y) over ``videos``."""
    n = len(y)
    if n == 0:
        return 1.0
    var_iid = float(y.var(ddof=1)) / n if n > 1 else 0.0
    if var_iid <= 0.0:
        return n / max(videos, 1)
    return max(1.0, se**2 / var_iid)


def wilson(successes: float, n: float, z: float = Z975) -> tuple[float, float]:
    """The Wilson score interval; it holds the rate itself exactly (at 0 of n, ``centre - half``
    is 1e-16 in floating point, not 0)."""
    if n <= 0:
        return 0.0, 1.0
    p = successes / n
    den = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / den
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / den
    return min(max(0.0, centre - half), p), max(min(1.0, centre + half), p)


def rate_interval(hits: Sequence[bool] | np.ndarray, clusters: Sequence[str]) -> tuple[float | None, float | None]:
    """Wilson interval of a rate at the effective sample size (module docstring)."""
    y = np.asarray(hits, dtype=np.float64)
    if len(y) == 0:
        return None, None
    return clustered_wilson(y, *_cluster_sums(y, clusters))


def clustered_wilson(y: np.ndarray, sums: np.ndarray, sizes: np.ndarray, alpha: float = 0.05) -> tuple[float, float]:
    """The two-sided ``1 - alpha`` Wilson interval of mean(y) (0/1 values) at the effective sample
    size, from the per-cluster sums and sizes of y (module docstring, ``rate_interval``)."""
    if len(sizes) < 2:
        return 0.0, 1.0
    se, df = cr2(sums, sizes)
    n_eff = len(y) / _design_effect(y, se, len(sizes))
    df = min(df, carrying_videos(sums, sizes) + 1.0)
    return wilson(float(y.mean()) * n_eff, n_eff, t_quantile(alpha / 2.0, max(df, 1.0)))


def carrying_videos(sums: np.ndarray, sizes: np.ndarray) -> float:
    """How many videos carry the rarer outcome of a 0/1 rate: ``(sum_v k_v)^2 / sum_v k_v^2`` over
    the videos of two items or more, ``k_v`` a video's count of ones (or of zeros, whichever gives
    fewer), plus the videos of one item; inf where one outcome never occurs (the worst-case design
    effect covers that). The clustered variance of a rare rate is estimated from these videos alone
    (the others add only their share of the mean), so it has about that many degrees of freedom,
    whatever the Satterthwaite df under equal item variances says: three errors in three of 30
    videos look independent, and on 29 df the interval missed a rate of 0.02 far more often than
    5 % when the videos' rates were correlated (decision 126). A one-item video has no spread
    within it to hide, so each counts in full, whatever it holds."""
    best = math.inf
    multi = sizes > 1
    single = float((~multi).sum())
    for k in (sums, sizes - sums):
        if float(k.sum()) <= 0:
            continue
        km = k[multi]
        total, sq = float(km.sum()), float((km * km).sum())
        best = min(best, (total * total / sq if sq > 0 else 0.0) + single)
    return best


def mean_interval(values: Sequence[float] | np.ndarray, clusters: Sequence[str], se_floor: float = 0.0,
                  extra_var: float = 0.0, bounds: tuple[float, float] = (-math.inf, math.inf),
                  ) -> tuple[float | None, float | None, float | None]:
    """(mean, lo, hi) clustered by video (module docstring); ``extra_var`` adds an independent
    source of error to the mean's variance (the profile's: the chance baseline's own); the interval
    is clipped to ``bounds``, the range the mean can take."""
    y = np.asarray(values, dtype=np.float64)
    if len(y) == 0:
        return None, None, None
    g = len(set(clusters))
    if g < 2:
        return float(y.mean()), None, None
    se, df = cr2(*_cluster_sums(y, clusters))
    half = t975(df) * math.sqrt(max(se, se_floor) ** 2 + extra_var)
    m = float(y.mean())
    return m, max(bounds[0], m - half), min(bounds[1], m + half)
