"""The profile's chance baseline from the letter prior x gold positions, and intervals clustered
by video (profile, threshold curves, pool_summary)."""

from __future__ import annotations

import csv
import random
from pathlib import Path

from audit_synth import SimModel, make_items, run_step

from benchcheck.audit.profile import accuracy, profile
from benchcheck.audit.sensitivity import threshold_curves
from benchcheck.audit.worlds import WorldSpec, build_world, log_prior
from benchcheck.screen.assemble import assemble
from benchcheck.screen.context import make_context
from benchcheck.stats.cluster import mean_interval, rate_interval, t975

NOISE = WorldSpec(n=300, k=4, multi=False, shortcut_share=0.0, gold_dist=[0.7, 0.1, 0.1, 0.1],
                  prior=log_prior([0.5, 0.5 / 3, 0.5 / 3, 0.5 / 3]), videos=100, video_sd=0.3, video_gold_share=0.3)


def test_noise_with_skewed_golds_has_no_options_only_gap() -> None:
    covered = excluded_by_one_over_k = 0
    for seed in range(10):
        w = build_world(NOISE, seed)
        (g,) = [g for g in profile({4: w.rows}, seed=seed) if g.name == "options_only_gap"]
        assert g.lo is not None and g.hi is not None and g.baseline is not None
        assert g.videos == 100 and g.items == 300
        covered += g.lo <= 0.0 <= g.hi
        # 1/k calls the model's preference for the golds' favourite letter a shortcut
        _, lo_k, _ = mean_interval([accuracy(f) - 0.25 for f in w.rows], [f.video for f in w.rows])
        excluded_by_one_over_k += lo_k is not None and lo_k > 0.0
    assert covered >= 9 and excluded_by_one_over_k >= 8


def test_a_real_shortcut_still_shows() -> None:
    spec = WorldSpec(n=300, k=4, multi=False, shortcut_share=0.3, gold_dist=[0.6, 0.15, 0.15, 0.1],
                     prior=log_prior([0.4, 0.2, 0.2, 0.2]), videos=60)
    w = build_world(spec, 1)
    (g,) = [g for g in profile({4: w.rows}) if g.name == "options_only_gap"]
    assert g.lo is not None and g.lo > 0.1


def test_clustered_intervals() -> None:
    # 100 items in 2 videos, all removed: not [1, 1], and far wider than 100 independent items
    lo, hi = rate_interval([True] * 100, ["a"] * 50 + ["b"] * 50)
    assert lo is not None and hi == 1.0 and lo < 0.35
    lo_iid, _ = rate_interval([True] * 100, [str(i) for i in range(100)])
    assert lo_iid is not None and lo_iid > 0.95
    # a rate of one half, within-video identical: the effective size is the number of videos
    lo, hi = rate_interval([True] * 50 + [False] * 50, [str(i // 10) for i in range(100)])
    assert lo is not None and hi is not None and hi - lo > 0.4
    m, lo, hi = mean_interval([0.25] * 40, [str(i // 10) for i in range(40)], se_floor=0.05)
    assert m == 0.25 and lo is not None and hi is not None and abs(hi - lo - 2 * t975(3) * 0.05) < 1e-12
    assert mean_interval([0.1, 0.2], ["one", "one"])[1] is None


def test_threshold_curves_and_pool_summary_carry_intervals(tmp_path: Path) -> None:
    w = build_world(NOISE, 3)
    rows = threshold_curves({4: w.rows}, thresholds=(0.5,))
    (r,) = rows
    assert r["rate_lo"] is not None and r["rate_hi"] is not None
    assert float(str(r["rate_lo"])) <= float(str(r["rate"])) <= float(str(r["rate_hi"]))
    rng = random.Random(0)
    items = make_items("Pool", 60, 4, rng)
    content = {it.item_id: [rng.gauss(0, 1.5) for _ in range(4)] for it in items}
    run_step(tmp_path, 1, items, SimModel("m", noise=0.4), content)
    assemble(make_context(items, tmp_path, (1,), None, None))
    (s,) = list(csv.DictReader((tmp_path / "pool_summary.csv").open()))
    assert float(s["removal_lo"]) <= float(s["removal_rate"]) <= float(s["removal_hi"])
    assert float(s["removal_hi"]) > float(s["removal_lo"])
