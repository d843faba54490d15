"""``HFEngine.cancel`` for a generation whose engine call has begun on the event loop but whose
thread has not started yet (the default executor is busy: the server counts prompt tokens and
scores on it too)."""

from __future__ import annotations

import asyncio
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from benchcheck.engines.base import GenerateRequest, Generation
from benchcheck.engines.hf.engine import HFEngine

LONG = 2000  # new tokens: a random-weight model never stops by itself


def test_a_cancel_while_the_call_waits_for_a_thread_is_not_lost(tiny_model: Path) -> None:
    engine = HFEngine(tiny_model, device="cpu")

    async def main() -> list[Generation | object]:
        loop = asyncio.get_running_loop()
        loop.set_default_executor(ThreadPoolExecutor(1))
        free = threading.Event()
        busy = loop.run_in_executor(None, free.wait)  # the one thread is taken
        call = asyncio.create_task(engine.generate([GenerateRequest("gone", "Tell a long story.", (), LONG)]))
        await asyncio.sleep(0.2)  # the call has begun and waits for the thread
        engine.cancel(["gone"])  # its client went away (the server's handler was cancelled)
        free.set()
        await busy
        return list(await call)

    (gen,) = asyncio.run(main())
    assert isinstance(gen, Generation)
    assert gen.completion_tokens < LONG
    assert not engine._cancellations._running and not engine._cancellations._gone
