"""How long ``benchcheck audit`` takes per item (pure part, rows already in memory).

    python -m benchmarks.audit_speed --items 20000 --rounds 1000
"""

from __future__ import annotations

import argparse
import random
import time

from benchcheck.audit.run import audit_forwards
from benchcheck.protocol import permutations_for
from benchcheck.stats.source import Forwards


def rows(n: int, seed: int = 0) -> dict[int, list[Forwards]]:
    rng = random.Random(seed)
    s1, s4 = [], []
    for i in range(n):
        k = rng.choice((4, 5))
        iid = f"B{i % 4}_{i}"
        ans = rng.randrange(k)
        content = [rng.gauss(0, 1.5) + (3.0 if j == ans and rng.random() < 0.2 else 0.0) for j in range(k)]
        perms = [tuple(p) for p in permutations_for(iid, k)]
        lps = tuple(tuple(content[p[j]] + rng.gauss(0, 0.5) for j in range(k)) for p in perms)
        s1.append(Forwards(1, f"B{i % 4}", iid, "m", ans, tuple(perms), lps, False))
        ident = tuple(range(k))
        s4.append(Forwards(4, f"B{i % 4}", iid, "m", ans, (ident,), (tuple(content),), False))
    return {1: s1, 4: s4}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--items", type=int, default=20000)
    ap.add_argument("--rounds", type=int, default=1000)
    a = ap.parse_args()
    data = rows(a.items)
    t0 = time.perf_counter()
    audit_forwards(data, rounds=a.rounds)
    dt = time.perf_counter() - t0
    print(f"items={a.items} steps=2 rounds={a.rounds} audit_s={dt:.1f} item_steps_per_s={2 * a.items / dt:.0f}")


if __name__ == "__main__":
    main()
