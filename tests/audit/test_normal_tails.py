"""``stats.normal``: both tails from one evaluation, each as its own function gives it."""

from __future__ import annotations

import math

import numpy as np

from benchcheck.stats.normal import norm_cdf, norm_sf, norm_tails


def test_tails_match_the_single_functions_and_stay_tails() -> None:
    x = np.array([-40.0, -8.0, -1.0, 0.0, 0.5, 3.0, 9.0, 40.0])
    cdf, sf = norm_tails(x)
    assert np.allclose(cdf, norm_cdf(x), rtol=1e-12, atol=1e-7)
    assert np.allclose(sf, norm_sf(x), rtol=1e-12, atol=1e-7)
    # far tails are numbers, not 0 or 1 - 1.0
    assert 0 < cdf[1] < 1e-14 and 0 < sf[6] < 1e-18
    assert math.isclose(float(sf[6]), 0.5 * math.erfc(9.0 / math.sqrt(2.0)), rel_tol=1e-6)
    assert np.allclose(cdf + sf, 1.0, atol=1e-12)
