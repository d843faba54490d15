"""Connection limits of ``benchcheck serve``: a header timeout, a body timeout and a connection cap.

aiohttp has no header timeout: a client that opens sockets and trickles header bytes holds a file
descriptor each for as long as it likes, and enough of them (1,100 under ``ulimit -n 1024``)
starve the server of descriptors, so real requests fail (``Errno 24``). The guard wraps each
connection's protocol:

- **header timeout**: a connection must deliver a request's headers within ``header_timeout_s``
  of opening or of its previous answer (an idle keep-alive connection counts as waiting for
  headers); then it is closed;
- **connection cap**: at most ``max_connections`` are open; connections are accepted one at a
  time, only with room (the kernel's backlog holds the others). At the cap, the connection that
  has waited longest for headers (a trickler, or an idle keep-alive one; at least
  ``EVICT_AFTER_S``, since one just accepted has its headers on the way) is closed to make room,
  so the server keeps answering real clients; when every open connection has a request in
  progress, new ones wait for one to end;
- **body timeout**: the request body must arrive within ``body_timeout_s`` (``read_body``);
  otherwise 408 and the connection is closed. A body declared over the size limit is refused
  before it is read, without waiting for it.

A request whose headers have arrived is never cut by the guard: its time is the engine's.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import logging
import resource
import socket
from collections import OrderedDict
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web

log = logging.getLogger("benchcheck.serve")

HEADER_TIMEOUT_S = 30.0
BODY_TIMEOUT_S = 300.0  # 1,024 frames as data URLs are up to ~500 MB
MAX_CONNECTIONS = 1000
EVICT_AFTER_S = 0.5  # a connection waiting this long for headers may be closed at the cap
_FD_RESERVE = 64  # descriptors kept for the model, logs and the engine's own files (a quarter under a low limit)

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


def default_max_connections() -> int:
    """``MAX_CONNECTIONS``, or fewer when the process may open fewer files than that plus a reserve."""
    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft == resource.RLIM_INFINITY:
        return MAX_CONNECTIONS
    return max(1, min(MAX_CONNECTIONS, int(soft) - min(_FD_RESERVE, int(soft) // 4)))


@dataclass(slots=True)
class Guard:
    """The limits and the open connections (waiting for headers: oldest first)."""

    header_timeout_s: float = HEADER_TIMEOUT_S
    body_timeout_s: float = BODY_TIMEOUT_S
    max_connections: int = MAX_CONNECTIONS
    open: int = 0
    waiting: OrderedDict[int, GuardedProtocol] = field(default_factory=OrderedDict)
    by_transport: dict[int, GuardedProtocol] = field(default_factory=dict)
    closing: int = 0  # closed by the guard, descriptor not yet released
    freed: asyncio.Event = field(default_factory=asyncio.Event)
    # Counters for tests and logs.
    header_timeouts: int = 0
    evicted: int = 0
    refused: int = 0

    def protocol_factory(self, inner: Callable[[], asyncio.Protocol]) -> Callable[[], asyncio.Protocol]:
        return lambda: GuardedProtocol(inner(), self)

    async def room(self) -> None:
        """Wait until one more connection may be accepted: below the cap, or after the connection
        that has waited longest for headers is closed (its descriptor released)."""
        while self.open >= self.max_connections:
            wait_s = None
            if not self.closing:
                wait_s = self._make_room()
                if wait_s is None:
                    self.refused += 1  # every connection has a request in progress: wait for one to end
            self.freed.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.freed.wait(), wait_s)

    async def accept_loop(self, listener: socket.socket, inner: Callable[[], asyncio.Protocol]) -> None:
        """Accept connections one at a time, only when there is room: the kernel's backlog holds
        the others, so the process never opens more descriptors than the cap allows (asyncio's own
        accept loop takes up to 100 at once, past a low open-files limit)."""
        loop = asyncio.get_running_loop()
        factory = self.protocol_factory(inner)
        while True:
            await self.room()
            try:
                conn, _ = await loop.sock_accept(listener)
            except OSError as e:
                if e.errno in (errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM):
                    log.warning("accept: %s; retrying", e.strerror)
                    await asyncio.sleep(0.1)
                    continue
                raise
            conn.setblocking(False)
            try:
                await loop.connect_accepted_socket(factory, conn)
            except OSError:
                conn.close()

    def middleware(self) -> Any:
        """Marks a connection busy while its request is handled (its headers have arrived)."""

        @web.middleware
        async def busy(request: web.Request, handler: Handler) -> web.StreamResponse:
            conn = self.by_transport.get(id(request.transport)) if request.transport is not None else None
            if conn is not None:
                conn.request_started()
            try:
                return await handler(request)
            finally:
                if conn is not None:
                    conn.request_done()

        return busy

    def _make_room(self) -> float | None:
        """Close the connection that has waited longest for headers (0.0: one was closed), or say how
        long until the oldest may be closed; None when none is waiting. A connection is closed only
        after waiting ``evict_after_s``: one just accepted has its headers on the way."""
        if not self.waiting:
            return None
        oldest = next(iter(self.waiting.values()))
        left = oldest.waiting_since + self.evict_after_s - asyncio.get_running_loop().time()
        if left > 0:
            return left
        self.waiting.pop(id(oldest))
        self.evicted += 1
        oldest.close("evicted at the connection cap while waiting for headers")
        return 0.0

    @property
    def evict_after_s(self) -> float:
        return min(EVICT_AFTER_S, self.header_timeout_s / 2)


class GuardedProtocol(asyncio.Protocol):
    """aiohttp's request handler protocol, with the guard's header timer and cap around it."""

    def __init__(self, inner: asyncio.Protocol, guard: Guard) -> None:
        self.inner = inner
        self.guard = guard
        self.transport: asyncio.Transport | None = None
        self.timer: asyncio.TimerHandle | None = None
        self.counted = False
        self.closed_by_guard = False
        self.waiting_since = 0.0

    # -- asyncio.Protocol -------------------------------------------------------------------------
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport
        g = self.guard
        if g.open >= g.max_connections:  # accept_loop waits for room; another caller may not
            g.refused += 1
            transport.abort()
            return
        g.open += 1
        self.counted = True
        g.by_transport[id(transport)] = self
        self.inner.connection_made(transport)
        self._wait_for_headers()

    def data_received(self, data: bytes) -> None:
        self.inner.data_received(data)

    def eof_received(self) -> bool | None:
        return self.inner.eof_received()

    def pause_writing(self) -> None:
        self.inner.pause_writing()

    def resume_writing(self) -> None:
        self.inner.resume_writing()

    def connection_lost(self, exc: Exception | None) -> None:
        self._stop_waiting()
        if self.closed_by_guard:
            self.closed_by_guard = False
            self.guard.closing -= 1
        if not self.counted:
            return
        self.counted = False
        self.guard.open -= 1
        self.guard.freed.set()
        if self.transport is not None:
            self.guard.by_transport.pop(id(self.transport), None)
        self.inner.connection_lost(exc)

    # -- the guard's states -----------------------------------------------------------------------
    def _wait_for_headers(self) -> None:
        self._stop_waiting()
        self.waiting_since = asyncio.get_running_loop().time()
        self.guard.waiting[id(self)] = self
        self.timer = asyncio.get_running_loop().call_later(self.guard.header_timeout_s, self._header_timeout)

    def _stop_waiting(self) -> None:
        self.guard.waiting.pop(id(self), None)
        if self.timer is not None:
            self.timer.cancel()
            self.timer = None

    def _header_timeout(self) -> None:
        self.timer = None
        self.guard.waiting.pop(id(self), None)
        self.guard.header_timeouts += 1
        self.close(f"no complete request headers within {self.guard.header_timeout_s:g} s")

    def request_started(self) -> None:
        self._stop_waiting()

    def request_done(self) -> None:
        if self.counted and self.transport is not None and not self.transport.is_closing():
            self._wait_for_headers()
            self.guard.freed.set()  # an accept waiting at the cap may now make room with this one

    def close(self, why: str) -> None:
        """Close with a FIN, not a reset: a pooled keep-alive client sees it before reusing the socket."""
        log.debug("closing a connection: %s", why)
        if self.transport is not None and not self.transport.is_closing():
            if self.counted and not self.closed_by_guard:
                self.closed_by_guard = True
                self.guard.closing += 1
            self.transport.close()


class UnreadableBody(ValueError):
    """The body's framing or content encoding is broken (a gzip body that is not gzip, a cut chunk)."""


