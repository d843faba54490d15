"""Op ``decode_join``: a generation batch held, prefilled, for the next batch to join its K/V
reservation, both then decoded together (a step reads the weights once for both)."""

from __future__ import annotations

from collections import Counter

import numpy as np
import pytest
import torch
from hf_helpers import variant

from benchcheck.engines import Failure, GenerateRequest, Generation
from benchcheck.engines.hf.engine import HFEngine
from benchcheck.engines.hf.forward.batch import Batch, stage, upload
from benchcheck.engines.hf.forward.generate import Prefilled, prefill
from benchcheck.engines.hf.inputs.encoder import EncodedPrompt
from benchcheck.engines.hf.schedule.pipeline import Encoded, join_fits, row_slots

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


def budgeted(engine: HFEngine, reqs: list[GenerateRequest], *ops: str, first_chunk: int = 1,
             rows: int = 5) -> HFEngine:
    """``engine`` with ``ops``, chunks of ``first_chunk`` requests doubling: a planned batch has K/V
    room for one of the longest rows of ``reqs`` (``five_rows``), a decode for ``rows`` of them."""
    one = five_rows(engine, reqs) // 5
    other = variant(engine, *ops, first_chunk=first_chunk, chunk_growth=2, max_batch_size=8, max_batch_tokens=one,
                    decode_batch_tokens=one * rows)
    assert isinstance(other, HFEngine)
    return other


def run(engine: HFEngine, reqs: list[GenerateRequest], *ops: str) -> tuple[list[str], Counter[int]]:
    other = budgeted(engine, reqs, *ops)
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
    # The held row alone; the joining pair again by itself (a batch run again after running out of
    # memory is neither held nor joined); then the 5.
    assert rows == Counter({1: 1, 2: 1, 5: 1}), rows
    assert calls[0] == 1


def test_one_request_that_runs_out_of_memory_joining_runs_again_by_itself(
        hf_engine: HFEngine, monkeypatch: pytest.MonkeyPatch) -> None:
    """A joining batch of one request cannot be split: too large together with the held batch, it
    runs by itself, as it would have without the op, and is answered."""
    reqs = requests(2)

    def join_out_of_memory(self: Prefilled, *a: object, **kw: object) -> None:
        raise torch.cuda.OutOfMemoryError("injected: no room for the joining row")

    monkeypatch.setattr(Prefilled, "join", join_out_of_memory)
    engine = budgeted(hf_engine, reqs, "+decode_join")
    out = engine.generate_sync(reqs)
    alone = [g.text for r in reqs for g in hf_engine.generate_sync([r]) if isinstance(g, Generation)]
    assert [g.text if isinstance(g, Generation) else g for g in out] == alone
    assert engine.decode_rows == Counter({1: 2}), engine.decode_rows


def test_a_held_batch_whose_joiner_fails_decodes_before_the_next_batch_reserves(
        hf_engine: HFEngine, monkeypatch: pytest.MonkeyPatch) -> None:
    """The joining batch fails (not for memory: it fails as it is, not split): its requests fail
    alone, and the held batch decodes at once, before the batch after it reserves its own rows,
    not when landed after it."""
    reqs = requests()
    order: list[int] = []  # rows of each decode, in the order they are queued
    real_decode = Prefilled.decode  # every decode goes through it, a plain batch's too

    def join_fails(self: Prefilled, *a: object, **kw: object) -> None:
        raise ValueError("injected: the joining rows are refused")

    def decode(self: Prefilled, *a: object, rows: int | None = None, **kw: object) -> object:
        order.append(rows or self.prefilled)
        return real_decode(self, *a, rows=rows, **kw)  # type: ignore[arg-type]

    monkeypatch.setattr(Prefilled, "join", join_fails)
    monkeypatch.setattr(Prefilled, "decode", decode)
    engine = budgeted(hf_engine, reqs, "+decode_join")
    out = engine.generate_sync(reqs)
    assert [type(g).__name__ for g in out] == ["Generation"] + ["Failure"] * 2 + ["Generation"] * 5
    assert all("injected" in g.message for g in out[1:3] if isinstance(g, Failure))
    assert order == [1, 5]  # the held row, then the last five
    alone = [g.text for r in reqs for g in hf_engine.generate_sync([r]) if isinstance(g, Generation)]
    assert [g.text for g in out if isinstance(g, Generation)] == [alone[0], *alone[3:]]


