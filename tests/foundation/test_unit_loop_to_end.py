"""A cancelled run (Ctrl-C) lets go of nothing while work of it still runs: ``gather_to_end`` waits
for every task it started, and ``in_thread_to_end`` for its thread, before the cancellation goes
on. ``asyncio.gather`` went on at its first cancelled task: a unit's lease was let go (and the
engine closed) while another worker still ended its engine call and appended its rows."""

from __future__ import annotations

import asyncio
import threading
import time

from benchcheck.unit_loop import gather_to_end, in_thread_to_end


def test_a_cancelled_gather_waits_for_every_task_to_end() -> None:
    ended: list[str] = []

    async def quick() -> None:
        await asyncio.sleep(30)

    async def slow_to_stop() -> None:
        try:
            await asyncio.sleep(30)
        except asyncio.CancelledError:
            await asyncio.sleep(0.3)  # ends its call, appends what it finished
            ended.append("slow")
            raise

    async def main() -> list[str]:
        run = asyncio.create_task(gather_to_end([quick(), slow_to_stop()]))
        await asyncio.sleep(0.05)
        run.cancel()
        try:
            await run
        except asyncio.CancelledError:
            return list(ended)  # what had ended when the cancellation came through
        raise AssertionError("not cancelled")

    assert asyncio.run(main()) == ["slow"]


def test_a_failing_task_cancels_the_others_and_its_error_goes_on_after_them() -> None:
    ended: list[str] = []

    async def fails() -> None:
        await asyncio.sleep(0.05)
        raise OSError(28, "No space left on device", "r.jsonl")

    async def other() -> None:
        try:
            await asyncio.sleep(30)
        except asyncio.CancelledError:
            await asyncio.sleep(0.2)
            ended.append("other")
            raise

    async def main() -> None:
        await gather_to_end([fails(), other()])

    try:
        asyncio.run(main())
    except OSError as e:  # the error itself, not a group of them
        assert e.filename == "r.jsonl" and ended == ["other"]
    else:
        raise AssertionError("no error")


def test_a_thread_is_waited_for_when_cancelled_and_cancelled_again() -> None:
    done = threading.Event()

    def append() -> None:
        time.sleep(0.5)
        done.set()

    async def main() -> bool:
        t = asyncio.create_task(in_thread_to_end(append))
        await asyncio.sleep(0.05)
        t.cancel()
        await asyncio.sleep(0.05)
        t.cancel()  # the event loop's shutdown cancels every task once more
        try:
            await t
        except asyncio.CancelledError:
            return done.is_set()
        raise AssertionError("not cancelled")

    assert asyncio.run(main())
