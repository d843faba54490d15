"""Expected calibration error of claimed flip probabilities, and the claims and re-asks of constructed
worlds it is taken over, shared by the confidence tests."""

from __future__ import annotations

import dataclasses
import itertools

import numpy as np

from benchcheck.audit.worlds import WorldSpec, build_world
from benchcheck.stats.confidence import confidences

BINS = (0.0, 0.01, 0.05, 0.1, 0.2, 0.3, 0.5, 1.0001)


def ece(claimed: np.ndarray, flipped: np.ndarray) -> float:
    """Mean over ``BINS`` of |claimed - observed|, weighted by the decisions in each."""
    out = 0.0
    for a, b in itertools.pairwise(BINS):
        sel = (claimed >= a) & (claimed < b)
        if sel.any():
            out += sel.mean() * abs(claimed[sel].mean() - flipped[sel].mean())
    return out


def claimed_and_flipped(spec: WorldSpec, seeds: int) -> tuple[np.ndarray, np.ndarray]:
    """Each decision's claimed flip probability and whether a fresh re-ask flipped it, over worlds
    of seeds 0..seeds-1 (a single-forward step takes its noise from the same model's step 1)."""
    claimed: list[float] = []
    flipped: list[bool] = []
    for seed in range(seeds):
        w = build_world(spec, seed)
        by = {w.step: w.rows}
        if not spec.multi:
            by[1] = build_world(dataclasses.replace(spec, multi=True), seed + 1000).rows
        for c in confidences(by):
            if c.step == w.step:
                assert c.flip_prob is not None
                claimed.append(c.flip_prob)
                flipped.append(w.reask_removed[c.item_id] != c.removed)
    return np.array(claimed), np.array(flipped)
