"""Gauss-Legendre quadrature on [-1, 1], by Newton's method on the Legendre recurrence.

numpy's ``leggauss`` finds the nodes as eigenvalues of the Jacobi matrix (LAPACK through
OpenBLAS). With OpenBLAS's threads on a machine whose cores are busy, that one small call can
take minutes (its idle threads spin for a core they do not get: a report's worker processes
importing this while a sweep decoded on every core). Newton's method on the three-term
recurrence is element-wise numpy only: no BLAS, the same nodes and weights to rounding.
"""

from __future__ import annotations

import functools
import math

import numpy as np

_MAX_ROUNDS = 100


@functools.cache
def gauss_legendre(n: int) -> tuple[np.ndarray, np.ndarray]:
    """(nodes ascending, weights) of the ``n``-point rule, as ``numpy.polynomial.legendre.leggauss``
    returns them. Read-only arrays (the result is cached)."""
    if n < 1:
        raise ValueError(f"a Gauss-Legendre rule needs at least one node, not {n}")
    k = np.arange(1, n + 1, dtype=np.float64)
    x = np.cos(math.pi * (k - 0.25) / (n + 0.5))  # each root's classic first guess, descending
    for _ in range(_MAX_ROUNDS):
        p, dp = _legendre(n, x)
        step = p / dp
        x = x - step
        if np.max(np.abs(step)) < 1e-15:
            break
    p, dp = _legendre(n, x)
    w = 2.0 / ((1.0 - x * x) * dp * dp)
    nodes, weights = x[::-1].copy(), w[::-1].copy()
    nodes.flags.writeable = False
    weights.flags.writeable = False
    return nodes, weights


def _legendre(n: int, x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(P_n(x), P_n'(x)) by the three-term recurrence."""
    p_prev, p = np.ones_like(x), x.copy()
    for j in range(2, n + 1):
        p_prev, p = p, ((2 * j - 1) * x * p - (j - 1) * p_prev) / j
    dp = n * (x * p - p_prev) / (x * x - 1.0)
    return p, dp
