"""The accuracy interval of a condition holds near 0 and 1 when a video's answers are correlated.

10 videos of 30 items, per-video accuracy Beta with mean 0.02 (or 0.98) and ICC 0.3: most videos
have no wrong answer (or no right one), a few many. The former interval, estimate +- t(CR2 df) x
max(CR2 SE, Agresti-Coull SE), is symmetric and covered the true accuracy in 64.7 % of 600 runs
(0.02, ICC 0.3), 76.2 % at 0.05 and 83 % at 0.02 with ICC 0.1 (docs/sweep.md, "At the edges");
the Wilson interval at the effective sample size (``stats.cluster.clustered_wilson``) covers
97.5 %, 85.8 % and 98.0 % there. Monte Carlo sd about 0.01 at 400 runs."""

from __future__ import annotations

import numpy as np
import pytest

from benchcheck.sweep.verdict_stats import accuracy_interval


@pytest.mark.parametrize("p", [0.02, 0.98])
def test_accuracy_interval_covers_near_the_ends_with_correlated_videos(p: float) -> None:
    rng = np.random.default_rng(7)
    icc, videos, per = 0.3, 10, 30
    cl = np.repeat(np.arange(videos), per)
    covered, runs = 0, 400
    for _ in range(runs):
        q = rng.beta(p * (1 - icc) / icc, (1 - p) * (1 - icc) / icc, videos)[cl]
        y = (rng.random(len(cl)) < q).astype(np.float64)
        iv = accuracy_interval(y, cl, videos)
        assert 0.0 <= iv.lo <= iv.est <= iv.hi <= 1.0 and iv.hi > iv.lo
        covered += iv.lo <= p <= iv.hi
    assert covered / runs >= 0.9, covered / runs
