"""Expected calibration error of claimed flip probabilities, and the claims and re-asks of constructed
worlds it is taken over (``benchmarks.audit_calibration``'s), shared by the confidence tests."""

from __future__ import annotations

import numpy as np
from benchmarks.audit_calibration import ece_table, reask_claims

from benchcheck.audit.worlds import WorldSpec


def ece(claimed: np.ndarray, flipped: np.ndarray) -> float:
    """Mean over the bins of |claimed - observed|, weighted by the decisions in each."""
    return ece_table(claimed, flipped)[0]


def claimed_and_flipped(spec: WorldSpec, seeds: int) -> tuple[np.ndarray, np.ndarray]:
    """Each decision's claimed flip probability and whether a fresh re-ask flipped it, over worlds
    of seeds 0..seeds-1 (a single-forward step takes its noise from the same model's step 1)."""
    claimed: list[float] = []
    flipped: list[bool] = []
    for w, cs in reask_claims(spec, seeds):
        for c in cs:
            assert c.flip_prob is not None
            claimed.append(c.flip_prob)
            flipped.append(w.reask_removed[c.item_id] != c.removed)
    return np.array(claimed), np.array(flipped)
