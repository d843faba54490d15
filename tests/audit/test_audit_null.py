"""The permutation null: its chance-removal estimate brackets the constructed truth, and an
always-A model's removals are all chance."""

from __future__ import annotations

import random
from pathlib import Path

from audit_synth import SimModel, make_items, mixed_bench, run_step

from benchcheck.audit import read_forwards
from benchcheck.audit.null import null_for, verdict
from benchcheck.audit.run import audit_forwards


def test_null_bracket_covers_the_true_false_removals(tmp_path: Path) -> None:
    covered = 0
    trials = 0
    for step in (1, 4):
        for seed in range(4):
            d = tmp_path / f"s{step}_{seed}"
            shortcut, false = mixed_bench(d, seed, step, 1000)
            rows = read_forwards(d)[step]
            r = null_for(rows[0].bench, step, rows, rounds=300, seed=seed)
            trials += 1
            covered += r.est_false_lo <= false <= r.est_false_hi
            # The removals exceed the null by about the shortcut share.
            assert r.observed_rate > r.null_hi
            assert abs(r.excess - len(shortcut) / len(rows)) < 0.08
    assert covered >= trials - 1, f"covered {covered} of {trials}"


def test_always_a_model_null_explains_every_removal(tmp_path: Path) -> None:
    rng = random.Random(11)
    items = make_items("AlwaysA", 300, 4, rng)
    content = {it.item_id: [0.0] * 4 for it in items}
    # The tiny random model: one letter always wins by a wide margin, whatever the question.
    model = SimModel("tiny", prior=[0.9, 0.05, 0.03, 0.02], noise=0.05)
    run_step(tmp_path, 1, items, model, content)
    run_step(tmp_path, 4, items, model, content)
    by_step = read_forwards(tmp_path)
    res = audit_forwards(by_step, rounds=300)
    by = {r.step: r for r in res.nulls}
    s4 = by[4]
    assert s4.observed == sum(it.answer == 0 for it in items) > 0  # exactly the gold-A items
    assert s4.null_mean == s4.observed_rate  # the null removes the same number in every round
    assert "null explains" in verdict(s4)
    assert s4.est_false_lo <= s4.observed <= s4.est_false_hi
    assert by[1].observed_rate <= by[1].null_hi
    effects = {e["step"]: e for e in res.prior_effects}
    assert effects[4]["prior_explained"] == s4.observed


def test_chance_removals_at_a_later_step_are_conditioned_on_the_earlier_ones(tmp_path: Path) -> None:
    """A model whose opinions repeat across steps (the same content at the blind step 1 and the
    options-only step 4, no shortcut anywhere): step 1 already removed its lucky guesses, so the
    survivors' guesses miss the gold. The chance-removal estimate conditioned on passing step 1
    brackets step 4's (all false) removals; the unconditioned null expects more removals than the
    conditioned one, whose p-value does not call the (all chance) removals an excess."""
    covered, over = 0, 0
    for seed in range(4):
        d = tmp_path / f"s{seed}"
        rng = random.Random(seed)
        items = make_items(f"Repeat{seed}", 800, 4, rng)
        content = {it.item_id: [rng.gauss(0, 1.5) for _ in range(4)] for it in items}
        model = SimModel("sim", noise=0.3, rng=random.Random(seed + 7))
        rows1 = run_step(d, 1, items, model, content)
        survivors = [it for it, r in zip(items, rows1, strict=True) if not r["removed"]]
        run_step(d, 4, survivors, model, content)
        by_step = read_forwards(d)
        true4 = sum(f.removed for f in by_step[4])
        s4 = next(r for r in audit_forwards(by_step, rounds=50).nulls if r.step == 4)
        plain = null_for(s4.bench, 4, by_step[4], rounds=50)  # step 4 alone, as if it were first
        covered += s4.est_false_lo <= true4 <= s4.est_false_hi
        over += plain.cond_mean > s4.cond_mean and not s4.called
        print(f"seed {seed}: step-4 false removals {true4}, conditioned {s4.est_false:.1f} "
              f"[{s4.est_false_lo:.1f}, {s4.est_false_hi:.1f}], unconditioned {plain.est_false:.1f} "
              f"[{plain.est_false_lo:.1f}, {plain.est_false_hi:.1f}]")
    assert covered >= 3, covered
    assert over >= 3, over
