"""Expected calibration error of claimed flip probabilities, shared by the confidence tests."""

from __future__ import annotations

import itertools

import numpy as np

BINS = (0.0, 0.01, 0.05, 0.1, 0.2, 0.3, 0.5, 1.0001)


def ece(claimed: np.ndarray, flipped: np.ndarray) -> float:
    """Mean over ``BINS`` of |claimed - observed|, weighted by the decisions in each."""
    out = 0.0
    for a, b in itertools.pairwise(BINS):
        sel = (claimed >= a) & (claimed < b)
        if sel.any():
            out += sel.mean() * abs(claimed[sel].mean() - flipped[sel].mean())
    return out
