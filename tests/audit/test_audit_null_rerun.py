"""The conditioned null when step 1 was screened again after step 4 had run on its survivors (a
results folder holds the last row of each item): over many seeded worlds of pure-noise
benchmarks whose model opinions repeat across steps, the step-4 null's expected removals match
the true chance removals, and the pooled headline interval covers the true chance count. One
re-screened item used to drop the conditioning of its whole benchmark (the null then expected
half as many chance removals again as there were), and the pooled interval covered the truth in
about one world of eight."""

from __future__ import annotations

import numpy as np

from benchcheck.audit.chance import chance_removals
from benchcheck.audit.null import nulls
from benchcheck.audit.rule import removal_tables
from benchcheck.stats.source import Forwards

K = 4
PRIOR = np.log([0.4, 0.2, 0.2, 0.2])  # a letter preference over positions, at both steps
Q = np.array([5, 3, 1, 1]) / 10  # skewed golds


def _step(rng: np.random.Generator, step: int, bench: str, idx: np.ndarray, golds: np.ndarray,
          content: np.ndarray) -> list[Forwards]:
    n, nf = len(idx), (4 if step == 1 else 1)
    perms = (np.array([[rng.permutation(K) for _ in range(nf)] for _ in range(n)]) if nf > 1
             else np.tile(np.arange(K), (n, 1, 1)))
    logits = (np.take_along_axis(content[idx][:, None, :].repeat(nf, 1), perms, axis=2) + PRIOR
              + rng.normal(0, 0.3, (n, nf, K)))
    lps = logits - np.log(np.exp(logits).sum(axis=2, keepdims=True)) - 0.05
    removed = removal_tables(perms, lps)[np.arange(n), golds[idx]]
    return [Forwards(step, bench, f"{bench}_{i}", "m", int(golds[i]), tuple(map(tuple, perms[j].tolist())),
                     tuple(map(tuple, lps[j].tolist())), bool(removed[j])) for j, i in enumerate(idx)]


def _world(seed: int, benches: int = 5, n: int = 60) -> dict[int, list[Forwards]]:
    """Step 1 on every item, step 4 on its survivors with the same opinions; then step 1 again
    (fresh noise) and step 4 again on the new survivors."""
    rng = np.random.default_rng(seed)
    by: dict[int, list[Forwards]] = {1: [], 4: []}
    for b in range(benches):
        bench = f"Noise{b}"
        golds = rng.choice(K, n, p=Q)
        content = rng.normal(0, 1.2, (n, K))
        last4: dict[str, Forwards] = {}
        for _ in range(2):
            rows1 = _step(rng, 1, bench, np.arange(n), golds, content)
            alive = np.array([i for i, f in enumerate(rows1) if not f.removed], dtype=np.int64)
            last4 |= {f.item_id: f for f in _step(rng, 4, bench, alive, golds, content)}
        by[1] += rows1
        by[4] += sorted(last4.values(), key=lambda f: f.item_id)
    return by


def test_rescreened_step_keeps_the_null_calibrated_over_many_worlds() -> None:
    expected = true = covered = 0.0
    worlds = 120
    for seed in range(worlds):
        by = _world(seed)
        res = nulls(by, rounds=1)
        removed = {(f.step, f.item_id): f.removed for rows in by.values() for f in rows}
        s4 = [r for r in res if r.step == 4]
        expected += sum(sum(r.item_p.values()) for r in s4)
        true += sum(f.removed for f in by[4])
        _, lo, hi = chance_removals([(p, removed[(r.step, i)]) for r in res for i, p in r.item_p.items()])
        covered += lo <= sum(removed.values()) <= hi  # every removal is chance
    assert abs(expected / true - 1.0) < 0.05, (expected, true)
    assert covered / worlds >= 0.9, covered
