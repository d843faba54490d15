"""The report's intervals and sweep verdicts against published values."""

from __future__ import annotations

import pytest

from benchcheck.items import Item
from benchcheck.report.source import ItemEvidence
from benchcheck.report.stats import diff_interval, final_counts, wilson
from benchcheck.report.sweep import parse_condition, verdict
from benchcheck.screen.fates import KEPT, NOT_SCREENED, REMOVED


def test_wilson_interval_matches_newcombe_1998() -> None:
    # Newcombe (1998), Statistics in Medicine 17:857, table I: 81/263 -> 0.2553 to 0.3662
    r = wilson(81, 263)
    assert r.lo == pytest.approx(0.2553, abs=1e-4) and r.hi == pytest.approx(0.3662, abs=1e-4)
    zero = wilson(0, 20)  # honest at 0 %: the upper bound is not 0
    assert zero.lo == 0.0 and zero.hi == pytest.approx(0.1611, abs=1e-4)
    assert wilson(0, 0).value is None


def test_difference_interval_matches_newcombe_method_10() -> None:
    # Newcombe (1998b), Statistics in Medicine 17:873, example (a): 56/70 - 48/80 -> 0.0524 to 0.3339
    d = diff_interval(wilson(56, 70), wilson(48, 80))
    assert d is not None
    assert d[0] == pytest.approx(0.2) and d[1] == pytest.approx(0.0524, abs=1e-4) and d[2] == pytest.approx(0.3339,
                                                                                                            abs=1e-4)


def test_conditions_parse_and_verdicts() -> None:
    assert parse_condition("v_32_s168") == (32.0, None, 168.0)
    assert parse_condition("v_fps0.25_s224") == (None, 0.25, 224.0)
    assert parse_condition("v_32") == (32.0, None, 720.0) and parse_condition("v_blind") == (None, None, None)
    acc = {"v_32_s448": wilson(80, 100), "v_32_s168": wilson(50, 100), "v_128_s224": wilson(52, 100),
           "v_8_s224": wilson(50, 100)}
    assert verdict(acc).prefers == "pixels"
    acc["v_128_s224"] = wilson(75, 100)
    assert verdict(acc).prefers == "both"
    assert verdict({"v_32_s448": wilson(51, 100), "v_32_s168": wilson(50, 100)}).prefers == "unknown"
    assert verdict({}).prefers == "unknown"


def test_final_counts_name_the_kept_items_a_visual_step_never_screened() -> None:
    # The protocol keeps an item without frames once its text steps keep it; the count under
    # "not_screened" says how many of the kept had no visual check, so they are not read as passed.
    item = Item("x", "b", "q?", ("a", "b"), 0)
    both = {1: KEPT, 2: KEPT, 4: KEPT}
    skipped = {1: KEPT, 2: NOT_SCREENED, 4: KEPT}
    evidence = [ItemEvidence(item, KEPT, None, both, {}, {}),
                ItemEvidence(item, KEPT, None, skipped, {}, {}),
                ItemEvidence(item, KEPT, None, skipped, {}, {}),
                ItemEvidence(item, REMOVED, 4, {1: KEPT, 2: NOT_SCREENED, 4: REMOVED}, {}, {})]
    counts = final_counts(evidence)
    assert counts == {KEPT: 3, REMOVED: 1, NOT_SCREENED: 2}
    assert counts[NOT_SCREENED] <= counts[KEPT]  # a part of the kept, never a fate beside them
