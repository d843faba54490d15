"""Intervals for per-benchmark rates and means with the video as the unit of resampling.

Items of one video share what the model sees and often their answer position, so they are not
independent: an interval over items claims more than the data hold. Both intervals here use the
cluster-robust (CR1) variance of the mean over videos.

- ``rate_interval``: a Wilson score interval at the effective sample size ``n / deff``, where
  ``deff`` is the clustered variance over the binomial one (``design_effect``), with the t
  quantile on videos - 1 degrees of freedom in place of z (the clustered variance of few videos
  is itself uncertain). Never zero-width; a rate of 0 or 1 is taken at the worst case (as many
  items as videos).
- ``mean_interval``: mean +- t(0.975, videos - 1) x the clustered standard error, with a floor on
  the standard error (``se_floor``, the caller's binomial one) so identical clusters never give a
  zero-width interval; None with fewer than two videos.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

Z975 = 1.959963984540054
# Student t 0.975 quantiles for 1..30 degrees of freedom
_T975 = (12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179, 2.160, 2.145, 2.131,
         2.120, 2.110, 2.101, 2.093, 2.086, 2.080, 2.074, 2.069, 2.064, 2.060, 2.056, 2.052, 2.048, 2.045, 2.042)


def t975(df: int) -> float:
    if df <= 0:
        return math.inf
    if df <= len(_T975):
        return _T975[df - 1]
    z = Z975  # Cornish-Fisher beyond the table (error < 1e-3)
    return z + (z**3 + z) / (4 * df) + (5 * z**5 + 16 * z**3 + 3 * z) / (96 * df**2)


def _cluster_sums(y: np.ndarray, clusters: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
    _, inv = np.unique(np.asarray(clusters, dtype=object).astype(str), return_inverse=True)
    g = int(inv.max()) + 1 if len(inv) else 0
    return np.bincount(inv, weights=y, minlength=g), np.bincount(inv, minlength=g).astype(np.float64)


def clustered_se(y: np.ndarray, clusters: Sequence[str]) -> float:
    """CR1 standard error of mean(y) with the given clusters (0 with one cluster)."""
    n = len(y)
    sums, sizes = _cluster_sums(y, clusters)
    g = len(sums)
    if g < 2:
        return 0.0
    resid = sums - y.mean() * sizes
    return math.sqrt(g / (g - 1) * float((resid**2).sum())) / n


def design_effect(y: np.ndarray, clusters: Sequence[str]) -> float:
    """Clustered variance of mean(y) over the independent one (at least 1); where y does not vary,
    the worst case, items per video."""
    n = len(y)
    if n == 0:
        return 1.0
    g = len(set(clusters))
    var_iid = float(y.var(ddof=1)) / n if n > 1 else 0.0
    if var_iid <= 0.0:
        return n / max(g, 1)
    return max(1.0, clustered_se(y, clusters) ** 2 / var_iid)


def wilson(successes: float, n: float, z: float = Z975) -> tuple[float, float]:
    if n <= 0:
        return 0.0, 1.0
    p = successes / n
    den = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / den
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / den
    return max(0.0, centre - half), min(1.0, centre + half)


def rate_interval(hits: Sequence[bool] | np.ndarray, clusters: Sequence[str]) -> tuple[float | None, float | None]:
    """Wilson interval of a rate at the effective sample size (module docstring)."""
    y = np.asarray(hits, dtype=np.float64)
    if len(y) == 0:
        return None, None
    n_eff = len(y) / design_effect(y, clusters)
    return wilson(float(y.mean()) * n_eff, n_eff, t975(max(len(set(clusters)) - 1, 1)))


def mean_interval(values: Sequence[float] | np.ndarray, clusters: Sequence[str], se_floor: float = 0.0,
                  extra_var: float = 0.0) -> tuple[float | None, float | None, float | None]:
    """(mean, lo, hi) clustered by video (module docstring); ``extra_var`` adds an independent
    source of error to the mean's variance (the profile's: the chance baseline's own)."""
    y = np.asarray(values, dtype=np.float64)
    if len(y) == 0:
        return None, None, None
    g = len(set(clusters))
    if g < 2:
        return float(y.mean()), None, None
    half = t975(g - 1) * math.sqrt(max(clustered_se(y, clusters), se_floor) ** 2 + extra_var)
    return float(y.mean()), float(y.mean() - half), float(y.mean() + half)
