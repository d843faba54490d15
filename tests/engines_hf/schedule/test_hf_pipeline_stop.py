"""``run_pipeline``'s ``stop``: once set, no further batch runs; the batch in flight lands and
``Stopped`` carries every landed result, None for the requests of batches that never ran (or that
the stop cut short: ``BatchCut``), never a failure made up for them."""

from __future__ import annotations

import threading
from collections.abc import Callable

import pytest
from pipeline_fakes import JOBS, PLAN, AtOnce, encode

from benchcheck.engines.hf.schedule.pipeline import BatchCut, Encoded, Job, PlannedBatch, Stopped, run_pipeline


def test_a_stop_ends_the_call_at_the_next_batch_with_what_landed() -> None:
    stop = threading.Event()
    ran: list[list[int]] = []

    def run(batch: PlannedBatch, enc: list[Encoded]) -> Callable[[], list[str]]:
        ran.append(batch.idx)
        if len(ran) == 2:
            stop.set()  # Ctrl-C while the second batch runs
        return lambda: [f"ok {JOBS[i].request_id}" for i in batch.idx]

    with pytest.raises(Stopped) as got:
        run_pipeline(JOBS, encode, AtOnce(), PLAN, run, stop=stop)  # type: ignore[arg-type]
    assert len(ran) == 2  # the four batches' third never ran
    landed = [i for b in ran for i in b]
    assert got.value.done == [f"ok r{i}" if i in landed else None for i in range(7)]


def test_a_batch_cut_by_the_stop_is_left_unanswered() -> None:
    stop = threading.Event()

    def run(batch: PlannedBatch, enc: list[Encoded]) -> Callable[[], list[str]]:
        def finish() -> list[str]:
            if 0 not in batch.idx:
                stop.set()
                raise BatchCut  # its decode stopped early: no answer
            return [f"ok {JOBS[i].request_id}" for i in batch.idx]
        return finish

    with pytest.raises(Stopped) as got:
        run_pipeline(JOBS, encode, AtOnce(), PLAN, run, stop=stop)  # type: ignore[arg-type]
    assert got.value.done[0] == "ok r0"
    assert got.value.done[1:] == [None] * 6


def test_a_stop_set_before_the_call_encodes_nothing() -> None:
    stop = threading.Event()
    stop.set()
    encoded: list[Job] = []

    def counting(block: list[Job]) -> list[object]:
        encoded.extend(block)
        return list(encode(block))

    def run(batch: PlannedBatch, enc: list[Encoded]) -> Callable[[], list[str]]:
        raise AssertionError("no batch runs")

    with pytest.raises(Stopped) as got:
        run_pipeline(JOBS, counting, AtOnce(), PLAN, run, stop=stop)  # type: ignore[arg-type]
    assert got.value.done == [None] * 7 and not encoded


def test_a_stop_never_set_changes_nothing() -> None:
    out = run_pipeline(JOBS, encode, AtOnce(), PLAN,  # type: ignore[arg-type]
                       lambda b, e: lambda: [f"ok {JOBS[i].request_id}" for i in b.idx], stop=threading.Event())
    assert out == [f"ok r{i}" for i in range(7)]
