"""An ``hf`` engine call whose task is cancelled (Ctrl-C cancels the run's tasks) stops at its next
batch: the worker thread cannot be cancelled, so the call tells it to stop, waits for it and raises
``CallCancelled`` with the answers of the batches that landed. Before, the task was cancelled at once
while its thread ran every batch of the call, and the process could not exit until it had
(a 144-item call of 32 frames: minutes on a GPU), then threw those answers away."""

from __future__ import annotations

import asyncio
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from benchcheck.engines.base import CallCancelled, GenerateRequest, LetterScores, ScoreRequest
from benchcheck.engines.hf.config import HFConfig
from benchcheck.engines.hf.engine import HFEngine

N = 12
LONG = 2000  # new tokens: a random-weight model never stops by itself


def _engine(tiny_model: Path) -> HFEngine:
    # One request a batch, so that every batch is one lm_head call and a boundary to stop at.
    return HFEngine(tiny_model, device="cpu", config=HFConfig(max_batch_size=1, first_chunk=1, sort_window=1))


def _counting(engine: HFEngine, on_call: Any = None) -> list[float]:
    """The times of the model's lm_head calls (once a scoring batch, once a decode step)."""
    calls: list[float] = []

    def hook(*_: object) -> None:
        calls.append(time.monotonic())
        if on_call is not None:
            on_call(len(calls))

    engine.model.lm_head.register_forward_hook(hook)
    return calls


def test_a_cancelled_score_call_stops_at_its_next_batch_with_what_landed(tiny_model: Path) -> None:
    engine = _engine(tiny_model)
    reqs = [ScoreRequest(f"q{i}", f"Question {i}: what is shown?\nOptions:\nA. red\nB. blue\nAnswer:")
            for i in range(N)]
    cancelled_at: list[int] = []

    async def main() -> BaseException:
        loop = asyncio.get_running_loop()
        call = asyncio.create_task(engine.score(reqs))

        def on_call(n: int) -> None:
            if n == 3:  # the third batch ran: cancel the call, as Ctrl-C cancels the run's tasks
                cancelled_at.append(n)
                loop.call_soon_threadsafe(call.cancel)
                time.sleep(0.3)  # the loop sets the stop meanwhile

        _counting(engine, on_call)
        try:
            await call
        except BaseException as e:  # the cancellation is what is tested
            return e
        raise AssertionError("the call was not cancelled")

    calls = _counting(engine)  # the same hook list is read below
    err = asyncio.run(main())
    assert isinstance(err, CallCancelled), type(err)
    assert isinstance(err, asyncio.CancelledError)  # the cancellation goes on
    answered = [a for a in err.answers if a is not None]
    assert len(err.answers) == N
    # the batches that landed (3, and at most the one that started while the stop was on its way)
    assert 3 <= len(answered) <= 4, err.answers
    assert all(isinstance(a, LetterScores) for a in answered)
    assert [a.request_id for a in answered] == [f"q{i}" for i in range(len(answered))]  # type: ignore[union-attr]
    assert err.answers[len(answered):] == [None] * (N - len(answered))
    # the thread has stopped: no forward after the call returned, and the model's lock is free
    ran = len(calls)
    time.sleep(1.0)
    assert len(calls) == ran <= 4
    assert engine._lock.acquire(timeout=0.1)
    engine._lock.release()
    # the engine answers the next call in full
    assert all(isinstance(a, LetterScores) for a in engine.score_sync(reqs[:2]))


def test_a_cancelled_generation_stops_decoding_and_gives_no_cut_text(tiny_model: Path) -> None:
    engine = _engine(tiny_model)
    steps = _counting(engine)

    async def main() -> BaseException:
        call = asyncio.create_task(engine.generate([GenerateRequest("g", "Tell a long story.", (), LONG)]))
        while len(steps) < 5:  # decoding
            await asyncio.sleep(0.01)
        call.cancel()
        try:
            await call
        except BaseException as e:
            return e
        raise AssertionError("the call was not cancelled")

    err = asyncio.run(main())
    assert isinstance(err, CallCancelled), type(err)
    assert err.answers == [None]  # a text cut short is no answer
    ran = len(steps)
    time.sleep(1.0)
    assert len(steps) == ran < LONG // 4  # the decode loop stopped, not at its 2000th step
    assert not engine._cancellations._running


@pytest.mark.parametrize("when", ["before", "after"])
def test_score_sync_with_a_stop_never_set_or_set_at_the_end(tiny_model: Path, when: str) -> None:
    """The stop flag changes nothing until it is set; set after the last batch, every answer comes back."""
    from benchcheck.engines.hf.schedule.pipeline import Stopped

    engine = _engine(tiny_model)
    reqs = [ScoreRequest(f"q{i}", f"Question {i}?\nA. x\nB. y\nAnswer:") for i in range(3)]
    stop = threading.Event()
    if when == "before":
        assert all(isinstance(a, LetterScores) for a in engine.score_sync(reqs, stop))
        return
    _counting(engine, lambda n: stop.set() if n == 3 else None)
    with pytest.raises(Stopped) as got:
        engine.score_sync(reqs, stop)
    assert all(isinstance(a, LetterScores) for a in got.value.done)
