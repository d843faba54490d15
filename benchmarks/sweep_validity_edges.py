"""The sweep's intervals outside the ordinary case (docs/sweep.md, "At the edges")

    python -m benchmarks.sweep_validity_edges [--runs 1500] [--seed 0]

Coverage of the 95 % accuracy interval (``verdict_stats.accuracy_interval``) and of the paired
difference's (``difference_interval``) when one video holds nearly every item ("one big": one video
of n - (V - 1) items and V - 1 videos of one), under log-normal(0, 2) video sizes, and for
benchmarks of 2-20 items. Per-video accuracy is Beta with the stated mean and intra-class
correlation; the higher condition keeps an item's answer with probability 0.8 and otherwise redraws
it, and turns a wrong answer right with probability delta / (1 - p) (p the video's accuracy, capped
at 1, so the true difference is at most delta: coverage of delta is then conservative).
"""

from __future__ import annotations

import argparse

import numpy as np

from benchcheck.sweep.verdict_stats import accuracy_interval, difference_interval

CASES = [("one big", 300, 12, 0.5, 0.3, 0.0), ("one big", 300, 12, 0.5, 0.3, 0.1), ("one big", 300, 30, 0.3, 0.3, 0.1),
         ("log-normal(0, 2)", 300, 10, 0.5, 0.3, 0.1), ("log-normal(0, 2)", 300, 30, 0.5, 0.3, 0.1),
         ("equal", 2, 2, 0.5, 0.3, 0.0), ("equal", 3, 3, 0.5, 0.3, 0.0), ("equal", 5, 5, 0.5, 0.3, 0.0),
         ("equal", 20, 20, 0.1, 0.05, 0.0), ("equal", 20, 20, 0.9, 0.05, 0.05)]


def sizes_of(kind: str, n: int, g: int, rng: np.random.Generator) -> np.ndarray:
    if kind == "equal":
        return np.full(g, n // g)
    if kind == "one big":
        s = np.ones(g, dtype=np.int64)
        s[0] = n - (g - 1)
        return s
    w = rng.lognormal(0, 2.0, g)
    out: np.ndarray = np.maximum(1, np.round(w / w.sum() * n)).astype(np.int64)
    return out


def run(kind: str, n: int, g: int, acc: float, icc: float, delta: float, runs: int, rng: np.random.Generator) -> str:
    a, b = acc * (1 - icc) / icc, (1 - acc) * (1 - icc) / icc
    ca = cd = 0
    wa = wd = 0.0
    for _ in range(runs):
        s = sizes_of(kind, n, g, rng)
        vid = np.repeat(np.arange(len(s)), s)
        pv = rng.beta(a, b, len(s))[vid]
        base = (rng.random(len(vid)) < pv).astype(np.float64)
        hi = np.where(rng.random(len(vid)) < 0.8, base, (rng.random(len(vid)) < pv).astype(np.float64))
        hi[(hi == 0) & (rng.random(len(vid)) < delta / (1 - pv))] = 1.0
        ia = accuracy_interval(base, vid, len(s))
        ca += ia.lo <= acc <= ia.hi
        wa += ia.width
        idf = difference_interval(hi, base, vid, len(s))
        cd += idf.lo <= delta <= idf.hi
        wd += idf.width
    return (f"| {kind} | {n} | {g} | {acc:g} | {icc:g} | {delta:g} | {runs} | {ca / runs:.3f} ({wa / runs:.2f}) | "
            f"{cd / runs:.3f} ({wd / runs:.2f}) |")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--runs", type=int, default=1500)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    rng = np.random.default_rng(args.seed)
    print("| video sizes | items | videos | accuracy | ICC | delta | runs | accuracy covered (mean width) | "
          "difference covered (mean width) |")
    print("|---|---|---|---|---|---|---|---|---|")
    for case in CASES:
        print(run(*case, args.runs, rng), flush=True)


if __name__ == "__main__":
    main()
