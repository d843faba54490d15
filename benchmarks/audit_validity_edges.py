"""The audit's null and confidence outside the ordinary case (docs/audit.md, "Validity at the edges")

    python -m benchmarks.audit_validity_edges [--quick] [--confidence-only]

Worlds as ``benchmarks.audit_validity`` builds them (content opinions N(0, 1.2) unrelated to the
gold and repeated across steps, +0.8 nats of letter prior on A, 15 % of the items answerable blind,
15 % only from the options, step 4 on step 1's survivors), with any number of options k, uniform
golds, and the noise sd per forward as stated (0: a deterministic engine). Tables:

1. coverage of the chance-removal count's 95 % interval for benchmarks of 1-3 items (20 per run,
   each its own cell), 2 and 10 options, and a deterministic engine;
2. false calls on 40 pure-noise cells (20 benchmarks x steps 1 and 4), Benjamini-Hochberg at 0.05;
3. per-item confidence against a fresh re-ask (``audit.worlds``) as the noise shrinks, and with the
   items' noise sds drawn from two or three levels (heteroscedastic, "0.1/1").
"""

from __future__ import annotations

import argparse
import random

import numpy as np

from benchcheck.audit.null import nulls
from benchcheck.audit.worlds import WorldSpec
from benchcheck.stats.source import Forwards
from benchmarks.audit_calibration import ece_table, reask_claims
from benchmarks.audit_validity import simulate

Steps = dict[int, list[Forwards]]


def world(n: int, k: int, seed: int, bench: str = "W", shortcut: float = 0.15,
          noise: float = 0.4) -> tuple[Steps, dict[int, set[str]]]:
    """``audit_validity``'s world with ``k`` options, uniform golds and a pull of 0.8 towards A."""
    rng = random.Random(seed)
    ans = [rng.randrange(k) for _ in range(n)]
    w = simulate(rng, bench, ans, k, [0.8] + [0.0] * (k - 1), seed, shortcut, noise, 1.2)
    return w.by_step, w.answerable


def coverage(n: int, k: int, runs: int, noise: float, benches: int) -> list[str]:
    hit: dict[int, list[bool]] = {1: [], 4: []}
    truth: dict[int, list[int]] = {1: [], 4: []}
    width: dict[int, list[float]] = {1: [], 4: []}
    for s in range(runs):
        by: Steps = {1: [], 4: []}
        ans: dict[int, set[str]] = {1: set(), 4: set()}
        for b in range(benches):
            w, a = world(n, k, s * 1000 + b, bench=f"B{b}", noise=noise)
            for st in (1, 4):
                by[st] += w[st]
                ans[st] |= a[st]
        for r in nulls({st: v for st, v in by.items() if v}, rounds=10, seed=s):
            t = sum(f.removed and f.item_id not in ans[r.step] for f in by[r.step] if f.bench == r.bench)
            hit[r.step].append(r.est_false_lo <= t <= r.est_false_hi)
            truth[r.step].append(t)
            width[r.step].append(r.est_false_hi - r.est_false_lo)
    return [f"| {k} | {n} | {noise:g} | {st} | {len(hit[st])} | {np.mean(hit[st]):.1%} | {np.mean(truth[st]):.2f} | "
            f"{np.mean(width[st]):.2f} |" for st in (1, 4) if hit[st]]


def false_calls(n: int, k: int, runs: int, noise: float) -> str:
    any_call = cells = 0
    for s in range(runs):
        by: Steps = {1: [], 4: []}
        for b in range(20):
            w, _ = world(n, k, s * 100 + b, bench=f"B{b}", shortcut=0.0, noise=noise)
            for st in (1, 4):
                by[st] += w[st]
        c = sum(r.called for r in nulls(by, rounds=10, seed=s))
        any_call += c > 0
        cells += c
    return f"| {k} | {n} | {noise:g} | {runs} | {any_call} ({any_call / runs:.1%}) | {cells} |"


def confidence_rows(seeds: int) -> list[str]:
    out = []
    noises: list[tuple[float, ...]] = [(0.5,), (0.1,), (0.03,), (0.1, 1.0), (0.2, 0.5, 1.5)]
    for sds in noises:
        for multi in (True, False):
            spec = WorldSpec(n=600, k=4, noise_sd=sds[0], noise_sds=sds if len(sds) > 1 else (), multi=multi)
            pairs = [(c.flip_prob, w.reask_removed[c.item_id] != c.removed)
                     for w, cs in reask_claims(spec, seeds) for c in cs if c.flip_prob is not None]
            cl, ob = np.array([p for p, _ in pairs]), np.array([f for _, f in pairs])
            ece, _ = ece_table(cl, ob)
            sel = cl >= 0.3
            noise = "/".join(f"{v:g}" for v in sds)
            out.append(f"| {'step 1' if multi else 'single forward'} | {noise} | {len(cl)} | {ece:.3f} | "
                       f"{int(sel.sum())} | {cl[sel].mean():.3f} | {ob[sel].mean():.3f} |")
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--quick", action="store_true", help="a tenth of the runs")
    ap.add_argument("--confidence-only", action="store_true", help="table 3 alone")
    args = ap.parse_args()
    q = 10 if args.quick else 1
    if args.confidence_only:
        print("\n".join(confidence_rows(max(5 // q, 1))))
        return
    print("| options | items per benchmark | noise | step | cells | covered | mean truth | mean width |")
    print("|---|---|---|---|---|---|---|---|")
    for n, k, noise in [(1, 4, 0.4), (2, 4, 0.4), (3, 4, 0.4), (5, 2, 0.4), (50, 2, 0.4), (300, 2, 0.4),
                        (5, 10, 0.4), (50, 10, 0.4), (300, 10, 0.4), (50, 4, 0.0), (300, 4, 0.0)]:
        runs = (300 if n <= 5 else 100 if n <= 50 else 40) // q
        print("\n".join(coverage(n, k, max(runs, 2), noise, benches=20 if n <= 5 else 1)), flush=True)
    print("\n| options | items per cell | noise | runs | runs with a false call | cells called |")
    print("|---|---|---|---|---|---|")
    for n, k, noise in [(3, 4, 0.4), (50, 2, 0.4), (50, 10, 0.4), (50, 4, 0.0)]:
        print(false_calls(n, k, max(60 // q, 2), noise), flush=True)
    print("\n| step | noise sd | decisions | ECE | claimed flip >= 0.3 | mean claimed | observed flip rate |")
    print("|---|---|---|---|---|---|---|")
    print("\n".join(confidence_rows(max(5 // q, 1))))


if __name__ == "__main__":
    main()
