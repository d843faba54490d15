"""Does the audit's null hold up on benchmarks with a known truth? (docs/audit.md, "Validity")

    python -m benchmarks.audit_validity [--seeds 200] [--jobs N] [--quick] [--only coverage|calls|fdr]

Constructed worlds, simulated at the level of the audit's pure functions (``Forwards`` records
built in memory and passed to ``audit.null.nulls`` / ``audit.fdr``; the rows a screening would
write hold the same numbers, ``tests/audit`` runs worlds like these through the store and the CLI).

A world: n items with k = 4 options and golds drawn from a gold distribution (uniform, skewed
0.55/0.25/0.12/0.08, or degenerate: every gold at A). The model scores option j of a forward as
``content[option] + prior[position] + noise``: content opinions N(0, 1.2) that have nothing to do
with the gold and repeat across steps, a letter prior (+0.8 nats on A), noise sd 0.4 per forward,
and for the answerable items a boost of 4 + |N(0, 1)| nats on the gold's content. 15 % of the items
are answerable blind (step 1, 4 option permutations), another 15 % only from the options (step 4,
options in their original order). Step 4 runs on the survivors of step 1 (the chain). The truth:
a removal of an item that is not answerable at that step is a chance removal.

Tables:
1. coverage of the chance-removal count's 95 % interval, n = 5, 50, 300, 3000, per gold
   distribution and step (goal >= 90 %);
2. false calls on 40 pure-noise cells (20 benchmarks x steps 1 and 4, no answerable item),
   Benjamini-Hochberg at 0.05: share of runs with any excess called (goal <= 5 %);
3. --target-fdr 0.1 over both steps: share of runs whose true false-discovery proportion among the
   removals kept is <= 0.1 (goal >= 90 %), n = 300 and 3000.
"""

from __future__ import annotations

import argparse
import math
import os
import platform
import random
import resource
import time
from collections.abc import Sequence
from dataclasses import dataclass
from multiprocessing import Pool
from multiprocessing.pool import Pool as PoolT

import numpy as np

from benchcheck.audit.fdr import FDR_THRESHOLDS, CurveItem, point
from benchcheck.audit.null import nulls
from benchcheck.audit.rule import removes
from benchcheck.protocol import permutations_for
from benchcheck.stats.source import Forwards

GOLDS = {"uniform": (0.25, 0.25, 0.25, 0.25), "skewed": (0.55, 0.25, 0.12, 0.08), "degenerate": (1.0, 0.0, 0.0, 0.0)}
PRIOR = (0.8, 0.0, 0.0, 0.0)  # nats per position


@dataclass
class World:
    by_step: dict[int, list[Forwards]]
    answerable: dict[int, set[str]]  # step -> items answerable there

    def false_removals(self, step: int) -> int:
        return sum(f.removed and f.item_id not in self.answerable[step] for f in self.by_step.get(step, []))


def _lp(logits: Sequence[float]) -> tuple[float, ...]:
    m = max(logits)
    z = m + math.log(sum(math.exp(v - m) for v in logits)) + 0.05
    return tuple(v - z for v in logits)


def world(n: int, golds: str, seed: int, bench: str = "W", shortcut: float = 0.15, noise: float = 0.4,
          content_sd: float = 1.2) -> World:
    rng = random.Random(seed)
    k = 4
    ans = rng.choices(range(k), weights=GOLDS[golds], k=n)
    return simulate(rng, bench, ans, k, list(PRIOR), seed, shortcut, noise, content_sd)


