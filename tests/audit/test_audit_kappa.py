"""Kappa on a handful of items: the undefined resamples are counted, and the interval never
claims certainty from one shared removal."""

from __future__ import annotations

import numpy as np

from benchcheck.audit.agreement import agreement, posterior_interval
from benchcheck.stats.source import Forwards


def _rows(removed: list[bool], model: str, videos: list[str] | None = None) -> list[Forwards]:
    ident = (0, 1, 2, 3)
    return [Forwards(1, "K", f"i{i}", model, 0, (ident,), ((0.0, -1.0, -1.0, -1.0),), r,
                     video=videos[i] if videos else f"v{i}") for i, r in enumerate(removed)]


def test_one_shared_removal_on_five_items() -> None:
    a = agreement(1, "K", _rows([True, False, False, False, False], "A"),
                  _rows([True, False, False, False, False], "B"), boot=1000, seed=0)
    assert a.kappa == 1.0 and len(a.both) == 1
    # The former interval: the resamples that draw the shared removal give 1, the others (about
    # (4/5)^5 = 33 %) are undefined and were dropped, so it read [1, 1].
    assert a.boot_lo == a.boot_hi == 1.0
    assert 250 < a.boot_undefined < 420 and a.boot == 1000
    assert a.lo is not None and a.hi is not None
    # the posterior alone tops out below the estimate (0.99); the interval holds the estimate and
    # is wide: not [1, 1]
    assert a.hi == 1.0 and a.lo < 0.3
    rec = a.record()
    assert rec["boot_undefined"] == a.boot_undefined and rec["kappa_hi"] == round(a.hi, 4)
    assert rec["pabak"] == 1.0


def test_interval_covers_on_small_tables() -> None:
    # Population kappa 0.6 at prevalence 0.3, 20 items: the interval holds it in >= 85 % of 200 seeds.
    pi, kap = 0.3, 0.6
    p = [pi * pi + kap * pi * (1 - pi), pi * (1 - pi) * (1 - kap), pi * (1 - pi) * (1 - kap),
         (1 - pi) ** 2 + kap * pi * (1 - pi)]
    rng = np.random.default_rng(0)
    hit = 0
    for s in range(200):
        c = rng.choice(4, 20, p=p)
        ab = posterior_interval((c == 0) | (c == 1), (c == 0) | (c == 2), seed=s, draws=1000)
        assert ab is not None
        hit += ab[0] <= kap <= ab[1]
    assert hit >= 170


def test_items_of_one_video_widen_the_interval() -> None:
    ra = [True] * 10 + [False] * 30
    rb = [True] * 8 + [False] * 32
    apart = agreement(1, "K", _rows(ra, "A"), _rows(rb, "B"))
    videos = [f"v{i // 10}" for i in range(40)]  # four videos of ten items
    together = agreement(1, "K", _rows(ra, "A", videos), _rows(rb, "B", videos))
    assert apart.kappa == together.kappa and apart.videos == 40 and together.videos == 4
    assert together.deff > 1.0
    assert apart.lo is not None and together.lo is not None and apart.hi is not None and together.hi is not None
    assert together.hi - together.lo > apart.hi - apart.lo


def test_the_interval_holds_the_estimate_and_still_covers() -> None:
    # Population kappa 0.9 at prevalence 0.1: the posterior alone put the sample kappa outside its
    # interval in 173 of 269 defined 20-item tables and 123 of 300 50-item ones (measured); widened
    # to hold it, never, and the coverage of the population kappa stays >= 0.9 (measured 0.92-0.94;
    # 300 tables: Monte Carlo sd 0.015).
    pi, kap = 0.1, 0.9
    p = [pi * pi + kap * pi * (1 - pi), pi * (1 - pi) * (1 - kap), pi * (1 - pi) * (1 - kap),
         (1 - pi) ** 2 + kap * pi * (1 - pi)]
    for n in (20, 50):
        rng = np.random.default_rng(n)
        covered = 0
        runs = 300
        for s in range(runs):
            c = rng.choice(4, n, p=p)
            removed = [bool(x) for x in (c == 0) | (c == 1)]
            other = [bool(x) for x in (c == 0) | (c == 2)]
            a = agreement(1, "K", _rows(removed, "A"), _rows(other, "B"), boot=1, seed=s)
            assert a.lo is not None and a.hi is not None
            if a.kappa is not None:
                assert a.lo <= a.kappa <= a.hi
            covered += a.lo <= kap <= a.hi
        assert covered / runs >= 0.88, (n, covered / runs)
