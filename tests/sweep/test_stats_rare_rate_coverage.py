"""A rare rate's video-clustered interval covers the known truth (decision 126).

Per-video rate Beta with mean p and intra-class correlation 0.3, equal videos. Rare outcomes then
sit in a handful of videos, and in the runs where they happen to fall one or two a video the data
look independent: the design effect comes out near 1 while the Satterthwaite df stays at videos - 1.
The former interval (Wilson at n / deff, t on that df) covered p = 0.02 over 30 videos of 30 items
in 82.6 % of 2,000 runs and p = 0.05 over 10 videos of 30 in 86.2 %; capping the df at one more
than the videos carrying the rarer outcome (``stats.cluster.carrying_videos``): 95.8 % and 95.8 %
(``python -m benchmarks.rare_rate_interval``). Here, 1,000 runs of one seed each (Monte Carlo sd
about 0.007): 84.0 / 86.1 / 85.3 % before the cap, 96.1 / 96.4 / 95.9 % with it."""

from __future__ import annotations

import numpy as np
import pytest

from benchcheck.stats.cluster import carrying_videos, clustered_wilson, rate_interval, wilson
from benchcheck.stats.student import t_quantile
from benchcheck.sweep.verdict_stats import accuracy_interval


@pytest.mark.parametrize(("p", "videos", "per"), [(0.02, 30, 30), (0.05, 10, 30), (0.98, 30, 30)])
def test_a_rare_clustered_rate_is_covered_near_nominal(p: float, videos: int, per: int) -> None:
    icc, runs = 0.3, 1000
    cl = np.repeat(np.arange(videos), per)
    names = [f"v{c}" for c in cl]
    covered = covered_acc = 0
    for seed in range(runs):
        rng = np.random.default_rng(seed)
        q = rng.beta(p * (1 - icc) / icc, (1 - p) * (1 - icc) / icc, videos)[cl]
        y = (rng.random(len(cl)) < q).astype(np.float64)
        lo, hi = rate_interval(y, names)  # the audit's removal rate
        assert lo is not None and hi is not None and lo <= float(y.mean()) <= hi
        covered += lo <= p <= hi
        iv = accuracy_interval(y, cl, videos)  # the sweep's accuracy: the same rule
        covered_acc += iv.lo <= p <= iv.hi
    assert covered / runs >= 0.93, covered / runs
    assert covered_acc / runs >= 0.93, covered_acc / runs


def test_one_item_videos_count_in_full() -> None:
    # 1 wrong answer of 20, a video each: nothing can cluster, so the interval is the Wilson
    # interval on t(19), not on t(2) as one carrying video would give.
    y = np.ones(20)
    y[3] = 0.0
    sums, sizes = y.copy(), np.ones(20)
    assert carrying_videos(sums, sizes) >= 20
    assert clustered_wilson(y, sums, sizes) == pytest.approx(wilson(19.0, 20.0, t_quantile(0.025, 19.0)))


def test_the_cap_counts_the_videos_holding_the_rarer_outcome() -> None:
    sums = np.array([1.0, 1.0, 1.0] + [0.0] * 27)
    sizes = np.full(30, 30.0)
    assert carrying_videos(sums, sizes) == pytest.approx(3.0)  # three errors, three videos
    assert carrying_videos(np.array([3.0] + [0.0] * 29), sizes) == pytest.approx(1.0)
    assert carrying_videos(np.zeros(30), sizes) == pytest.approx(30.0)  # none: the other outcome
