"""Two options: the gold's margin and its lead are one number, so the noise's covariance has rank
1. The per-item noise scale (decision 122) first inverted it and stopped the audit with
"Singular matrix"; the spread is now taken over the directions that carry noise."""

from __future__ import annotations

import numpy as np
import pytest
from calibration_helpers import claimed_and_flipped, ece

from benchcheck.audit.worlds import WorldSpec, build_world
from benchcheck.stats.confidence import _points, noise_cov, residual_spread


@pytest.mark.parametrize("noise_sds", [(), (0.2, 1.0)])
@pytest.mark.parametrize("multi", [True, False])
def test_two_options_get_calibrated_confidences(multi: bool, noise_sds: tuple[float, ...]) -> None:
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
