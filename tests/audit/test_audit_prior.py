"""A planted letter prior: the prior-explained flag finds exactly the prior-driven removals."""

from __future__ import annotations

import random
from pathlib import Path

from audit_synth import SimModel, make_items, run_step

from benchcheck.audit import read_forwards
from benchcheck.audit.prior import corrected_removes, estimate_priors, prior_explained
from benchcheck.audit.run import audit_forwards


def _planted(tmp_path: Path, n: int = 400) -> tuple[Path, set[str], set[str]]:
    rng = random.Random(7)
    items = make_items("PriorBench", n, 4, rng)
    shortcut = {it.item_id for it in items if rng.random() < 0.25}
    content = {it.item_id: [4.0 if (j == it.answer and it.item_id in shortcut) else 0.0 for j in range(4)]
               for it in items}
    model = SimModel("sim-8b", prior=[0.7, 0.1, 0.1, 0.1], noise=0.2, rng=random.Random(1))
    rows = run_step(tmp_path, 4, items, model, content)
    prior_driven = {str(r["item_id"]) for r in rows if r["removed"] and r["item_id"] not in shortcut}
    return tmp_path, shortcut, prior_driven


def test_prior_flag_finds_exactly_the_prior_driven_removals(tmp_path: Path) -> None:
    results, shortcut, prior_driven = _planted(tmp_path)
    by_step = read_forwards(results)
    rows = by_step[4]
    assert len(prior_driven) > 40  # the construction gives the flag something to find
    priors = estimate_priors(rows)
    prior = priors[("sim-8b", 4, 4)]
    assert prior.dominant == 0 and prior.source == "all items"
    flagged = {f.item_id for f in rows if prior_explained(f, prior)}
    assert flagged == prior_driven
    # Every shortcut item is removed, and none is flagged: its margin exceeds the prior's by far.
    removed = {f.item_id for f in rows if f.removed}
    assert shortcut <= removed and not (flagged & shortcut)
    # PriDe correction keeps the shortcuts and drops the prior-driven removals.
    kept_after = {f.item_id for f in rows if f.removed and not corrected_removes(f, prior)}
    assert kept_after == prior_driven


def test_audit_counts_prior_effects(tmp_path: Path) -> None:
    results, shortcut, prior_driven = _planted(tmp_path, 200)
    res = audit_forwards(read_forwards(results), rounds=200)
    (e,) = res.prior_effects
    assert e["prior_explained"] == len(prior_driven)
    assert e["flips_to_kept"] == len(prior_driven) and e["flips_to_removed"] == 0
    assert e["removed"] == len(shortcut) + len(prior_driven)
    flagged = {r["item_id"] for r in res.items if r["prior_explained"]}
    assert flagged == prior_driven


def test_prior_from_permutations_recovers_the_planted_prior(tmp_path: Path) -> None:
    rng = random.Random(3)
    items = make_items("PermBench", 300, 4, rng)
    content = {it.item_id: [rng.gauss(0, 1.0) for _ in range(4)] for it in items}
    planted = [0.4, 0.3, 0.2, 0.1]
    run_step(tmp_path, 1, items, SimModel("sim-8b", prior=planted, noise=0.1), content)
    prior = estimate_priors(read_forwards(tmp_path)[1])[("sim-8b", 1, 4)]
    assert prior.source == "permutations" and prior.forwards == 1200
    # The permutations move the content over the positions: the planted prior comes back.
    for got, want in zip(prior.probs, planted, strict=True):
        assert abs(got - want) < 0.03