def test_a_batch_that_does_not_fit_beside_the_held_one_runs_after_it_alone(hf_engine: HFEngine) -> None:
    """A budget of three rows: the first request is held (one more row would fit beside it), the
    next two would not (the held row's reservation and the joint one of three rows, alive together
    while copied, are four rows), so the held row decodes alone and the two after it."""
    reqs = requests()
    engine = budgeted(hf_engine, reqs, "+decode_join", rows=3)
    out = engine.generate_sync(reqs)
    alone = [g.text for r in reqs for g in hf_engine.generate_sync([r]) if isinstance(g, Generation)]
    assert [g.text for g in out if isinstance(g, Generation)] == alone
    # The held row alone, the two after it, then the last five as the budget plans them (2 + 3).
    assert engine.decode_rows == Counter({1: 1, 2: 2, 3: 1}), engine.decode_rows


def test_joining_rows_grow_the_reservation_to_their_width_and_new_tokens(hf_engine: HFEngine) -> None:
    """The held row is copied into a reservation wide enough for longer prompts that generate more
    tokens; every row decodes as it would alone, and the reservation is freed once decoded."""
    reqs = [GenerateRequest("short", "Hi.", max_tokens=3),
            GenerateRequest("long1", "Tell me a story about " + "a red ball and " * 9 + "a dog.", max_tokens=NEW + 4),
            GenerateRequest("long2", "Describe " + "a green field and " * 7 + "the sky.", max_tokens=NEW)]
    engine = variant(hf_engine, "+decode_join")
    assert isinstance(engine, HFEngine)
    prompts = [engine.encoder.encode(r.prompt, r.images, None) for r in reqs]

    def batch(ps: list[EncodedPrompt]) -> Batch:
        return upload(stage(ps, engine.device, engine.pad_id, right=True), engine.pixels, engine.dtype)

    held = prefill(engine.model, batch(prompts[:1]), [3], apart=True)
    assert prompts[0].n_tokens < held.length < prompts[1].n_tokens
    held.join(batch(prompts[1:]), [NEW + 4, NEW])
    assert held.length >= prompts[1].n_tokens and held.steps == NEW + 4
    tokens = held.decode(engine.stop_ids, engine.pad_id)()
    assert held.cache is None  # the reservation freed once decoded: the next batch's may take its memory
    with pytest.raises(AssertionError, match="decoded once"):
        held.decode(engine.stop_ids, engine.pad_id)
    alone = [g for r in reqs for g in engine.generate_sync([r])]
    assert [engine.tokenizer.decode(t, skip_special_tokens=True) for t in tokens] == \
        [g.text for g in alone if isinstance(g, Generation)]
    assert [len(t) for t in tokens] == [g.completion_tokens for g in alone if isinstance(g, Generation)]


def encoded(n_tokens: int, new: int) -> Encoded:
    ids = np.zeros(n_tokens, np.int64)
    return Encoded(EncodedPrompt(ids, ids, (), None, None), new, 0.0)


def test_join_fits_counts_the_joint_reservation_and_the_held_one_as_the_planner_counts_rows() -> None:
    a, b = [encoded(100, 8)], [encoded(300, 4), encoded(50, 4)]
    slots = row_slots(300, 8)  # every row: the longest prompt plus the most new tokens
    assert join_fits(a, b, 4 * slots, 8)  # 3 rows joint + 1 held, alive together while copied
    assert not join_fits(a, b, 4 * slots - 1, 8)  # over the K/V budget
    assert not join_fits(a, b, 4 * slots, 2)  # more rows than one batch may hold
    assert join_fits(a, [], 3 * row_slots(100, 8), 8)  # one more row like the held one would fit
    assert not join_fits(a, [], 3 * row_slots(100, 8) - 1, 8)
    assert not join_fits([], b, 10 * slots, 8)  # nothing held
    assert not join_fits([encoded(100, 1)], [encoded(300, 1)], 10 * slots, 8)  # no decode steps to share


