"""Per-item confidence when the noise is small beside the spread of the items (worlds of known
truth, claimed flip probability against a fresh re-ask): each item keeps its own position.

The former posterior, over grid points and the mean margin alone, put an item with a clearly
positive lead on a neighbouring point with another lead when the grid's step was wider than the
noise: at noise sd 0.03 its expected calibration error was 0.07-0.08, and decisions claimed to flip
with probability 0.5 flipped 4 % of the time (docs/audit.md, "Validity at the edges")."""

from __future__ import annotations

import pytest
from calibration_helpers import claimed_and_flipped, ece

from benchcheck.audit.worlds import WorldSpec


@pytest.mark.parametrize("multi", [True, False])
@pytest.mark.parametrize("noise", [0.1, 0.03])
def test_calibrated_when_the_noise_is_small(multi: bool, noise: float) -> None:
    cl, ob = claimed_and_flipped(WorldSpec(n=600, k=4, noise_sd=noise, multi=multi), seeds=2)
    assert ece(cl, ob) < 0.03
    assert abs(cl.mean() - ob.mean()) < 0.01  # as many flips claimed as happen
    doubtful = cl >= 0.3
    assert doubtful.sum() >= 5
    assert abs(cl[doubtful].mean() - ob[doubtful].mean()) < 0.25
