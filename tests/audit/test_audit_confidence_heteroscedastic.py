"""Per-item confidence when the items' noise differs (worlds of known truth, claimed flip
probability against a fresh re-ask): each item's noise scale is weighed by its own forwards.

With one pooled noise for every item, half the items at noise sd 0.1 and half at 1.0 gave an
expected calibration error of 0.037 at step 1 and 0.052 for a single forward, and decisions
claimed to flip with probability about 0.49 flipped 27 % of the time (decision 122)."""

from __future__ import annotations

import numpy as np
import pytest
from calibration_helpers import claimed_and_flipped, ece

from benchcheck.audit.worlds import WorldSpec
from benchcheck.stats.confidence import scale_mixture


@pytest.mark.parametrize("multi", [True, False])
def test_calibrated_when_the_items_noise_differs(multi: bool) -> None:
    cl, ob = claimed_and_flipped(WorldSpec(n=600, k=4, noise_sds=(0.1, 1.0), multi=multi), seeds=3)
    assert ece(cl, ob) < 0.025
    assert abs(cl.mean() - ob.mean()) < 0.025
    doubtful = cl >= 0.3
    assert doubtful.sum() >= 40
    assert abs(cl[doubtful].mean() - ob[doubtful].mean()) < 0.08


@pytest.mark.parametrize("seed", range(20))
def test_the_scale_mixture_finds_two_noise_levels(seed: int) -> None:
    """Replicates of 6 degrees of freedom (four forwards, two axes) from scales 0.05 and 2 in
    shares 0.3 / 0.7: the fitted distribution puts those shares below and above their geometric
    mean, its atoms near them."""
    rng = np.random.default_rng(seed)
    truth = np.where(rng.random(600) < 0.3, 0.05, 2.0)
    df = np.full(600, 6.0)
    scales, w = scale_mixture(truth * rng.chisquare(6, 600), df)
    low = scales < np.sqrt(0.05 * 2.0)
    assert abs(w[low].sum() - 0.3) < 0.06
    assert 0.025 < np.exp((w[low] * np.log(scales[low])).sum() / w[low].sum()) < 0.1
    assert 1.0 < np.exp((w[~low] * np.log(scales[~low])).sum() / w[~low].sum()) < 4.0


def test_one_noise_for_all_stays_one_scale_and_few_replicates_fall_back() -> None:
    rng = np.random.default_rng(0)
    scales, w = scale_mixture(rng.chisquare(6, 2000), np.full(2000, 6.0))
    assert abs((w * scales).sum() - 1.0) < 0.1  # the grid's step is 2: the truth 1 falls between atoms
    assert scales[w > 0.05].min() > 0.45 and scales[w > 0.05].max() < 2.2
    one = scale_mixture(np.ones(5), np.full(5, 6.0))  # too few items with replicates
    assert list(one[0]) == [1.0] and list(one[1]) == [1.0]
    assert list(scale_mixture(np.zeros(50), np.zeros(50))[0]) == [1.0]  # single forwards only
