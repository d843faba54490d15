"""The letter prior on worlds of known truth: floored letters censored, golds at one position, two
and 26 options; each removal's probability that the prior explains it."""

from __future__ import annotations

import numpy as np

from benchcheck.audit.prior import EXPLAINED_CUT, estimate_priors, prior_probability
from benchcheck.audit.run import audit_forwards
from benchcheck.audit.worlds import World, WorldSpec, build_world, log_prior

PLANTED = log_prior([0.55, 0.15, 0.15, 0.15])


def _flags(w: World) -> tuple[set[str], dict[str, float | None]]:
    prior = estimate_priors(w.rows)[(w.spec.model, w.step, w.spec.k)]
    d = prior.draws()
    probs = {f.item_id: prior_probability(f, prior, d) for f in w.rows}
    return {i for i, p in probs.items() if p is not None and p > EXPLAINED_CUT}, probs


def _prior_error(w: World) -> float:
    prior = estimate_priors(w.rows)[(w.spec.model, w.step, w.spec.k)]
    true = np.asarray(w.spec.prior if w.spec.prior is not None else [0.0] * w.spec.k)
    return float(np.abs(prior.centred - (true - true.mean())).max())


def test_a_model_that_lists_two_letters() -> None:
    # Two of four letters in the top list: the other two are floored at log(1e-6). As observed
    # values they made a prior of 3 nats out of 1.3 (236 flagged against 98, 5 seeds).
    w = build_world(WorldSpec(n=300, k=4, multi=False, listed=2, prior=PLANTED), seed=0)
    assert sum(v == -13.815510557964274 for f in w.rows for v in f.lps[0]) >= 500
    assert _prior_error(w) < 0.4
    flagged, _ = _flags(w)
    assert len(w.prior_driven) > 10
    tp = len(flagged & w.prior_driven)
    assert tp / len(flagged) >= 0.8 and tp / len(w.prior_driven) >= 0.7


def test_twenty_six_options() -> None:
    # 26 options, six letters always floored: the prior of +1.5 nats on A comes back.
    w = build_world(WorldSpec(n=300, k=26, multi=False, prior=[1.5] + [0.0] * 25), seed=1)
    prior = estimate_priors(w.rows)[("sim", 4, 26)]
    assert prior.censored > 1000 and prior.dominant == 0
    assert _prior_error(w) < 0.35
    flagged, _ = _flags(w)
    assert len(w.prior_driven - flagged) <= 1
    assert len(flagged - w.prior_driven) <= 3


def test_golds_at_one_position_take_no_prior_from_the_answers() -> None:
    # Every gold at A, no prior, 20 % true shortcuts: A's prior is not identified, so no prior
    # is read off the answers there (the former fallback found 0.55 nats and flagged 162 of 5 seeds).
    w = build_world(WorldSpec(n=300, k=4, multi=False, gold_dist=[1, 0, 0, 0]), seed=2)
    prior = estimate_priors(w.rows)[("sim", 4, 4)]
    assert prior.identified == (False, True, True, True)
    assert prior.record()["unidentified"] == "A"
    assert abs(prior.margin_at(0)) < 0.2
    flagged, probs = _flags(w)
    assert not flagged and all(p is None for p in probs.values())
    assert sum(f.removed for f in w.rows) > 30


def test_two_options() -> None:
    w = build_world(WorldSpec(n=300, k=2, multi=False, prior=log_prior([0.7, 0.3])), seed=3)
    assert _prior_error(w) < 0.15
    flagged, _ = _flags(w)
    tp = len(flagged & w.prior_driven)
    assert tp / len(flagged) >= 0.75 and tp / len(w.prior_driven) >= 0.75
    # golds all at one of the two positions: nothing identified, no flag
    one = build_world(WorldSpec(n=200, k=2, multi=False, gold_dist=[0, 1], prior=log_prior([0.7, 0.3])), 3)
    assert not _flags(one)[0]


def test_probability_column_and_flag() -> None:
    w = build_world(WorldSpec(n=200, k=4, multi=True, prior=PLANTED), seed=4)
    res = audit_forwards({1: w.rows}, rounds=50)
    for r in res.items:
        p = r["prior_prob"]
        if not r["removed"]:
            assert p is None and not r["prior_explained"]
        else:
            assert isinstance(p, float) and 0.0 <= p <= 1.0
            assert r["prior_explained"] == (p > EXPLAINED_CUT)
    (e,) = res.prior_effects
    assert e["prior_explained"] == sum(bool(r["prior_explained"]) for r in res.items)