def test_a_held_batch_whose_joiner_runs_out_of_memory_in_its_prefill_is_decoded_alone(
        hf_engine: HFEngine, monkeypatch: pytest.MonkeyPatch) -> None:
    """The joining rows' prefill runs out of device memory after the held rows were copied into the
    joint reservation: the held rows decode alone from there (the rows nobody filled left out)."""
    import benchcheck.engines.hf.forward.generate as generate

    reqs = requests()
    real = generate._prefill
    calls = [0]

    def second_prefill_out_of_memory(*a: object, **kw: object) -> torch.Tensor:
        calls[0] += 1
        if calls[0] == 2:  # the first is the held row's; the second the joining batch's first
            raise torch.cuda.OutOfMemoryError("injected: no room for the joining rows' prefill")
        return real(*a, **kw)  # type: ignore[arg-type]

    monkeypatch.setattr(generate, "_prefill", second_prefill_out_of_memory)
    texts, rows = run(hf_engine, reqs, "+decode_join")
    alone = [g.text for r in reqs for g in hf_engine.generate_sync([r]) if isinstance(g, Generation)]
    assert texts == alone
    assert rows == Counter({1: 1, 2: 1, 5: 1}), rows  # the held row alone, the joiner again by itself, the 5


def test_a_batch_after_a_held_one_it_does_not_fit_beside_is_not_timed_with_its_decode(
        hf_engine: HFEngine, monkeypatch: pytest.MonkeyPatch) -> None:
    """The held row decodes alone before the next batch runs: that decode is the held row's time,
    never the next batch's (each batch is timed from its own start)."""
    import time

    reqs = requests()
    # the held row and the two after it do not fit together
    engine = budgeted(hf_engine, reqs, "+decode_join", rows=3)
    real = Prefilled.decode
    slow = 3.0  # far above the batches' own time on a loaded machine (1.2 s seen), which must not add it

    def slow_held_decode(self: Prefilled, *a: object, **kw: object) -> object:
        if kw.get("rows") == 1:  # the held row decoded alone (a joint decode takes every row)
            time.sleep(slow)
        return real(self, *a, **kw)  # type: ignore[arg-type]

    monkeypatch.setattr(Prefilled, "decode", slow_held_decode)
    out = engine.generate_sync(reqs)
    assert all(isinstance(g, Generation) for g in out), out
    assert engine.decode_rows == Counter({1: 1, 2: 2, 3: 1}), engine.decode_rows
    latency = [g.latency_s for g in out if isinstance(g, Generation)]
    assert latency[0] >= slow  # the held row's own decode
    assert max(latency[1:3]) < slow, latency  # the two after it: their own time only


def test_a_held_batch_whose_own_decode_runs_out_of_memory_is_run_again_in_halves(
        hf_engine: HFEngine, monkeypatch: pytest.MonkeyPatch) -> None:
    """The held batch of two rows cannot be joined (no room beside it) and its decode alone runs out
    of device memory, both when the next batch comes and when it is landed: as any batch too large
    for the device's memory, its halves run again, and every request gets the text it gets alone."""
    reqs = requests()
    real = Prefilled.decode
    first: list[Prefilled] = []
    failed = [0]

    def held_decode_out_of_memory(self: Prefilled, *a: object, rows: int | None = None, **kw: object) -> object:
        if rows == 2 and (not first or first[0] is self):  # the first held pair, each time it is decoded alone
            first[:] = [self]
            failed[0] += 1
            raise torch.cuda.OutOfMemoryError("injected: no room to decode the held rows")
        return real(self, *a, rows=rows, **kw)  # type: ignore[arg-type]

    monkeypatch.setattr(Prefilled, "decode", held_decode_out_of_memory)
    # room to hold the pair; the four after it do not fit beside it
    engine = budgeted(hf_engine, reqs, "+decode_join", first_chunk=2)
    out = engine.generate_sync(reqs)
    assert failed[0] == 2
    assert all(isinstance(g, Generation) for g in out), out
    alone = [g.text for r in reqs for g in hf_engine.generate_sync([r]) if isinstance(g, Generation)]
    assert [g.text for g in out if isinstance(g, Generation)] == alone
    # Every row decoded once: the first pair's rows in its halves, however they were batched.
    assert sum(n * k for n, k in engine.decode_rows.items()) == len(reqs), engine.decode_rows




