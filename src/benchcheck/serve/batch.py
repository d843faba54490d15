"""Request batching for the server: what arrives while the engine is busy goes in as one call."""

from __future__ import annotations

import asyncio
import logging
from collections import deque
from collections.abc import Awaitable, Callable, Sequence
from typing import Generic, TypeVar

log = logging.getLogger("benchcheck.serve")

Req = TypeVar("Req")
Res = TypeVar("Res")


class EngineCallError(RuntimeError):
    """The engine raised instead of returning one result per request."""


class Batcher(Generic[Req, Res]):
    """Queues single requests and hands them to ``run`` in batches of at most ``max_batch``.

    ``slots`` bounds the engine calls in flight (shared by all batchers of one engine): with one
    slot, requests that arrive while a call runs wait and then go in together as the next batch.
    """

    def __init__(
        self,
        run: Callable[[Sequence[Req]], Awaitable[Sequence[Res]]],
        max_batch: int,
        slots: asyncio.Semaphore,
        each: Callable[[Sequence[Req]], Sequence[Awaitable[Res]]] | None = None,
    ) -> None:
        """``each``, when the engine has it, gives one awaitable per request of a batch: each
        request is answered when its own result is ready (a slow request does not hold up its
        batch-mates) and an exception fails that request only."""
        if max_batch < 1:
            raise ValueError("max_batch must be >= 1")
        self._run = run
        self._each = each
        self._max_batch = max_batch
        self._slots = slots
        self._pending: deque[tuple[Req, asyncio.Future[Res]]] = deque()
        self._wake = asyncio.Event()
        self._worker: asyncio.Task[None] | None = None
        self._calls: set[asyncio.Task[None]] = set()
        # Counters for /health-style stats and tests: engine calls, requests, largest batch.
        self.calls = 0
        self.requests = 0
        self.largest = 0

    @property
    def waiting(self) -> int:
        """Requests queued and not yet handed to the engine."""
        return len(self._pending)

    def start(self) -> None:
        """Start the dispatch loop (call inside the running event loop)."""
        if self._worker is None:
            self._worker = asyncio.create_task(self._dispatch())

    async def stop(self) -> None:
        """Stop dispatching, fail whatever is still queued, and end the engine calls in progress
        (whose requests were cut: Ctrl-C, or a drain that ran out of time): an in-process engine's
        call stops at its next batch, and the engine is closed after them, not under them."""
        if self._worker is not None:
            self._worker.cancel()
            await asyncio.gather(self._worker, return_exceptions=True)
            self._worker = None
        calls = list(self._calls)
        for task in calls:
            task.cancel()
        await asyncio.gather(*calls, return_exceptions=True)
        while self._pending:
            _, fut = self._pending.popleft()
            if not fut.done():
                fut.set_exception(EngineCallError("server shutting down"))

    async def submit(self, req: Req) -> Res:
        """Queue one request and wait for its result."""
        fut: asyncio.Future[Res] = asyncio.get_running_loop().create_future()
        self._pending.append((req, fut))
        self._wake.set()
        return await fut

    async def _dispatch(self) -> None:
        while True:
            await self._wake.wait()
            self._wake.clear()
            while self._pending:
                await self._slots.acquire()
                # One loop turn lets requests parsed in the same turn join this batch.
                await asyncio.sleep(0)
                batch = [self._pending.popleft() for _ in range(min(self._max_batch, len(self._pending)))]
                batch = [(r, f) for r, f in batch if not f.done()]  # callers that went away
                if not batch:
                    self._slots.release()
                    continue
                task = asyncio.create_task(self._call(batch))
                self._calls.add(task)
                task.add_done_callback(self._calls.discard)

    async def _call(self, batch: list[tuple[Req, asyncio.Future[Res]]]) -> None:
        try:
            self.calls += 1
            self.requests += len(batch)
            self.largest = max(self.largest, len(batch))
            if self._each is not None:
                await self._call_each(batch, self._each)
                return
            results = await self._run([r for r, _ in batch])
            if len(results) != len(batch):
                raise EngineCallError(f"engine returned {len(results)} results for {len(batch)} requests")
            for (_, fut), res in zip(batch, results, strict=True):
                if not fut.done():
                    fut.set_result(res)
        except Exception as e:  # an engine bug must fail its requests, not the server
            log.error("engine call failed: %s: %s", type(e).__name__, e)
            err = e if isinstance(e, EngineCallError) else EngineCallError(f"{type(e).__name__}: {e}")
            for _, fut in batch:
                if not fut.done():
                    fut.set_exception(err)
        except asyncio.CancelledError:  # stopped (``stop``): a caller still waiting is cancelled too
            for _, fut in batch:
                fut.cancel()
            raise
        finally:
            self._slots.release()

    @staticmethod
    async def _call_each(batch: list[tuple[Req, asyncio.Future[Res]]],
                         each: Callable[[Sequence[Req]], Sequence[Awaitable[Res]]]) -> None:
        """Answer each request of ``batch`` as its own awaitable completes."""
        awaitables = each([r for r, _ in batch])
        if len(awaitables) != len(batch):
            raise EngineCallError(f"engine returned {len(awaitables)} awaitables for {len(batch)} requests")

        async def one(aw: Awaitable[Res], fut: asyncio.Future[Res]) -> None:
            try:
                res = await aw
            except Exception as e:  # this request only
                log.error("engine call failed: %s: %s", type(e).__name__, e)
                if not fut.done():
                    fut.set_exception(EngineCallError(f"{type(e).__name__}: {e}"))
                return
            if not fut.done():
                fut.set_result(res)

        await asyncio.gather(*(one(aw, fut) for aw, (_, fut) in zip(awaitables, batch, strict=True)))