def simulate(rng: random.Random, bench: str, ans: Sequence[int], k: int, prior: Sequence[float], seed: int,
             shortcut: float, noise: float, content_sd: float) -> World:
    """Steps 1 and 4 of one benchmark whose golds are ``ans``: a ``shortcut`` share answerable blind,
    as many answerable from the options alone, the rest from content the model cannot see (so a
    removal there is a chance one); letter ``prior`` and Gaussian ``noise`` on every log-prob."""
    s1: list[Forwards] = []
    s4: list[Forwards] = []
    a1: set[str] = set()
    a4: set[str] = set()
    for i in range(len(ans)):
        iid = f"{bench}_{i}"
        content = [rng.gauss(0, content_sd) for _ in range(k)]
        u = rng.random()
        blind, opts = u < shortcut, shortcut <= u < 2 * shortcut
        (a1 if blind else a4 if opts else set()).add(iid)
        c1 = list(content)
        if blind:
            c1[ans[i]] += 4 + abs(rng.gauss(0, 1))
        perms = tuple(tuple(p) for p in permutations_for(iid, k, 4, seed))
        lps = tuple(_lp([c1[p[j]] + prior[j] + rng.gauss(0, noise) for j in range(k)]) for p in perms)
        f1 = Forwards(1, bench, iid, "m", ans[i], perms, lps, removes(perms, lps, ans[i]))
        s1.append(f1)
        if f1.removed:
            continue
        c4 = list(content)
        if opts or blind:
            c4[ans[i]] += 4 + abs(rng.gauss(0, 1))
        ident = (tuple(range(k)),)
        lp4 = (_lp([c4[j] + prior[j] + rng.gauss(0, noise) for j in range(k)]),)
        s4.append(Forwards(4, bench, iid, "m", ans[i], ident, lp4, removes(ident, lp4, ans[i])))
    a4 |= a1  # an item answerable blind is answerable from the options too
    return World({1: s1, 4: s4}, {1: a1, 4: a4})


def _coverage_run(task: tuple[str, int, int]) -> list[tuple[int, bool, int, float, float]]:
    golds, n, seed = task
    w = world(n, golds, seed)
    out = []
    for r in nulls(w.by_step, rounds=10, seed=seed):
        truth = w.false_removals(r.step)
        out.append((r.step, r.est_false_lo <= truth <= r.est_false_hi, truth, r.est_false,
                    r.est_false_hi - r.est_false_lo))
    return out


