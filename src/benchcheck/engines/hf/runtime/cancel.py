"""Generations whose clients went away: the ids the server cancels, read by the decode loop.

The server cancels a request when its client disconnects; a request still queued never reaches
the engine (``serve.batch``), and one being decoded is stopped here: the decode loop asks before
each step which of its rows to stop (``forward.generate.greedy_start``'s ``stopped``), so a long
generation no longer holds every request behind it after its client left.
"""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager


class Cancellations:
    """Thread-safe: the event loop cancels, the engine's thread decodes."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._running: Counter[str] = Counter()
        self._gone: set[str] = set()
        self._version = 0

    @contextmanager
    def running(self, request_ids: Sequence[str]) -> Iterator[None]:
        """The block in which ``request_ids`` are being generated: only these can be cancelled
        (an id cancelled before or after is forgotten, so the set never grows)."""
        with self._lock:
            self._running.update(request_ids)
        try:
            yield
        finally:
            with self._lock:
                self._running.subtract(request_ids)
                for i in request_ids:
                    if self._running[i] <= 0:
                        del self._running[i]
                        self._gone.discard(i)

    def cancel(self, request_ids: Iterable[str]) -> None:
        with self._lock:
            new = {i for i in request_ids if i in self._running} - self._gone
            if new:
                self._gone |= new
                self._version += 1

    def watcher(self, request_ids: Sequence[str]) -> Callable[[], list[bool] | None]:
        """For a batch of rows ``request_ids``: the rows to stop when a cancellation came since the
        last call (and some row is cancelled), else None; one lock-free comparison otherwise."""
        seen = [-1]

        def stopped() -> list[bool] | None:
            if self._version == seen[0]:
                return None
            with self._lock:
                seen[0] = self._version
                flags = [i in self._gone for i in request_ids]
            return flags if any(flags) else None

        return stopped
