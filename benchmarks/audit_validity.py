"""Does the audit's null hold up on benchmarks with a known truth? (docs/audit.md, "Validity")

    python benchmarks/audit_validity.py [--seeds 200] [--quick]

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
import platform
import random
import resource
import time
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from benchcheck.audit.fdr import ALL, CurveItem, curves, target
from benchcheck.audit.null import nulls
from benchcheck.audit.rule import removes
from benchcheck.audit.source import Forwards
from benchcheck.protocol import permutations_for

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
    s1: list[Forwards] = []
    s4: list[Forwards] = []
    a1: set[str] = set()
    a4: set[str] = set()
    for i in range(n):
        iid = f"{bench}_{i}"
        content = [rng.gauss(0, content_sd) for _ in range(k)]
        u = rng.random()
        blind, opts = u < shortcut, shortcut <= u < 2 * shortcut
        (a1 if blind else a4 if opts else set()).add(iid)
        if opts:
            a1.discard(iid)
        c1 = list(content)
        if blind:
            c1[ans[i]] += 4 + abs(rng.gauss(0, 1))
        perms = tuple(tuple(p) for p in permutations_for(iid, k, 4, seed))
        lps = tuple(_lp([c1[p[j]] + PRIOR[j] + rng.gauss(0, noise) for j in range(k)]) for p in perms)
        f1 = Forwards(1, bench, iid, "m", ans[i], perms, lps, removes(perms, lps, ans[i]))
        s1.append(f1)
        if f1.removed:
            continue
        c4 = list(content)
        if opts or blind:
            c4[ans[i]] += 4 + abs(rng.gauss(0, 1))
        ident = (tuple(range(k)),)
        lp4 = (_lp([c4[j] + PRIOR[j] + rng.gauss(0, noise) for j in range(k)]),)
        s4.append(Forwards(4, bench, iid, "m", ans[i], ident, lp4, removes(ident, lp4, ans[i])))
    a4 |= a1  # an item answerable blind is answerable from the options too
    return World({1: s1, 4: s4}, {1: a1, 4: a4})


def coverage(ns: Sequence[int], seeds: int) -> list[str]:
    lines = ["| golds | step | n | runs | covered | mean truth | mean estimate | mean width |",
             "|---|---|---|---|---|---|---|---|"]
    for golds in GOLDS:
        for n in ns:
            runs = max(20, seeds if n <= 300 else seeds // 4)
            stats: dict[int, list[tuple[bool, int, float, float]]] = {1: [], 4: []}
            for seed in range(runs):
                w = world(n, golds, seed)
                for r in nulls(w.by_step, rounds=10, seed=seed):
                    truth = w.false_removals(r.step)
                    stats[r.step].append((r.est_false_lo <= truth <= r.est_false_hi, truth, r.est_false,
                                          r.est_false_hi - r.est_false_lo))
            for step in (1, 4):
                s = stats[step]
                if not s:
                    continue
                lines.append(f"| {golds} | {step} | {n} | {len(s)} | {sum(c for c, *_ in s) / len(s):.1%} | "
                             f"{np.mean([t for _, t, _, _ in s]):.1f} | {np.mean([e for *_, e, _ in s]):.1f} | "
                             f"{np.mean([x for *_, x in s]):.1f} |")
    return lines


def false_calls(seeds: int, n: int = 300) -> list[str]:
    lines = ["| golds | runs | runs with a false call | cells called (of 40 per run) |", "|---|---|---|---|"]
    for golds in GOLDS:
        any_call = 0
        cells = 0
        for seed in range(seeds):
            by_step: dict[int, list[Forwards]] = {1: [], 4: []}
            for b in range(20):
                w = world(n, golds, seed * 100 + b, bench=f"B{b}", shortcut=0.0)
                for s in (1, 4):
                    by_step[s] += w.by_step[s]
            res = nulls(by_step, rounds=10, seed=seed)
            called = sum(r.called for r in res)
            any_call += called > 0
            cells += called
        lines.append(f"| {golds} | {seeds} | {any_call} ({any_call / seeds:.1%}) | {cells} |")
    return lines


def fdr_target(ns: Sequence[int], seeds: int, goal: float = 0.1) -> list[str]:
    lines = ["| golds | n | runs | FDP <= 0.1 | reached | mean threshold | mean kept / removed | mean FDP at log 2 |",
             "|---|---|---|---|---|---|---|---|"]
    for golds in GOLDS:
        for n in ns:
            runs = max(20, seeds if n <= 300 else seeds // 4)
            ok = reached = 0
            ths: list[float] = []
            kept: list[float] = []
            base_fdp: list[float] = []
            for seed in range(runs):
                w = world(n, golds, seed)
                res = nulls(w.by_step, rounds=10, seed=seed)
                items = [(r.bench, r.step, CurveItem(f, r.item_gold[f.item_id], r.item_p[f.item_id]))
                         for r in res for f in w.by_step[r.step]]
                pts = curves(items)
                t = next(x for x in target(pts, goal) if x.bench == ALL)
                removed = sum(f.removed for rows in w.by_step.values() for f in rows)
                false = sum(w.false_removals(s) for s in w.by_step)
                base_fdp.append(false / removed if removed else 0.0)
                if t.threshold is None:
                    ok += 1  # nothing kept: no false discovery
                    continue
                reached += 1
                ths.append(t.threshold)
                kept_false = kept_all = 0
                for s, rows in w.by_step.items():
                    for f in rows:
                        if f.removed and removes(f.perms, f.lps, f.answer, t.threshold):
                            kept_all += 1
                            kept_false += f.item_id not in w.answerable[s]
                kept.append(kept_all / removed if removed else 0.0)
                ok += (kept_false / kept_all if kept_all else 0.0) <= goal
            lines.append(f"| {golds} | {n} | {runs} | {ok / runs:.1%} | {reached} | "
                         f"{np.mean(ths) if ths else float('nan'):.2f} | {np.mean(kept) if kept else 0.0:.1%} | "
                         f"{np.mean(base_fdp):.1%} |")
    return lines


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seeds", type=int, default=200, help="runs per cell at n <= 300 (a quarter at n = 3000)")
    ap.add_argument("--quick", action="store_true", help="20 runs per cell, n = 5, 50, 300 only")
    ap.add_argument("--only", choices=("coverage", "calls", "fdr"), default=None)
    a = ap.parse_args()
    seeds = 20 if a.quick else a.seeds
    ns = (5, 50, 300) if a.quick else (5, 50, 300, 3000)
    t0 = time.perf_counter()
    c0 = time.process_time()
    print(f"# audit validity  seeds={seeds}  {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}  "
          f"{platform.node()} ({platform.processor() or platform.machine()})\n")
    if a.only in (None, "coverage"):
        print("## 1. Coverage of the chance-removal count's 95 % interval\n")
        print("\n".join(coverage(ns, seeds)) + "\n")
    if a.only in (None, "calls"):
        print("## 2. False calls on 40 pure-noise cells (BH at 0.05)\n")
        print("\n".join(false_calls(seeds)) + "\n")
    if a.only in (None, "fdr"):
        print("## 3. --target-fdr 0.1: true false-discovery proportion among the removals kept\n")
        print("\n".join(fdr_target([x for x in ns if x >= 300], seeds)) + "\n")
    usage = resource.getrusage(resource.RUSAGE_SELF)
    print(f"wall {time.perf_counter() - t0:.0f} s, CPU {time.process_time() - c0:.0f} s "
          f"(max RSS {usage.ru_maxrss / 1024:.0f} MiB)")


if __name__ == "__main__":
    main()
