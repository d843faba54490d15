"""The standard normal's density and tails, vectorised, without scipy (not a dependency).

The tails are computed directly (``norm_sf(8)`` is 6e-16, not ``1 - 1.0``), so a flip probability
far out in a tail stays a number that ranks, not a tie at zero. ``erfc`` is the Chebyshev fit of
Numerical Recipes (``erfcc``: fractional error below 1.2e-7 everywhere).
"""

from __future__ import annotations

import math

import numpy as np
from numpy.typing import ArrayLike, NDArray

_SQRT2 = math.sqrt(2.0)
_COEF = (-1.26551223, 1.00002368, 0.37409196, 0.09678418, -0.18628806, 0.27886807, -1.13520398, 1.48851587,
         -0.82215223, 0.17087277)


def _erfc_abs(z: NDArray[np.float64]) -> NDArray[np.float64]:
    """erfc(|z|): the one fit both tails are taken from."""
    z = np.abs(z)
    t = 1.0 / (1.0 + 0.5 * z)
    poly = np.zeros_like(z)
    for c in reversed(_COEF):
        poly = poly * t + c
    out: NDArray[np.float64] = t * np.exp(-z * z + poly)
    return out


def erfc(x: ArrayLike) -> NDArray[np.float64]:
    xs = np.asarray(x, dtype=np.float64)
    ans = _erfc_abs(xs)
    out: NDArray[np.float64] = np.where(xs >= 0, ans, 2.0 - ans)
    return out


def norm_tails(x: ArrayLike) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """(P(Z <= x), P(Z > x)) from one evaluation of the fit, each as ``norm_cdf`` and ``norm_sf``
    give it."""
    xs = np.asarray(x, dtype=np.float64)
    small = 0.5 * _erfc_abs(xs / _SQRT2)  # the tail beyond |x|
    big = 1.0 - small
    upper = xs >= 0
    return np.where(upper, big, small), np.where(upper, small, big)


def norm_cdf(x: ArrayLike) -> NDArray[np.float64]:
    """P(Z <= x)."""
    return 0.5 * erfc(-np.asarray(x, dtype=np.float64) / _SQRT2)


def norm_sf(x: ArrayLike) -> NDArray[np.float64]:
    """P(Z > x), accurate far into the upper tail."""
    return 0.5 * erfc(np.asarray(x, dtype=np.float64) / _SQRT2)


def norm_pdf(x: ArrayLike) -> NDArray[np.float64]:
    z = np.asarray(x, dtype=np.float64)
    out: NDArray[np.float64] = np.exp(-0.5 * z * z) / math.sqrt(2.0 * math.pi)
    return out


def mills_lower(z: ArrayLike) -> NDArray[np.float64]:
    """phi(z) / Phi(z): the mean shift of a normal truncated to values below ``z`` (in sd units).
    Far in the lower tail the ratio tends to -z; the clip keeps 0/0 away."""
    zz = np.maximum(np.asarray(z, dtype=np.float64), -35.0)
    out: NDArray[np.float64] = norm_pdf(zz) / np.maximum(norm_cdf(zz), 1e-300)
    return out
