"""A generation batch's host inputs staged while the batch before it runs (op ``stage_ahead``).

The pipeline tells the engine of the batch after the one about to run (``run_pipeline``'s
``stage``): the chunk's next batch, or the next chunk's first once that chunk is encoded, never
waiting for encoding to do so. The engine builds that batch's padded inputs and page-locked
frames on its staging thread, and the batch's launch takes them instead of building its own.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest
from hf_helpers import make_jpeg, variant
from pipeline_fakes import JOBS, PLAN, AtOnce, encode

from benchcheck.engines.base import Failure, GenerateRequest, Generation
from benchcheck.engines.hf.engine import HFEngine
from benchcheck.engines.hf.schedule.pipeline import Encoded, Job, PlannedBatch, run_pipeline


def test_each_batch_is_staged_once_before_the_batch_ahead_of_it_runs() -> None:
    events: list[tuple[str, list[int]]] = []

    def run(batch: PlannedBatch, enc: list[Encoded]) -> Callable[[], list[str]]:
        events.append(("run", batch.idx))
        return lambda: [f"ok {JOBS[i].request_id}" for i in batch.idx]

    def stage(batch: PlannedBatch, enc: list[Encoded]) -> None:
        assert len(enc) == len(batch.idx)
        events.append(("stage", batch.idx))

    out = run_pipeline(JOBS, encode, AtOnce(), PLAN, run, stage=stage)  # type: ignore[arg-type]
    assert out == [f"ok r{i}" for i in range(7)]
    runs = [idx for kind, idx in events if kind == "run"]
    stages = [idx for kind, idx in events if kind == "stage"]
    assert len(runs) == 4 and stages == runs[1:]  # every batch but the first, once, in run order
    for k, idx in enumerate(runs[1:]):  # staged just before the batch ahead of it was run
        at = events.index(("stage", idx))
        assert events[at + 1] == ("run", runs[k])


def test_the_next_chunk_is_staged_only_once_encoded_and_the_pipeline_never_waits_to_stage() -> None:
    release = threading.Event()  # the second chunk's requests encode only once the first batch ran

    def held_encode(block: list[Job]) -> list[Encoded | Failure]:
        if block[0].request_id != "r0":
            assert release.wait(30)
        return encode(block)

    events: list[tuple[str, list[int]]] = []

    def run(batch: PlannedBatch, enc: list[Encoded]) -> Callable[[], list[str]]:
        events.append(("run", batch.idx))
        release.set()
        return lambda: [f"ok {JOBS[i].request_id}" for i in batch.idx]

    def stage(batch: PlannedBatch, enc: list[Encoded]) -> None:
        events.append(("stage", batch.idx))

    with ThreadPoolExecutor(2) as threads:
        out = run_pipeline(JOBS, held_encode, threads, PLAN, run, stage=stage)  # type: ignore[arg-type]
    assert out == [f"ok r{i}" for i in range(7)]
    assert events[0] == ("run", [0])  # nothing staged: the next chunk was not encoded yet
    assert [kind for kind, _ in events].count("run") == 4
    assert len({tuple(idx) for kind, idx in events if kind == "stage"}) == len([k for k, _ in events if k == "stage"])


LOCKS: list[bool] = []  # whether the model's lock was held when each batch's inputs were built


@pytest.fixture
def staged_on(monkeypatch: pytest.MonkeyPatch, hf_engine: HFEngine) -> list[str]:
    """Names of the threads that built each batch's host inputs (``forward.batch.stage``)."""
    import benchcheck.engines.hf.engine as engine_module

    threads: list[str] = []
    real = engine_module.stage
    LOCKS.clear()

    def spy(*a: Any, **kw: Any) -> Any:
        threads.append(threading.current_thread().name)
        LOCKS.append(hf_engine._lock.locked())
        return real(*a, **kw)

    monkeypatch.setattr(engine_module, "stage", spy)
    return threads


