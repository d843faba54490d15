"""The funnel per kind equals the construction's prediction, for several chains (in-process
reference engine on real clips through the real screening runner)."""

from __future__ import annotations

from pathlib import Path

import pytest
from demo_helpers import screen_chain

from benchcheck.demo.kinds import predicted_step
from benchcheck.demo.run import Benchmarks
from benchcheck.engines.reference import ReferenceEngine


@pytest.mark.parametrize("chain", [(1, 2, 3, 4, 5, 6), (5,), (4,), (2, 6, 5)], ids=lambda c: "-".join(map(str, c)))
def test_funnel_matches_the_construction(known: Benchmarks, tmp_path: Path, chain: tuple[int, ...]) -> None:
    observed, predicted = screen_chain(known, ReferenceEngine(), chain, tmp_path / "results")
    assert observed == predicted


def test_predictions_say_what_the_issue_says() -> None:
    """The expectations themselves, in words (docs/demo.md): leaks go at step 1, single-frame
    items at step 2, ordered ones at step 3 and never at the shuffled step 5 on its own, brief
    events at step 3 (and at step 5 on its own), options-only items at step 4 on its own, and
    the tiny dot survives every screening step (its frames are 224 px on the short side)."""
    assert predicted_step("text_leak", (1, 2, 3, 4, 5, 6)) == 1
    assert predicted_step("static", (1, 2, 3, 4, 5, 6)) == 2
    assert predicted_step("ordered", (1, 2, 3, 4, 5, 6)) == 3
    assert predicted_step("ordered", (5,)) is None
    assert predicted_step("brief", (1, 2, 3, 4, 5, 6)) == 3
    assert predicted_step("brief", (5,)) == 5
    assert predicted_step("options_only", (4,)) == 4
    assert predicted_step("text_leak", (4,)) is None
    assert predicted_step("high_res", (1, 2, 3, 4, 5, 6)) is None
    assert predicted_step("duplicate", (1, 2, 3, 4, 5, 6)) == 0
    assert predicted_step("duplicate", (1, 2, 3, 4, 5, 6), dedup=False) == 2
