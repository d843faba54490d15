"""Coverage of a rate's video-clustered interval near 0 and 1 (decision 126)

    python -m benchmarks.rare_rate_interval [--runs 2000] [--seed 12345] [--only rare]

Known truth: per-video rate Beta with mean p and intra-class correlation ICC (alpha + beta =
1 / ICC - 1; ICC 0: every video at p), V videos of n items (or log-normal(0, 1) sizes scaled to
V x n items), hits binomial. For each cell, the share of runs whose interval holds p and the mean
width, for the product's ``stats.cluster.clustered_wilson`` (the sweep's accuracy and the audit's
removal rate) and for the former rule (the same Wilson interval at the effective sample size, t on
the Satterthwaite df alone, without the cap at the videos carrying the rarer outcome).
"""

from __future__ import annotations

import argparse
import itertools

import numpy as np

from benchcheck.stats.cluster import _design_effect, clustered_wilson, cr2, wilson
from benchcheck.stats.student import t_quantile

GRID = list(itertools.product((False, True), (10, 30), (10, 30), (0.0, 0.1, 0.3), (0.02, 0.05, 0.1, 0.3, 0.5)))


def former(y: np.ndarray, sums: np.ndarray, sizes: np.ndarray) -> tuple[float, float]:
    se, df = cr2(sums, sizes)
    n_eff = len(y) / _design_effect(y, se, len(sizes))
    return wilson(float(y.mean()) * n_eff, n_eff, t_quantile(0.025, max(df, 1.0)))


def cell(p: float, icc: float, videos: int, per: int, unequal: bool, runs: int,
         rng: np.random.Generator) -> tuple[float, float, float, float]:
    if unequal:
        w = rng.lognormal(0.0, 1.0, (runs, videos))
        sizes = np.maximum(1, np.round(w / w.sum(1, keepdims=True) * videos * per))
    else:
        sizes = np.full((runs, videos), float(per))
    rates = (np.full((runs, videos), p) if icc == 0 else
             rng.beta(p * (1 - icc) / icc, (1 - p) * (1 - icc) / icc, (runs, videos)))
    sums = rng.binomial(sizes.astype(np.int64), rates).astype(np.float64)
    cov_new = cov_old = w_new = w_old = 0.0
    for s, m in zip(sums, sizes, strict=True):
        y = np.zeros(int(m.sum()))
        y[: int(s.sum())] = 1.0  # only the mean and variance of y are read, not its order
        for f, acc in ((clustered_wilson, "new"), (former, "old")):
            lo, hi = f(y, s, m)
            if acc == "new":
                cov_new += lo <= p <= hi
                w_new += hi - lo
            else:
                cov_old += lo <= p <= hi
                w_old += hi - lo
    return cov_old / runs, cov_new / runs, w_old / runs, w_new / runs


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--runs", type=int, default=2000)
    ap.add_argument("--seed", type=int, default=12345)
    ap.add_argument("--only", choices=("all", "rare"), default="all")
    args = ap.parse_args()
    print("| sizes | videos | items a video | ICC | p | runs | covered former -> now | mean width former -> now |")
    print("|---|---|---|---|---|---|---|---|")
    low = {"former": 0, "now": 0}
    for i, (unequal, videos, per, icc, p) in enumerate(GRID):
        if args.only == "rare" and not (p <= 0.1 and icc > 0):
            continue
        old, new, wo, wn = cell(p, icc, videos, per, unequal, args.runs, np.random.default_rng(args.seed + i))
        low["former"] += old < 0.93
        low["now"] += new < 0.93
        print(f"| {'log-normal(0, 1)' if unequal else 'equal'} | {videos} | {per} | {icc:g} | {p:g} | {args.runs} | "
              f"{old:.3f} -> {new:.3f} | {wo:.3f} -> {wn:.3f} |", flush=True)
    print(f"cells below 0.93: former {low['former']}, now {low['now']}")


if __name__ == "__main__":
    main()
