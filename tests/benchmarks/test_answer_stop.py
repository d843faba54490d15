"""Forced answer stops of the benchmarks (``benchmarks.shared.answer_stop``) on the real loop."""

from __future__ import annotations

from pathlib import Path

from benchmarks.shared.answer_stop import answers_stop_after

from benchcheck.engines.base import GenerateRequest
from benchcheck.engines.hf.engine import HFEngine


def test_answers_end_after_k_tokens_inside_the_block_only(tiny_model: Path) -> None:
    engine = HFEngine(tiny_model, device="cpu")
    engine.stop_ids = set()  # random weights: no end token of their own
    reqs = [GenerateRequest(f"r{i}", f"Question {i}: what is shown?" + " more" * i, (), max_tokens=9)
            for i in range(3)]
    free = engine.generate_sync(reqs)
    with answers_stop_after(2):
        stopped = engine.generate_sync(reqs)
    again = engine.generate_sync(reqs)
    assert [g.completion_tokens for g in free] == [9, 9, 9]  # type: ignore[union-attr]
    assert [g.completion_tokens for g in stopped] == [2, 2, 2]  # type: ignore[union-attr]
    # The first two tokens are the ones the unforced loop made; after the block, nothing is forced.
    assert [g.text for g in again] == [g.text for g in free]  # type: ignore[union-attr]
    for a, b in zip(stopped, free, strict=True):
        assert engine.tokenizer.encode(b.text)[:2] == engine.tokenizer.encode(a.text)[:2]  # type: ignore[union-attr]
