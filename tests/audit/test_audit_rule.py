"""The audit's parameterised rule is the protocol's at log 2; thresholds, agreement, profile."""

from __future__ import annotations

import random
from pathlib import Path

from audit_synth import SimModel, make_items, run_step

from benchcheck.audit import read_forwards
from benchcheck.audit.agreement import agreements
from benchcheck.audit.profile import profile
from benchcheck.audit.rule import removes
from benchcheck.audit.sensitivity import threshold_curves
from benchcheck.protocol import LOG2, LP_FLOOR, decide_permutations, decide_single, gold_position, permutations_for
from benchcheck.stats.source import forwards_of


def test_rule_equals_protocol() -> None:
    rng = random.Random(0)
    for t in range(2000):
        k = rng.randint(2, 6)
        answer = rng.randrange(k)
        if t % 2:
            perm = list(range(k))
            lp = [round(rng.gauss(0, 1), 1) for _ in range(k)]
            assert removes([perm], [lp], answer) == decide_single(lp, gold_position(perm, answer)).removed
        else:
            perms = permutations_for(f"i{t}", k)
            lps = [[round(rng.gauss(0, 1), 1) for _ in range(k)] for _ in perms]
            golds = [gold_position(p, answer) for p in perms]
            assert removes(perms, lps, answer) == decide_permutations(lps, golds).removed


def test_threshold_curve_matches_rows_at_log2_and_falls(tmp_path: Path) -> None:
    rng = random.Random(1)
    items = make_items("T", 200, 4, rng)
    content = {it.item_id: [rng.gauss(0, 1.5) for _ in range(4)] for it in items}
    rows = run_step(tmp_path, 1, items, SimModel("m", noise=0.3), content)
    curve = [c for c in threshold_curves(read_forwards(tmp_path))]
    at = {c["threshold"]: c["removed"] for c in curve}
    assert at[round(LOG2, 4)] == sum(bool(r["removed"]) for r in rows)
    ordered = [at[t] for t in sorted(at)]
    assert ordered == sorted(ordered, reverse=True) and ordered[0] > ordered[-1]
    assert min(at) == 0.0 and max(at) == 3.0


def test_cross_model_agreement(tmp_path: Path) -> None:
    rng = random.Random(2)
    items = make_items("K", 300, 4, rng)
    shortcut = {it.item_id for it in items if rng.random() < 0.3}
    content = {it.item_id: [3.0 if (j == it.answer and it.item_id in shortcut) else rng.gauss(0, 0.3)
                            for j in range(4)] for it in items}
    run_step(tmp_path / "a", 1, items, SimModel("big", noise=0.2, rng=random.Random(3)), content)
    run_step(tmp_path / "b", 1, items, SimModel("small", noise=0.2, rng=random.Random(4)), content)
    run_step(tmp_path / "c", 1, items, SimModel("unrelated", noise=0.2, rng=random.Random(5)),
             {it.item_id: [rng.gauss(0, 2) for _ in range(4)] for it in items})
    a, b, c = (read_forwards(tmp_path / x) for x in "abc")
    (same, _) = agreements(a, b, boot=200)
    assert same.kappa is not None and same.kappa > 0.9 and same.lo is not None and same.lo > 0.8
    both = {f.item_id for f in a[1] if f.removed} & {f.item_id for f in b[1] if f.removed}
    assert set(same.both) == both and shortcut <= both and same.model_a == "big" and same.model_b == "small"
    (other, _) = agreements(a, c, boot=200)
    assert other.kappa is not None and other.lo is not None and other.hi is not None
    assert other.lo < 0.2 and other.kappa < 0.3


