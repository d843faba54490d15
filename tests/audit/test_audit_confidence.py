"""Per-item confidence ranks true removals above chance ones; the resampled flip probability."""

from __future__ import annotations

import itertools
import random
from pathlib import Path

from audit_synth import SimModel, make_items, mixed_bench, run_step

from benchcheck.audit import read_forwards
from benchcheck.audit.rule import removes
from benchcheck.protocol import LOG2
from benchcheck.stats.confidence import auc, confidences, distance_to_flip, flip_probability
from benchcheck.stats.source import Forwards


def test_confidence_ranks_true_removals_above_chance_ones(tmp_path: Path) -> None:
    aucs = {}
    for step in (1, 4):
        shortcut, _ = mixed_bench(tmp_path / f"s{step}", 5, step, 600)
        by_step = read_forwards(tmp_path / f"s{step}")
        if step == 4:  # the single-forward step's noise comes from the same model's permutations
            mixed_bench(tmp_path / "noise", 5, 1, 600)
            by_step[1] = read_forwards(tmp_path / "noise")[1]
        confs = [c for c in confidences(by_step) if c.step == step and c.removed]
        true = [c.confidence for c in confs if c.item_id in shortcut and c.confidence is not None]
        false = [c.confidence for c in confs if c.item_id not in shortcut and c.confidence is not None]
        aucs[step] = auc(true, false)
    print(f"confidence AUC, true vs chance removals: step 1 {aucs[1]:.3f}, step 4 {aucs[4]:.3f}")
    assert aucs[1] is not None and aucs[1] > 0.7
    assert aucs[4] is not None and aucs[4] > 0.7


def _f(lps: list[list[float]], perms: list[list[int]], answer: int, removed: bool) -> Forwards:
    return Forwards(1, "B", "x", "m", answer, tuple(tuple(p) for p in perms), tuple(tuple(v) for v in lps), removed)


def test_flip_probability_by_exhaustive_resampling() -> None:
    ident = [0, 1, 2, 3]
    hit = [0.0, -3.0, -3.0, -3.0]  # picks A (the gold) with margin 3
    miss = [-3.0, 0.0, -3.0, -3.0]
    # 3 of 4 hit: a fresh draw of 4 keeps >= 3 hits with P(Bin(4, 3/4) >= 3) = 189/256; the mean
    # margin of a draw with 3 hits and one miss is (3 * 3 - 3) / 4 = 1.5 > log 2.
    f = _f([hit, hit, hit, miss], [ident] * 4, 0, True)
    assert abs(flip_probability(f) - (1 - 189 / 256)) < 1e-12
    g = _f([hit] * 4, [ident] * 4, 0, True)
    assert flip_probability(g) == 0.0


def test_flip_probability_is_the_rule_over_every_draw() -> None:
    rng = random.Random(5)
    for t in range(60):
        k = rng.randint(2, 5)
        perms = [rng.sample(range(k), k) for _ in range(4)]
        lps = [[round(rng.gauss(0, 1.5), 1) for _ in range(k)] for _ in perms]
        answer = rng.randrange(k)
        f = _f(lps, perms, answer, removes(perms, lps, answer))
        draws = list(itertools.product(range(4), repeat=4))
        want = sum(removes([perms[i] for i in d], [lps[i] for i in d], answer) != f.removed for d in draws)
        assert flip_probability(f) == want / len(draws), t


def test_distance_to_flip() -> None:
    assert abs(distance_to_flip([0.0, -2.0, -2.0], 0) - min(2.0 - LOG2, 2.0)) < 1e-12
    assert abs(distance_to_flip([-1.0, 0.0, -1.0], 0) - max(LOG2 - (-0.5), 1.0)) < 1e-12


def test_extra_permutations_are_used_for_single_steps(tmp_path: Path) -> None:
    rng = random.Random(0)
    items = make_items("X", 5, 4, rng)
    run_step(tmp_path, 4, items, SimModel("m"), {it.item_id: [0.0] * 4 for it in items})
    f = read_forwards(tmp_path)[4][0]
    g = Forwards(f.step, f.bench, f.item_id, f.model, f.answer, f.perms, f.lps, f.removed,
                 extra_perms=((1, 2, 3, 0), (3, 2, 1, 0)), extra_lps=((0.0, -1.0, -2.0, -3.0), (-3.0, -2.0, -1.0, 0.0)))
    (c,) = confidences({4: [g]})
    assert c.method == "own extra permutations" and c.noise_sd is not None
