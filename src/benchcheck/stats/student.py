"""Student's t distribution without scipy (not a dependency): its upper tail and quantile at any
real number of degrees of freedom, through the regularized incomplete beta function (Lentz's
continued fraction, Numerical Recipes' ``betacf``). The clustered intervals take fractional
degrees of freedom (Satterthwaite's, ``stats.cluster.cr2``): a quantile at the exact value, not a
table's row below it, so an interval does not jump when one item more or less moves the degrees of
freedom across a whole number.
"""

from __future__ import annotations

import functools
import math


def _betacf(a: float, b: float, x: float) -> float:
    tiny, qab, qap, qam = 1e-300, a + b, a + 1.0, a - 1.0
    c, d = 1.0, 1.0 - qab * x / qap
    d = 1.0 / (d if abs(d) > tiny else tiny)
    h = d
    for m in range(1, 400):
        m2 = 2 * m
        aa = m * (b - m) * x / ((qam + m2) * (a + m2))
        d = 1.0 + aa * d
        d = 1.0 / (d if abs(d) > tiny else tiny)
        c = 1.0 + aa / c
        c = c if abs(c) > tiny else tiny
        h *= d * c
        aa = -(a + m) * (qab + m) * x / ((a + m2) * (qap + m2))
        d = 1.0 + aa * d
        d = 1.0 / (d if abs(d) > tiny else tiny)
        c = 1.0 + aa / c
        c = c if abs(c) > tiny else tiny
        delta = d * c
        h *= delta
        if abs(delta - 1.0) < 1e-14:
            break
    return h


def _betainc(a: float, b: float, x: float) -> float:
    """Regularized incomplete beta I_x(a, b)."""
    if x <= 0.0:
        return 0.0
    if x >= 1.0:
        return 1.0
    lbeta = math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b)
    front = math.exp(lbeta + a * math.log(x) + b * math.log1p(-x))
    if x < (a + 1.0) / (a + b + 2.0):
        return front * _betacf(a, b, x) / a
    return 1.0 - front * _betacf(b, a, 1.0 - x) / b


def t_sf(t: float, df: float) -> float:
    """P(T > t) for Student's t with ``df`` degrees of freedom (t >= 0)."""
    return 0.5 * _betainc(df / 2.0, 0.5, df / (df + t * t))


@functools.lru_cache(maxsize=4096)  # an audit asks the same few (p, df) for every threshold
def t_quantile(p: float, df: float) -> float:
    """The upper quantile: t with P(T > t) = ``p`` (0 < p < 0.5); inf when df < 1."""
    if not df >= 1:  # NaN too: no interval rather than a zero-width one
        return math.inf
    lo, hi = 0.0, 1.0
    while t_sf(hi, df) > p:
        hi *= 2.0
        if hi > 1e12:
            return math.inf
    for _ in range(200):
        mid = 0.5 * (lo + hi)
        if t_sf(mid, df) > p:
            lo = mid
        else:
            hi = mid
        if hi - lo < 1e-12 * max(1.0, hi):
            break
    return 0.5 * (lo + hi)