def test_shortcut_profile(tmp_path: Path) -> None:
    rng = random.Random(4)
    items = make_items("P", 300, 4, rng)
    text = {it.item_id: [2.0 if (j == it.answer and rng.random() < 0.5) else 0.0 for j in range(4)] for it in items}
    video = {i: [v + (3.0 if j == next(x for x in items if x.item_id == i).answer else 0.0) for j, v in enumerate(c)]
             for i, c in text.items()}
    m = SimModel("m", noise=0.3)
    run_step(tmp_path, 1, items, m, text)
    run_step(tmp_path, 4, items, m, {i: [0.0] * 4 for i in text})
    run_step(tmp_path, 2, items, m, video)
    run_step(tmp_path, 6, items, m, video)
    run_step(tmp_path, 3, items, m, video)
    run_step(tmp_path, 5, items, m, video)  # shuffled frames: the same evidence -> no order gain
    figs = {g.name: g for g in profile(read_forwards(tmp_path), boot=300)}
    blind = figs["blind_gap"]
    assert blind.value is not None and blind.lo is not None and blind.hi is not None
    assert blind.lo > 0.2 and blind.lo < blind.value < blind.hi
    oo = figs["options_only_gap"]
    assert oo.lo is not None and oo.hi is not None and oo.lo < 0 < oo.hi
    assert (figs["visual_gain_32"].lo or 0) > 0.2 and (figs["visual_gain_1"].lo or 0) > 0.2
    og = figs["order_gain_32"]
    assert og.items == 300 and og.lo is not None and og.hi is not None and og.lo <= 0.0 <= og.hi + 1e-9


def test_floor_dependence_counts_decisions_the_floor_makes() -> None:
    from benchcheck.audit.floor import floor_dependence
    from benchcheck.stats.source import Forwards

    ident = (0, 1, 2, 3)
    floored = (-1.0, LP_FLOOR, LP_FLOOR, -2.0)  # B and C outside the top 20: margin 8.9, removed
    exact = (-1.0, -1.2, -1.3, -2.0)  # their real log-probs: margin 0.5, kept
    a = Forwards(4, "F", "a", "m", 0, (ident,), (floored,), True, lps_exact=(exact,))
    b = Forwards(4, "F", "b", "m", 3, (ident,), (floored,), False, lps_exact=(exact,))  # kept either way
    (row,) = floor_dependence({4: [a, b]})
    assert row["with_exact"] == 2 and row["floored"] == 2
    assert row["removed_lp_only"] == 1 and row["removed_exact_only"] == 0 and row["decisions_differ"] == 1


def test_rows_record_lp_exact_beside_lp(tmp_path: Path) -> None:
    from dataclasses import replace

    from audit_synth import run_spec_of, scores

    from benchcheck.screen.requests import build_item_requests
    from benchcheck.screen.rows import RowContext, result_row
    (item,) = make_items("R", 1, 4, random.Random(0))
    ir = build_item_requests(run_spec_of(4), item)
    s = scores(ir.requests[0].request_id, [0.0, -1.0, -2.0, -3.0])
    top = [e for e in s.top if e["token"] != "D"]  # D fell out of the top list: floored in lp
    exact = [{"token": e["token"], "logprob": e["logprob"], "token_id": i} for i, e in enumerate(s.top)]
    ans = replace(s, top=top, exact=exact, exact_source="full_softmax")
    ctx = RowContext(4, "opt_only", "m", None, "sim", "c", "lmms-v1", "h")
    row = result_row(run_spec_of(4), ir, ctx, [ans]).to_dict()
    assert row["lp"][3] == LP_FLOOR and row["lp_exact"][3] > LP_FLOOR
    assert row["lp_exact"][:3] == row["lp"][:3] and row["lp_exact_source"] == "full_softmax"
    f = forwards_of(row)
    assert f is not None and f.lps_exact is not None and f.lps_exact[0][3] == row["lp_exact"][3]


def test_removal_tables_equal_the_rule() -> None:
    import numpy as np

    from benchcheck.audit.rule import removal_tables

    rng = random.Random(9)
    for n_fwd in (1, 4):
        for k in (2, 4, 5):
            perms = [[rng.sample(range(k), k) for _ in range(n_fwd)] for _ in range(200)]
            lps = [[[round(rng.gauss(0, 1), 1) for _ in range(k)] for _ in range(n_fwd)] for _ in range(200)]
            table = removal_tables(np.array(perms), np.array(lps))
            for i in range(200):
                assert list(table[i]) == [removes(perms[i], lps[i], a) for a in range(k)]