def _runs(n: int, seeds: int) -> int:
    return max(20, seeds if n <= 300 else seeds // 4)


def coverage(ns: Sequence[int], seeds: int, pool: PoolT) -> list[str]:
    lines = ["| golds | step | n | runs | covered | mean truth | mean estimate | mean width |",
             "|---|---|---|---|---|---|---|---|"]
    for golds in GOLDS:
        for n in ns:
            res = [x for run in pool.map(_coverage_run, [(golds, n, s) for s in range(_runs(n, seeds))]) for x in run]
            for step in (1, 4):
                st = [x for x in res if x[0] == step]
                if not st:
                    continue
                lines.append(f"| {golds} | {step} | {n} | {len(st)} | {np.mean([x[1] for x in st]):.1%} | "
                             f"{np.mean([x[2] for x in st]):.1f} | {np.mean([x[3] for x in st]):.1f} | "
                             f"{np.mean([x[4] for x in st]):.1f} |")
    return lines


def _calls_run(task: tuple[str, int, int]) -> int:
    golds, n, seed = task
    by_step: dict[int, list[Forwards]] = {1: [], 4: []}
    for b in range(20):
        w = world(n, golds, seed * 100 + b, bench=f"B{b}", shortcut=0.0)
        for s in (1, 4):
            by_step[s] += w.by_step[s]
    return sum(r.called for r in nulls(by_step, rounds=10, seed=seed))


def false_calls(seeds: int, pool: PoolT, n: int = 300) -> list[str]:
    lines = ["| golds | items per cell | runs | runs with a false call | cells called (of 40 per run) |",
             "|---|---|---|---|---|"]
    for golds in GOLDS:
        called = pool.map(_calls_run, [(golds, n, s) for s in range(seeds)])
        any_call = sum(c > 0 for c in called)
        lines.append(f"| {golds} | {n} | {seeds} | {any_call} ({any_call / seeds:.1%}) | {sum(called)} |")
    return lines


def _fdr_run(task: tuple[str, int, int, float]) -> tuple[bool, float | None, float, float]:
    """(true FDP <= goal, threshold chosen, share of removals kept, true FDP at log 2)."""
    golds, n, seed, goal = task
    w = world(n, golds, seed)
    res = nulls(w.by_step, rounds=10, seed=seed)
    items = [CurveItem(f, r.item_gold[f.item_id], r.item_p[f.item_id]) for r in res for f in w.by_step[r.step]
             if f.bench == r.bench]
    removed = sum(f.removed for rows in w.by_step.values() for f in rows)
    false = sum(w.false_removals(s) for s in w.by_step)
    base = false / removed if removed else 0.0
    for t in FDR_THRESHOLDS:  # as fdr.target does over the pooled curve: the first that reaches the goal
        pt = point(items, t)
        if pt.fdr_hi is not None and pt.fdr_hi <= goal:
            kept_all = kept_false = 0
            for s, rows in w.by_step.items():
                for f in rows:
                    if f.removed and removes(f.perms, f.lps, f.answer, t):
                        kept_all += 1
                        kept_false += f.item_id not in w.answerable[s]
            fdp = kept_false / kept_all if kept_all else 0.0
            return fdp <= goal, t, kept_all / removed if removed else 0.0, base
    return True, None, 0.0, base  # nothing kept: no false discovery


def fdr_target(ns: Sequence[int], seeds: int, pool: PoolT, goal: float = 0.1) -> list[str]:
    lines = ["| golds | n | runs | true FDP <= 0.1 | target reached | mean threshold | mean kept / removed | "
             "mean true FDP at log 2 |", "|---|---|---|---|---|---|---|---|"]
    for golds in GOLDS:
        for n in ns:
            runs = _runs(n, seeds)
            res = pool.map(_fdr_run, [(golds, n, s, goal) for s in range(runs)])
            ths = [t for _, t, _, _ in res if t is not None]
            lines.append(f"| {golds} | {n} | {runs} | {np.mean([ok for ok, *_ in res]):.1%} | {len(ths)} | "
                         f"{np.mean(ths) if ths else float('nan'):.2f} | {np.mean([k for *_, k, _ in res]):.1%} | "
                         f"{np.mean([b for *_, b in res]):.1%} |")
    return lines


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seeds", type=int, default=200, help="runs per cell at n <= 300 (a quarter at n = 3000)")
    ap.add_argument("--quick", action="store_true", help="20 runs per cell, n = 5, 50, 300 only")
    ap.add_argument("--only", choices=("coverage", "calls", "fdr"), default=None)
    ap.add_argument("--jobs", type=int, default=1, help="worker processes")
    a = ap.parse_args()
    pool = Pool(a.jobs)
    seeds = 20 if a.quick else a.seeds
    ns = (5, 50, 300) if a.quick else (5, 50, 300, 3000)
    t0 = time.perf_counter()
    c0 = time.process_time()
    print(f"# audit validity  seeds={seeds}  {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}  "
          f"{platform.node()} ({platform.processor() or platform.machine()})\n")
    if a.only in (None, "coverage"):
        print("## 1. Coverage of the chance-removal count's 95 % interval\n")
        print("\n".join(coverage(ns, seeds, pool)) + "\n")
    if a.only in (None, "calls"):
        print("## 2. False calls on 40 pure-noise cells (BH at 0.05)\n")
        print("\n".join(false_calls(seeds, pool)) + "\n")
    if a.only in (None, "fdr"):
        print("## 3. --target-fdr 0.1: true false-discovery proportion among the removals kept\n")
        print("\n".join(fdr_target([x for x in ns if x >= 300], seeds, pool)) + "\n")
    pool.close()
    pool.join()
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = time.process_time() - c0 + kids.ru_utime + kids.ru_stime
    print(f"wall {time.perf_counter() - t0:.0f} s, CPU {cpu:.0f} s "
          f"over {a.jobs} process(es), {os.cpu_count()} cores")


if __name__ == "__main__":
    main()
