"""The synthetic pool of the benchmark: deterministic, and step 0 finds what it plants."""

from __future__ import annotations

from pathlib import Path

from benchcheck.dedup import SentenceEmbedder, dedup_items
from benchcheck.dedup.synth import score_pool, synthetic_pool


def test_pool_is_deterministic_and_plants_every_kind() -> None:
    a, b = synthetic_pool(800, seed=3), synthetic_pool(800, seed=3)
    assert a.items == b.items and a.planted == b.planted and a.must_keep == b.must_keep
    assert len(a.items) == 800 and len({i.item_id for i in a.items}) == 800
    assert set(a.planted_kind.values()) == {"exact/within", "exact/cross", "near/within", "near/cross"}
    assert a.must_keep and not a.must_keep & set(a.planted)
    assert any(i.video_id is None for i in a.items)


def test_step0_recall_and_precision_on_a_small_pool(minilm: SentenceEmbedder, tmp_path: Path) -> None:
    pool = synthetic_pool(600, seed=1)
    score = score_pool(pool, dedup_items(pool.items, minilm, 0.95, tmp_path).verdicts)
    assert score.recall_by_kind["exact/within"] == score.recall_by_kind["exact/cross"] == 1.0
    assert score.recall >= 0.95 and score.precision >= 0.99
    assert score.must_keep_removed == 0


def test_planted_copies_keep_the_original_gold_text() -> None:
    """A planted copy is the same question: a reworded one moves its gold with its options, so
    step 0 counts it as a duplicate, not as a gold conflict."""
    pool = synthetic_pool(800, seed=3)
    by_id = {it.item_id: it for it in pool.items}
    for copy_id, original_id in pool.planted.items():
        copy, original = by_id[copy_id], by_id[original_id]
        assert copy.options[copy.answer] == original.options[original.answer], copy_id


def test_step0_finds_no_gold_conflict_in_the_pool(minilm: SentenceEmbedder, tmp_path: Path) -> None:
    pool = synthetic_pool(600, seed=1)
    verdicts = dedup_items(pool.items, minilm, 0.95, tmp_path).verdicts
    assert [v.item.item_id for v in verdicts if v.verdict == "gold_conflict"] == []
