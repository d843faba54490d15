"""Two options: the gold's margin and its lead are one number, so the noise's covariance has rank
1. The per-item noise scale (decision 122) first inverted it and stopped the audit with
"Singular matrix"; the spread is now taken over the directions that carry noise."""

from __future__ import annotations

import dataclasses
import warnings

import numpy as np
import pytest
from calibration_helpers import claimed_and_flipped, ece

from benchcheck.audit.worlds import WorldSpec, build_world
from benchcheck.stats.confidence import _points, confidences, noise_cov, residual_spread


@pytest.mark.parametrize("noise_sds", [(), (0.2, 1.0)])
@pytest.mark.parametrize("multi", [True, False])
def test_two_options_get_calibrated_confidences(multi: bool, noise_sds: tuple[float, ...]) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no numpy warning reaches a user
        cl, ob = claimed_and_flipped(WorldSpec(n=600, k=2, noise_sd=0.8, noise_sds=noise_sds, multi=multi), seeds=2)
    assert np.isfinite(cl).all()
    assert ece(cl, ob) < 0.035
    assert abs(cl.mean() - ob.mean()) < 0.025


def test_the_spread_has_one_degree_a_replicate_with_two_options() -> None:
    pts = [_points(f) for f in build_world(WorldSpec(n=400, k=2, noise_sd=0.8), 0).rows]
    cov = noise_cov(pts)
    assert cov is not None and abs(np.linalg.det(cov)) < 1e-9 * cov[0, 0] * cov[1, 1]
    q, df = residual_spread(pts, cov)
    assert set(df.tolist()) == {3.0}  # four forwards, one direction
    assert abs(q.sum() / df.sum() - 1.0) < 1e-9  # the pooled covariance is the spread's own unit


def test_two_option_single_forwards_with_their_own_extra_permutations() -> None:
    """A third of the items carry two extra forwards (another world's: only that the estimate runs)."""
    world = build_world(WorldSpec(n=200, k=2, multi=False), 0)
    step1 = build_world(WorldSpec(n=200, k=2, multi=True), 5).rows
    extra = build_world(WorldSpec(n=200, k=2, multi=True), 6).rows
    rows = [dataclasses.replace(f, extra_perms=e.perms[:2], extra_lps=e.lps[:2]) if i % 3 == 0 else f
            for i, (f, e) in enumerate(zip(world.rows, extra, strict=True))]
    out = [c for c in confidences({1: step1, 4: rows}) if c.step == 4]
    assert all(c.flip_prob is not None and 0.0 <= c.flip_prob <= 1.0 for c in out)