def test_an_engine_stages_its_later_batches_off_the_launching_thread_with_the_same_texts(
        hf_engine: HFEngine, staged_on: list[str]) -> None:
    reqs = [GenerateRequest(f"g{i}", f"Describe scene {i}.", images=(make_jpeg(i),), max_tokens=3 + i % 2)
            for i in range(6)]
    # One chunk of every request: each batch after the first is staged whatever the encoding's pace.
    engine: HFEngine = variant(hf_engine, "+stage_ahead", first_chunk=len(reqs))  # type: ignore[assignment]
    ahead = engine.generate_sync(reqs)
    on_stager = sum(name.startswith("hf-stage") for name in staged_on)
    assert len(staged_on) >= 2 and on_stager == len(staged_on) - 1  # all but the first batch's
    assert LOCKS[0] is False  # the first batch's, by the calling thread before it takes the lock
    staged_on.clear()
    inline = variant(engine, "-stage_ahead").generate_sync(reqs)  # type: ignore[attr-defined]
    assert staged_on and not any(name.startswith("hf-stage") for name in staged_on)
    assert all(isinstance(g, Generation) for g in ahead)
    assert [g.text for g in ahead] == [g.text for g in inline]  # type: ignore[union-attr]


def test_a_staged_batch_that_fails_fails_only_its_own_requests(hf_engine: HFEngine,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    import benchcheck.engines.hf.engine as engine_module

    real = engine_module.stage

    def refuse(items: Any, *a: Any, **kw: Any) -> Any:
        if any(len(it.frames) == 2 for it in items):
            raise ValueError("cannot stage this one")
        return real(items, *a, **kw)

    monkeypatch.setattr(engine_module, "stage", refuse)
    reqs = [GenerateRequest(f"g{i}", "Describe.", images=(make_jpeg(i),) * (2 if i == 4 else 1), max_tokens=2)
            for i in range(6)]
    out = variant(hf_engine, "+stage_ahead", first_chunk=len(reqs)).generate_sync(reqs)  # type: ignore[attr-defined]
    assert [type(g).__name__ for g in out].count("Failure") >= 1
    bad = [g for g in out if isinstance(g, Failure)]
    assert any(g.request_id == "g4" for g in bad) and all("cannot stage this one" in g.message for g in bad)
    assert isinstance(out[0], Generation)


def test_a_staging_thread_shut_down_mid_call_leaves_each_batch_to_build_its_own(
        hf_engine: HFEngine, monkeypatch: pytest.MonkeyPatch) -> None:
    """The engine closed while a call runs (``aclose`` shuts the staging thread, cancelling what
    is queued): a batch whose staging was cancelled, and one that could no longer be staged, build
    their inputs at their launch; the call's texts are those of a call without staging."""
    import benchcheck.engines.hf.engine as engine_module

    reqs = [GenerateRequest(f"g{i}", f"Describe scene {i}.", images=(make_jpeg(i),), max_tokens=3)
            for i in range(6)]
    engine: HFEngine = variant(hf_engine, "+stage_ahead", first_chunk=len(reqs))  # type: ignore[assignment]
    want = [g.text for g in variant(engine, "-stage_ahead").generate_sync(reqs)]  # type: ignore[attr-defined]
    stager = engine._stager()
    hold = threading.Event()
    stager.submit(hold.wait, 30)  # the one staging thread busy: what is staged next waits in its queue
    real = engine_module.upload

    def first_upload(host: Any, *a: Any, **kw: Any) -> Any:
        if not hold.is_set():  # the first batch launches: the next one is queued for staging by now
            stager.shutdown(wait=False, cancel_futures=True)
            hold.set()
        return real(host, *a, **kw)

    monkeypatch.setattr(engine_module, "upload", first_upload)
    try:
        got = engine.generate_sync(reqs)
    finally:
        state = engine._state
        state.stager = None  # the next test's engine makes a new one
    assert all(isinstance(g, Generation) for g in got)
    assert [g.text for g in got] == want  # type: ignore[union-attr]
