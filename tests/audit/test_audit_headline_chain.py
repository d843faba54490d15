"""The headline's "the null expects" number at a chained step: step 4 screens step 1's survivors
with the same model opinions, so step 1 already removed the lucky guesses. Over seeded worlds of
pure-noise benchmarks (every removal is chance, so the true chance count is the number removed)
the headline's number matches the truth and its interval covers it. The headline used to state
the unconditioned permutation null, which expects step 1's lucky guesses again at step 4 (about
1.3 times the removals over both steps), and gave no interval."""

from __future__ import annotations

import re

import numpy as np

from benchcheck.audit.null import nulls
from benchcheck.audit.rule import removal_tables
from benchcheck.audit.run import AuditResult
from benchcheck.audit.write import headline
from benchcheck.stats.source import Forwards

K = 4
PRIOR = np.log([0.4, 0.2, 0.2, 0.2])  # a letter preference over positions, at both steps
Q = np.array([5, 3, 1, 1]) / 10  # skewed golds
HEAD = re.compile(r"The null expects (\d+\.\d)(?: \[(\d+), (\d+)\])? of the (\d+) removals")


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


def _chain(seed: int, benches: int = 5, n: int = 60) -> dict[int, list[Forwards]]:
    """Step 1 on every item, step 4 on its survivors with the same opinions; no shortcut anywhere."""
    rng = np.random.default_rng(seed)
    by: dict[int, list[Forwards]] = {1: [], 4: []}
    for b in range(benches):
        bench = f"Chain{b}"
        golds = rng.choice(K, n, p=Q)
        content = rng.normal(0, 1.2, (n, K))
        rows1 = _step(rng, 1, bench, np.arange(n), golds, content)
        alive = np.array([i for i, f in enumerate(rows1) if not f.removed], dtype=np.int64)
        by[1] += rows1
        by[4] += _step(rng, 4, bench, alive, golds, content)
    return by


def test_headline_number_at_a_chained_step_is_the_conditioned_null_and_covers_the_truth() -> None:
    worlds = 100
    stated = true = covered = 0.0
    for seed in range(worlds):
        by = _chain(seed)
        sentence = headline(AuditResult(nulls=nulls(by, rounds=20, seed=seed)))
        m = HEAD.match(sentence)
        assert m, sentence
        removed = sum(f.removed for rows in by.values() for f in rows)  # every removal is chance
        assert int(m[4]) == removed
        stated += float(m[1])
        true += removed
        covered += m[2] is not None and int(m[2]) <= removed <= int(m[3])
    assert abs(stated / true - 1.0) < 0.05, (stated, true)
    assert covered / worlds >= 0.9, covered