class BodyTooLarge(ValueError):
    """The body (declared, or decompressed) is over the application's ``client_max_size``."""


async def read_body(request: web.Request, timeout_s: float, max_bytes: int) -> bytes | None:
    """The request body, or None when it did not arrive within ``timeout_s`` (the caller answers 408).

    A body whose ``Content-Length`` is over ``max_bytes`` (the application's ``client_max_size``)
    is :class:`BodyTooLarge` before any of it is read: aiohttp would count the bytes as they
    arrive, holding the connection until the body timeout for a body it will refuse anyway. A body
    that cannot be decoded is the client's fault: :class:`UnreadableBody` (the caller
    answers 400), not an exception that aiohttp would answer with a 500. A client that disconnects
    before its body arrived cancels the handler (``CancelledError``), as it does at any other point
    of the request, not a 500 and a traceback in the server's log.
    """
    if (request.content_length or 0) > max_bytes:
        raise BodyTooLarge
    try:
        return await asyncio.wait_for(request.read(), timeout_s)
    except TimeoutError:
        return None
    except ConnectionError:  # aiohttp's "Connection lost": nobody is left to answer
        raise asyncio.CancelledError from None
    except web.HTTPRequestEntityTooLarge:
        # aiohttp would answer this one itself, in plain text: the caller answers vLLM's JSON shape.
        raise BodyTooLarge from None
    except web.RequestPayloadError as e:
        # aiohttp words it "400, message:\n  Can not decode content-encoding: gzip".
        words = " ".join(str(e).split())
        # Nothing more of this body can be read: mark it ended, or aiohttp, draining the rest
        # after the answer, meets the decode error again and logs it as an unhandled traceback.
        request.content.feed_eof()
        raise UnreadableBody(words.split("message: ", 1)[-1]) from None