def test_the_halves_of_a_held_batch_whose_decode_ran_out_of_memory_are_not_joined_back(
        hf_engine: HFEngine, monkeypatch: pytest.MonkeyPatch) -> None:
    """The device cannot decode the first two requests together (any other rows fit): the held
    pair runs out of memory and is split; its halves must not be joined back into the decode that
    ran out (the second half, one request, would then run out as a batch of its own and fail).
    Every request gets the text it gets alone, and the pair's two rows never decode together again."""
    reqs = requests()
    engine = budgeted(hf_engine, reqs, "+decode_join", first_chunk=2)
    pair = {"g0", "g1"}
    tried: list[list[str]] = []  # the requests of each decode, in order
    watcher = engine._cancellations.watcher  # told every decode's request ids (its rows, in order)

    class Rows:
        def __init__(self, ids: list[str]) -> None:
            self.ids, self.stopped = list(ids), watcher(ids)

        def __call__(self) -> list[bool] | None:
            return self.stopped()

    real = Prefilled.decode

    def pair_out_of_memory(self: Prefilled, *a: object, rows: int | None = None, **kw: object) -> object:
        stopped = kw.get("stopped", a[6] if len(a) > 6 else None)  # after the stop ids ... planless
        assert isinstance(stopped, Rows)
        ids = stopped.ids[: rows or self.prefilled]
        tried.append(ids)
        if pair <= set(ids):
            raise torch.cuda.OutOfMemoryError("injected: no room to decode the first two requests together")
        return real(self, *a, rows=rows, **kw)  # type: ignore[arg-type]

    monkeypatch.setattr(engine._cancellations, "watcher", Rows)
    monkeypatch.setattr(Prefilled, "decode", pair_out_of_memory)
    out = engine.generate_sync(reqs)
    assert all(isinstance(g, Generation) for g in out), out
    alone = [g.text for r in reqs for g in hf_engine.generate_sync([r]) if isinstance(g, Generation)]
    assert [g.text for g in out if isinstance(g, Generation)] == alone
    together = [ids for ids in tried if pair <= set(ids)]
    assert len(together) == 2, tried  # the held pair's own decode, when the next batch came and when landed


@pytest.mark.parametrize(("staging", "launching"), [("+stage_ahead", "+launch_thread"),
                                                    ("-stage_ahead", "-launch_thread")])
def test_a_held_batch_split_when_landed_in_a_call_of_several_chunks_with_staging(
        hf_engine: HFEngine, monkeypatch: pytest.MonkeyPatch, staging: str, launching: str) -> None:
    """Chunks of 2, 4 and 8 requests: the held pair's decode runs out of device memory whenever it is
    tried, while later batches are staged ahead. Its halves run with their own requests' inputs
    (each built once, staged or not), and every request gets the text it gets alone; so too with
    the decodes launched from the model's own thread (op ``launch_thread``)."""
    import threading

    import benchcheck.engines.hf.engine as engine_module

    reqs = requests(14)
    real = Prefilled.decode
    first: list[Prefilled] = []

    def held_pair_out_of_memory(self: Prefilled, *a: object, rows: int | None = None, **kw: object) -> object:
        if (rows or self.prefilled) == 2 and (not first or first[0] is self):
            first[:] = [self]
            raise torch.cuda.OutOfMemoryError("injected: no room to decode the held pair")
        return real(self, *a, rows=rows, **kw)  # type: ignore[arg-type]

    built: list[int] = []  # rows of each batch's host inputs, staged or not
    ahead = [0]  # of them, built on the staging thread
    real_stage = engine_module.stage

    def counted(prompts: list[EncodedPrompt], *a: object, **kw: object) -> object:
        built.append(len(prompts))
        ahead[0] += threading.current_thread().name.startswith("hf-stage")
        return real_stage(prompts, *a, **kw)  # type: ignore[arg-type]

    monkeypatch.setattr(Prefilled, "decode", held_pair_out_of_memory)
    monkeypatch.setattr(engine_module, "stage", counted)
    engine = budgeted(hf_engine, reqs, "+decode_join", staging, launching, first_chunk=2)
    try:
        out = engine.generate_sync(reqs)
    finally:  # the shared model's launching and staging threads let go: later tests count the
        # model's threads, and one deep-copies the model (an executor's queue cannot be copied)
        launcher, engine._state.launcher = engine._state.launcher, None
        if launcher is not None:
            launcher.close()
        stager, engine._state.stager = engine._state.stager, None
        if stager is not None:
            stager.shutdown(wait=True)
    rows_built, staged = sum(built), ahead[0]
    assert first, "no held pair"
    assert [g.request_id for g in out] == [r.request_id for r in reqs]
    assert all(isinstance(g, Generation) for g in out), out
    alone = [g.text for r in reqs for g in hf_engine.generate_sync([r]) if isinstance(g, Generation)]
    assert [g.text for g in out if isinstance(g, Generation)] == alone
    # Each batch's inputs built once: every request's row once, the held pair's twice (whole, halves).
    assert rows_built == len(reqs) + 2, built
    assert (staged > 0) == (staging == "+stage_ahead")
