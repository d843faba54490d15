"""How often ``neither`` is called when a true pixels effect sits at the margin but a few videos carry it
(docs/sweep.md, "Effects carried by a few videos").

    PYTHONPATH=src python -m benchmarks.sweep_margin_skew [--runs 2000]

Per-item accuracy ``sigmoid(logit(acc) + u_video + e_item)`` (u, e ~ N(0, 1)); each condition keeps
the item's own answer with probability 0.95, else redraws it; ``v_32_s448`` turns a wrong answer
right with probability ``min(1, d * g_video / (1 - p))``, ``g_video`` ~ Gamma(shape 0.25, mean 1)
(``het`` 2) or 1 (``het`` 0), with ``d`` chosen so that the superpopulation effect is the margin.
Every benchmark goes through ``analysis.bench_verdict`` with default settings.
"""

from __future__ import annotations

import argparse
import math
import time

import numpy as np

from benchcheck.sweep.analysis import BenchTable, Settings, bench_verdict
from benchcheck.sweep.constructed import CONDITIONS
from benchmarks.sweep_validity import share

PIX = CONDITIONS.index("v_32_s448")
CASES = (("equal", 12, 0.6, 2.0), ("log-normal(0, 1)", 30, 0.9, 2.0), ("equal", 30, 0.6, 1.0), ("equal", 300, 0.6, 0.0))


def draw(sizes: str, g: int, acc: float, het: float, d: float, rng: np.random.Generator,
         n: int = 300) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    if sizes == "equal":
        s = np.full(g, n // g)
    else:
        w = rng.lognormal(0, 1.0, g)
        s = np.maximum(1, np.round(w / w.sum() * n)).astype(np.int64)
    vid = np.repeat(np.arange(g), s)
    m = len(vid)
    p = 1 / (1 + np.exp(-(math.log(acc / (1 - acc)) + rng.normal(0, 1, g)[vid] + rng.normal(0, 1, m))))
    mult = rng.gamma(1 / het**2, het**2, g)[vid] if het > 0 else np.ones(m)
    gain = np.minimum(1.0, d * mult / np.maximum(1 - p, 1e-12))
    own = rng.random(m) < p
    right = np.where(rng.random((m, len(CONDITIONS))) < 0.95, own[:, None],
                     rng.random((m, len(CONDITIONS))) < p[:, None])
    right[:, PIX] |= rng.random(m) < gain
    return right.astype(np.int64), vid, np.minimum(1 - p, d * mult)


def true_effect(case: tuple[str, int, float, float], d: float) -> float:
    rng = np.random.default_rng(5)
    return float(np.mean(np.concatenate([draw(*case, d, rng)[2] for _ in range(150)])))


def scale_for(case: tuple[str, int, float, float], target: float) -> float:
    lo, hi = 0.0, 0.25
    for _ in range(25):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if true_effect(case, mid) < target else (lo, mid)
    return (lo + hi) / 2


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=2000)
    args = ap.parse_args()
    s = Settings()
    cpu0 = time.process_time()
    print("| video sizes | videos | accuracy | het | true effect | neither (wrong) [95% CI] | "
          "pixels upper bound < truth |")
    print("|---|---|---|---|---|---|---|")
    for j, case in enumerate(CASES):
        d = scale_for(case, s.margin)
        truth = true_effect(case, d)
        wrong, low = [], []
        for seed in range(args.runs):
            right, vid, _ = draw(*case, d, np.random.default_rng([j, seed]))
            rows = [{"bench": "B", "item_id": f"i{i}", "condition": c, "status": "ok", "correct": str(right[i, k]),
                     "video_id": f"v{vid[i]}"} for k, c in enumerate(CONDITIONS) for i in range(len(vid))]
            v = bench_verdict(BenchTable("B", rows), s)
            wrong.append(v.verdict == "neither")
            low.append(v.pixels is not None and v.pixels.hi < truth)
        print(f"| {case[0]} | {case[1]} | {case[2]:g} | {case[3]:g} | {truth:.4f} | {share(wrong, True)} | "
              f"{share(low)} |", flush=True)
    print(f"\nCPU {time.process_time() - cpu0:.0f} s")


if __name__ == "__main__":
    main()
