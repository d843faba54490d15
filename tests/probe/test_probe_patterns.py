"""The probe finds planted text patterns and stays at chance on data with nothing to learn."""

from __future__ import annotations

import numpy as np
import pytest

from benchcheck.probe.run import ProbeConfig, run_probe
from benchcheck.probe.synth import pattern_items

FAST = ProbeConfig(permutations=19, shuffle_null=False, ibp=False)


@pytest.mark.parametrize("pattern", ["longest", "shared_word", "position"])
def test_probe_finds_a_planted_pattern(pattern: str) -> None:
    items = pattern_items(pattern, 80, seed=3)
    res = run_probe(items, FAST)
    b = res.benches[0]
    assert b.accuracy is not None and b.accuracy >= 0.8
    assert b.uniform is not None and b.uniform.p_value == pytest.approx(1 / 20)  # no shuffled round reaches it
    assert b.learnable


def test_position_bias_is_not_content() -> None:
    """The second null keeps the gold positions' distribution: a pure position bias is not counted there."""
    res = run_probe(pattern_items("position", 80, seed=4), ProbeConfig(permutations=19, ibp=False))
    b = res.benches[0]
    assert b.learnable and b.shuffle is not None and b.shuffle.p_value > 0.05


def test_probe_at_chance_without_a_pattern() -> None:
    res = run_probe(pattern_items("none", 80, seed=0), FAST)
    b = res.benches[0]
    assert b.uniform is not None and b.uniform.p_value > 0.05 and not b.learnable
    assert b.chance == pytest.approx(0.25) and abs(b.accuracy - 0.25) < 0.15  # type: ignore[operator]


def test_out_of_fold_probabilities_are_distributions() -> None:
    res = run_probe(pattern_items("longest", 40, seed=1), ProbeConfig(permutations=0, ibp=False))
    for it in res.items:
        assert len(it.probs) == 4 and sum(it.probs) == pytest.approx(1.0, abs=1e-4)
        assert 0.0 <= it.p_gold <= 1.0


def test_ibp_prunes_a_half_planted_benchmark_to_chance() -> None:
    items = pattern_items("longest", 120, seed=5, strength=0.5)
    res = run_probe(items, ProbeConfig(permutations=0, ibp=True, ibp_step=0.1))
    ibp = res.benches[0].ibp
    assert ibp is not None and ibp.at_chance
    assert ibp.rounds[0].accuracy > 0.5 and 10 <= ibp.remaining < 120
    pruned = {res.items[i].item_id for i in ibp.removed_round}
    assert len(pruned) == 120 - ibp.remaining


def test_ibp_keeps_everything_at_chance() -> None:
    res = run_probe(pattern_items("none", 60, seed=2), ProbeConfig(permutations=0, ibp=True))
    ibp = res.benches[0].ibp
    assert ibp is not None and ibp.remaining == 60 and len(ibp.rounds) == 1


def test_small_benchmark_is_skipped_with_a_reason() -> None:
    items = pattern_items("none", 10, seed=0, bench="Small") + pattern_items("none", 30, seed=0, bench="Big")
    res = run_probe(items, FAST)
    small = next(b for b in res.benches if b.bench == "Small")
    assert small.skipped and "fewer than --min-items" in small.skipped
    assert {i.bench for i in res.items} == {"Big"}


@pytest.mark.slow
def test_false_discovery_at_the_stated_level_over_many_seeds() -> None:
    """Shuffled-label data over 100 seeds: the share called learnable at 0.05 stays near 0.05."""
    calls = [run_probe(pattern_items("none", 60, seed=s), FAST).benches[0].learnable for s in range(100)]
    rate = float(np.mean(calls))
    assert rate <= 0.05 + 2 * np.sqrt(0.05 * 0.95 / 100)
