"""Op ``decode_join``: a generation batch held, prefilled, for the next batch to join its K/V
reservation, both then decoded together (a step reads the weights once for both)."""

from __future__ import annotations

from collections import Counter

import numpy as np
import pytest
import torch
from hf_helpers import variant

from benchcheck.engines import GenerateRequest, Generation
from benchcheck.engines.hf.engine import HFEngine
from benchcheck.engines.hf.forward.batch import padded_width
from benchcheck.engines.hf.forward.generate import Prefilled, Room
from benchcheck.engines.hf.inputs.encoder import EncodedPrompt
from benchcheck.engines.hf.schedule.pipeline import Encoded, join_room, row_slots

NEW = 6


def requests(n: int = 8) -> list[GenerateRequest]:
    """Text requests of a few lengths: text is encoded in one block, so every chunk is encoded
    when the first runs, and the pipeline always knows the batch after it."""
    return [GenerateRequest(f"g{i}", "Tell me a story about " + "a red ball and " * (3 + i % 3) + "a dog.",
                            max_tokens=NEW) for i in range(n)]


def five_rows(engine: HFEngine, reqs: list[GenerateRequest]) -> int:
    """K/V slots of five of the longest rows: chunks of 1, 2 and 5 requests each fit alone; the
    first two fit together, the last two do not."""
    longest = max(engine.count_tokens(r) for r in reqs)
    return 5 * row_slots(longest, NEW)


def run(engine: HFEngine, reqs: list[GenerateRequest], *ops: str) -> tuple[list[str], Counter[int]]:
    budget = five_rows(engine, reqs)
    other = variant(engine, *ops, first_chunk=1, chunk_growth=2, max_batch_size=8, max_batch_tokens=budget // 5,
                    decode_batch_tokens=budget)
    assert isinstance(other, HFEngine)
    out = other.generate_sync(reqs)
    assert all(isinstance(g, Generation) for g in out), out
    return [g.text for g in out if isinstance(g, Generation)], other.decode_rows


def test_the_first_batch_waits_for_the_second_and_both_decode_together(hf_engine: HFEngine) -> None:
    reqs = requests()
    joined, rows = run(hf_engine, reqs, "+decode_join")
    assert rows == Counter({3: 1, 5: 1})  # 1 + 2 joined; the 5 would not fit beside them
    apart, rows_apart = run(hf_engine, reqs, "-decode_join")
    assert rows_apart == Counter({1: 1, 2: 1, 5: 1})
    alone = [g.text for r in reqs for g in hf_engine.generate_sync([r]) if isinstance(g, Generation)]
    assert joined == apart == alone


def test_a_held_batch_whose_joiner_fails_first_is_decoded_alone(
        hf_engine: HFEngine, monkeypatch: pytest.MonkeyPatch) -> None:
    """The batch told to join runs out of device memory while joining: the pipeline splits it, the
    held batch is decoded by itself when landed, and every request still gets its own answer."""
    reqs = requests()
    real = Prefilled.join
    calls = [0]

    def join_once_out_of_memory(self: Prefilled, *a: object, **kw: object) -> None:
        calls[0] += 1
        if calls[0] == 1:
            raise torch.cuda.OutOfMemoryError("injected: no room for the joining rows")
        real(self, *a, **kw)  # type: ignore[arg-type]

    monkeypatch.setattr(Prefilled, "join", join_once_out_of_memory)
    texts, rows = run(hf_engine, reqs, "+decode_join")
    alone = [g.text for r in reqs for g in hf_engine.generate_sync([r]) if isinstance(g, Generation)]
    assert texts == alone
    # The held row alone; the failed batch's halves (1 + 1) joined; then the 5.
    assert rows == Counter({1: 1, 2: 1, 5: 1}), rows
    assert calls[0] == 2


def test_the_joined_reservation_holds_the_joining_rows_and_refuses_more(hf_engine: HFEngine) -> None:
    reqs = requests(3)
    engine = variant(hf_engine, "+decode_join")
    assert isinstance(engine, HFEngine)
    # The engine's own pieces: encode, stage on the host, upload, prefill with room, join, decode.
    from benchcheck.engines.hf.forward.batch import stage, upload
    from benchcheck.engines.hf.forward.generate import prefill

    prompts = [engine.encoder.encode(r.prompt, r.images, None) for r in reqs]

    def batch(ps: list[EncodedPrompt]) -> object:
        return upload(stage(ps, engine.device, engine.pad_id, right=True), engine.pixels, engine.dtype)

    width = padded_width(max(p.n_tokens for p in prompts[1:]))
    held = prefill(engine.model, batch(prompts[:1]), [NEW], room=Room(2, width, NEW))  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="do not fit the room"):
        held.join(batch(prompts[1:]), [NEW + 1, NEW])  # type: ignore[arg-type]
    held.join(batch(prompts[1:]), [NEW, NEW])  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="do not fit the room"):
        held.join(batch(prompts[1:2]), [NEW])  # type: ignore[arg-type]
    tokens = held.decode(engine.stop_ids, engine.pad_id)()
    alone = [g for r in reqs for g in engine.generate_sync([r])]
    assert [engine.tokenizer.decode(t, skip_special_tokens=True) for t in tokens] == \
        [g.text for g in alone if isinstance(g, Generation)]


def encoded(n_tokens: int, new: int) -> Encoded:
    ids = np.zeros(n_tokens, np.int64)
    return Encoded(EncodedPrompt(ids, ids, (), None, None), new, 0.0)


def test_join_room_counts_both_batches_as_one_planned_batch() -> None:
    a, b = [encoded(100, 8)], [encoded(300, 4), encoded(50, 4)]
    slots = 3 * row_slots(300, 8)  # every row: the longest prompt plus the most new tokens
    assert join_room(a, b, slots, 8) == Room(2, padded_width(300), 4)
    assert join_room(a, b, slots - 1, 8) is None  # over the K/V budget
    assert join_room(a, b, slots, 2) is None  # more rows than one batch may hold
    assert join_room(a, [], slots, 8) is None  # nothing joins
    short = [encoded(100, 1)], [encoded(300, 1)]
    assert join_room(*short, slots, 8) is None  # no decode steps to share
