"""The ``openai`` engine: an async client for one or many OpenAI-compatible servers (vLLM).

Sends the protocol's request (docs/PROTOCOL.md, "Requests"; ``wire.score_body``) or a greedy
generation request, over one keep-alive aiohttp session. Requests go to the endpoint with the fewest requests in flight
(round-robin among equals), at most ``concurrency`` at a time per endpoint.

Failures are returned, never raised or dropped:

- connection errors, 429 and 5xx are retried ``max_retries`` times with exponential backoff
  (a 429's ``Retry-After`` is honoured, capped); a retry after a connection error prefers another
  endpoint, and new requests skip an endpoint whose connections fail for a while (1 s, doubling
  to 30 s); the last error becomes a ``Failure`` (``connection`` or ``http``);
- a 400 whose text contains "maximum", "longer than" or "context length" is
  ``context_too_long`` (PROTOCOL.md, "Requests"); other 4xx are ``bad_request``, not retried;
- a request that takes longer than ``timeout_s`` is a ``timeout`` failure, not retried (a
  server that hangs would hang every retry too);
- a 200 whose body is not a chat completion is an ``internal`` failure.

The API key is sent only as ``Authorization: Bearer`` to the configured endpoints (redirects are
not followed) and never appears in failures or logs (a server that echoes it in an error has it
masked).
"""

from __future__ import annotations

import asyncio
import json
import random
import re
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from functools import partial
from typing import Any, TypeVar
from urllib.parse import urlsplit, urlunsplit

import aiohttp

from benchcheck.engines.base import Failure, GenerateRequest, Generation, LetterScores, ScoreRequest
from benchcheck.engines.openai.wire import (
    JSONDict,
    WireError,
    error_message,
    exact_payload,
    generate_payload,
    is_context_too_long,
    parse_generation,
    parse_score,
    score_payload,
)
from benchcheck.engines.options import EngineOptionError, EngineOptions
from benchcheck.masking import MASK, MIN_SECRET_LEN
from benchcheck.protocol import token_letter

T = TypeVar("T")
BACKOFF_BASE_S = 0.5
BACKOFF_CAP_S = 8.0
CONNECT_TIMEOUT_S = 10.0  # the original runs' (10, 600) connect / read timeouts
DOWN_BASE_S = 1.0
DOWN_CAP_S = 30.0


def normalize_endpoint(url: str) -> str:
    """``http://host:8001``, ``http://host:8001/`` and ``http://host:8001/v1`` all give the last."""
    url = url.strip().rstrip("/")
    if not url.startswith(("http://", "https://")):
        raise ValueError(f"endpoint {url!r}: must start with http:// or https://")
    try:
        parts = urlsplit(url)
    except ValueError as e:  # an unclosed IPv6 bracket
        raise ValueError(f"endpoint {re.sub(r'//[^/?#]*@', '//' + MASK + '@', url)!r}: not a valid URL ({e})") from None
    if parts.username is not None or parts.password is not None:
        # The URL is written into run logs and failure messages: a key in it would be too.
        bare = urlunsplit(parts._replace(netloc=MASK + "@" + parts.netloc.rpartition("@")[2]))
        raise ValueError(f"endpoint {bare!r}: credentials in the URL are not taken; give the key with "
                         "--api-key-env (sent only as a bearer token)")
    # Checked here, before any request: urllib reads the port only when asked (a port that is not a
    # number was a traceback from the context probe, one out of range a refused connection on
    # every request), and a query or fragment had the request path appended after it.
    try:
        port = parts.port
    except ValueError as e:
        raise ValueError(f"endpoint {url!r}: not a valid URL ({e})") from None
    if not parts.hostname or port == 0 or any(c.isspace() for c in parts.netloc):
        raise ValueError(f"endpoint {url!r}: not a valid URL (bad host or port)")
    if parts.query or parts.fragment or "?" in url or "#" in url:
        raise ValueError(f"endpoint {url!r}: a query or fragment cannot take the request path after it; "
                         "give the base URL only")
    return url if url.endswith("/v1") else url + "/v1"


@dataclass(slots=True)
class _Endpoint:
    base: str
    gate: asyncio.Semaphore
    inflight: int = 0
    sent: int = 0
    # After a connection error the endpoint is skipped for a while (doubling, capped), so a dead
    # server in a fleet costs a few requests a retry each, not every other request.
    down_until: float = 0.0
    strikes: int = 0

    def mark(self, connection_failed: bool) -> None:
        if connection_failed:
            self.strikes += 1
            self.down_until = time.monotonic() + min(DOWN_CAP_S, DOWN_BASE_S * 2 ** (self.strikes - 1))
        else:
            self.strikes, self.down_until = 0, 0.0


@dataclass(slots=True)
class _Attempt:
    """The outcome of one HTTP attempt: a parsed body, or a failure and whether to retry."""

    body: JSONDict | None = None
    failure: Failure | None = None
    retry: bool = False
    wait_s: float = 0.0

DEFAULT_CONCURRENCY = 32  # requests in flight per endpoint when the caller does not say
DEFAULT_TIMEOUT_S = 600.0
DEFAULT_MAX_RETRIES = 3


class OpenAIEngine:
    """Scores and generates through OpenAI-compatible endpoints (see the module docstring)."""

    name = "openai"

    def __init__(
        self,
        endpoints: Sequence[str] | str,
        model: str,
        api_key: str | None = None,
        concurrency: int = 32,  # DEFAULT_CONCURRENCY
        timeout_s: float = DEFAULT_TIMEOUT_S,
        max_retries: int = DEFAULT_MAX_RETRIES,
        revision: str | None = None,
        letter_token_ids: Sequence[int] | None = None,
        letter_tokenizer: str | None = None,
    ) -> None:
        urls = [endpoints] if isinstance(endpoints, str) else list(endpoints)
        if not urls:
            raise ValueError("OpenAIEngine needs at least one endpoint")
        if concurrency < 1 or max_retries < 0 or timeout_s <= 0:
            raise ValueError("concurrency >= 1, max_retries >= 0 and timeout_s > 0 are required")
        self.endpoint_urls = [normalize_endpoint(u) for u in urls]
        self.model_name = model
        self.revision = revision
        self.concurrency = concurrency
        self.timeout_s = timeout_s
        self.max_retries = max_retries
        self._headers = {"Content-Type": "application/json"}
        self._key = api_key or None
        if api_key:
            self._headers["Authorization"] = f"Bearer {api_key}"
        # aiohttp sessions and semaphores belong to one event loop; rebuilt if the loop changes.
        self._loop: asyncio.AbstractEventLoop | None = None
        self._session: aiohttp.ClientSession | None = None
        self._endpoints: list[_Endpoint] = []
        self._rr = 0
        # Exact letter scores (vLLM's ``logprob_token_ids``): the served tokenizer's letter-variant
        # ids, given or read from a tokenizer folder; each server's support is checked once.
        if letter_tokenizer is not None and letter_token_ids is None:
            from benchcheck.engines.letters_exact import letter_variants
            from benchcheck.engines.transformers_lib import transformers_module

            tokenizer = transformers_module().AutoTokenizer.from_pretrained(letter_tokenizer)
            letter_token_ids = letter_variants(tokenizer).ids
        self.letter_token_ids = tuple(letter_token_ids or ())
        self._exact_ok: dict[str, bool] = {}
        self._exact_lock: asyncio.Lock | None = None

    @classmethod
    def from_options(cls, o: EngineOptions) -> OpenAIEngine:
        """``workers`` is the number of requests in flight per endpoint."""
        if not o.endpoints:
            raise EngineOptionError("--engine openai needs at least one --endpoint URL")
        if not o.model:
            raise EngineOptionError("--engine openai needs --model (the name the server answers to)")
        return cls(list(o.endpoints), o.model, api_key=o.api_key, concurrency=o.workers or DEFAULT_CONCURRENCY,
                   revision=o.revision, letter_tokenizer=o.letter_tokenizer,
                   timeout_s=DEFAULT_TIMEOUT_S if o.timeout_s is None else o.timeout_s,
                   max_retries=DEFAULT_MAX_RETRIES if o.max_retries is None else o.max_retries)

    def __repr__(self) -> str:
        return f"OpenAIEngine(endpoints={self.endpoint_urls!r}, model={self.model_name!r})"

    def _ensure_session(self) -> aiohttp.ClientSession:
        loop = asyncio.get_running_loop()
        if self._session is None or self._loop is not loop or self._session.closed:
            connector = aiohttp.TCPConnector(limit=0, keepalive_timeout=60, enable_cleanup_closed=True)
            self._session = aiohttp.ClientSession(
                connector=connector,
                timeout=aiohttp.ClientTimeout(total=self.timeout_s, sock_connect=CONNECT_TIMEOUT_S),
            )
            self._loop = loop
            self._endpoints = [_Endpoint(u, asyncio.Semaphore(self.concurrency)) for u in self.endpoint_urls]
        return self._session

    def _pick(self, avoid: _Endpoint | None) -> _Endpoint:
        """The least busy endpoint that is up, round-robin among equals; one that is down or
        ``avoid`` only when nothing else is left."""
        n = len(self._endpoints)
        self._rr = (self._rr + 1) % n
        order = self._endpoints[self._rr :] + self._endpoints[: self._rr]
        now = time.monotonic()
        up = [e for e in order if e is not avoid and e.down_until <= now]
        candidates = up or [e for e in order if e is not avoid] or order
        return min(candidates, key=lambda e: e.inflight)

    async def _post(self, ep: _Endpoint, payload: bytes, rid: str) -> _Attempt:
        session = self._ensure_session()
        url = ep.base + "/chat/completions"
        try:
            async with session.post(url, data=payload, headers=self._headers, allow_redirects=False) as r:
                raw = await r.read()
                status = r.status
                retry_after = r.headers.get("Retry-After")
                location = r.headers.get("Location")
        except aiohttp.ConnectionTimeoutError as e:
            return _Attempt(failure=Failure(rid, "connection", f"{ep.base}: connect timeout: {e}"), retry=True)
        except TimeoutError:
            return _Attempt(failure=Failure(rid, "timeout", f"{ep.base}: no answer within {self.timeout_s:g} s"))
        except aiohttp.ClientError as e:
            msg = f"{ep.base}: {type(e).__name__}: {e}"
            return _Attempt(failure=Failure(rid, "connection", msg), retry=True)
        if status == 200:
            try:
                body = json.loads(raw)
            except ValueError:
                body = None
            if not isinstance(body, dict):
                return _Attempt(failure=Failure(rid, "internal", f"{ep.base}: a 200 answer that is not a JSON object"))
            return _Attempt(body=body)
        if 300 <= status < 400:
            # Said plainly: the bare "307: Temporary Redirect" left the user guessing which URL to give.
            where = self._masked(location) if location else "another URL"
            return _Attempt(failure=Failure(rid, "bad_request", f"{ep.base}: redirected to {where}; redirects are "
                                            "not followed (the key must not travel to another host): give the "
                                            "final URL", status=status))
        text = self._masked(raw.decode("utf-8", errors="replace"))  # before error_message cuts it short
        message = error_message(text)
        if is_context_too_long(status, text):
            return _Attempt(failure=Failure(rid, "context_too_long", message, status=status))
        if status == 429 or status >= 500:
            wait = _retry_after_s(retry_after) if status == 429 else 0.0
            failure = Failure(rid, "http", f"{ep.base}: {message}", status=status)
            return _Attempt(failure=failure, retry=True, wait_s=wait)
        return _Attempt(failure=Failure(rid, "bad_request", f"{ep.base}: {message}", status=status))

    async def _request(
        self, rid: str, build: Callable[[], bytes], parse: Callable[[JSONDict, str, float], T]
    ) -> T | Failure:
        """``_attempts``, its failure's message without the API key: a server may echo the key it
        refused ("Incorrect API key provided: sk-…"), and failures become rows and log lines."""
        res = await self._attempts(rid, build, parse)
        return replace(res, message=self._masked(res.message)) if isinstance(res, Failure) else res

    def _masked(self, text: str) -> str:
        """``text`` without the API key; a key too short to be one (``EMPTY``, ``1``, as local
        servers take) is left alone, or ordinary words and addresses would be cut up."""
        return text.replace(self._key, MASK) if self._key and len(self._key) >= MIN_SECRET_LEN else text

    async def _attempts(
        self, rid: str, build: Callable[[], bytes], parse: Callable[[JSONDict, str, float], T]
    ) -> T | Failure:
        """Send one request with retries; parse the answer or return the last failure.

        The body is built when a connection slot is free, so a long request list holds only
        ``concurrency`` bodies per endpoint in memory; latency counts from that moment too.
        """
        self._ensure_session()
        payload: bytes | None = None
        t0 = 0.0
        avoid: _Endpoint | None = None
        attempt = 0
        while True:
            ep = self._pick(avoid)
            ep.inflight += 1
            try:
                async with ep.gate:
                    if payload is None:
                        t0 = time.perf_counter()
                        try:
                            payload = build()
                        except OSError as e:  # an image path that cannot be read
                            return Failure(rid, "bad_request", f"cannot read an image: {e}")
                    ep.sent += 1
                    res = await self._post(ep, payload, rid)
            finally:
                ep.inflight -= 1
            latency = time.perf_counter() - t0
            ep.mark(connection_failed=res.failure is not None and res.failure.kind == "connection")
            if res.body is not None:
                try:
                    return parse(res.body, rid, latency)
                except WireError as e:
                    return Failure(rid, "internal", f"{ep.base}: {e}", latency_s=round(latency, 4))
                except Exception as e:  # a parser bug must fail this request only, never the batch
                    msg = f"{ep.base}: unreadable answer ({type(e).__name__}: {e})"
                    return Failure(rid, "internal", msg, latency_s=round(latency, 4))
            assert res.failure is not None
            if not res.retry or attempt >= self.max_retries:
                return _with_latency(res.failure, latency, attempt)
            avoid = ep if res.failure.kind == "connection" else None
            backoff = min(BACKOFF_CAP_S, BACKOFF_BASE_S * 2**attempt) * (0.5 + random.random() / 2)
            await asyncio.sleep(max(backoff, min(res.wait_s, BACKOFF_CAP_S)))
            attempt += 1

    async def score(self, reqs: Sequence[ScoreRequest]) -> list[LetterScores | Failure]:
        """The protocol's forward (PROTOCOL.md, "Requests") for each request, concurrently; results in request order.

        With letter-variant ids, a second request per forward asks for their exact log-probs
        (``logprob_token_ids``) where every server supports it; the answer says which it was.
        """
        model = self.model_name
        exact = await self.exact_supported() if self.letter_token_ids else None
        return list(await asyncio.gather(*(self._score_one(model, r, exact) for r in reqs)))

    async def _score_one(self, model: str, r: ScoreRequest, exact: bool | None) -> LetterScores | Failure:
        res = await self._request(r.request_id, partial(score_payload, model, r), parse_score)
        if exact is None or not isinstance(res, LetterScores):
            return res
        if not exact:
            return replace(res, exact_source="unsupported")
        ids_req = replace(r, logprob_token_ids=self.letter_token_ids)
        got = await self._request(r.request_id, partial(exact_payload, model, ids_req), parse_score)
        if isinstance(got, Failure):
            return got
        # The sampled token leads the list; vLLM may list it again among the ids asked.
        unique = {(str(e["token"]), float(e["logprob"])): e for e in got.top}
        return replace(res, exact=[dict(e) for e in unique.values()], exact_source="logprob_token_ids")

    async def exact_supported(self) -> bool:
        """Whether every endpoint answers ``logprob_token_ids`` (asked once per server, then kept)."""
        if self._exact_lock is None or self._loop is not asyncio.get_running_loop():
            self._exact_lock = asyncio.Lock()
        session = self._ensure_session()
        async with self._exact_lock:
            for ep in self._endpoints:
                if ep.base not in self._exact_ok:
                    self._exact_ok[ep.base] = await self._probe_exact(session, ep)
        return all(self._exact_ok[ep.base] for ep in self._endpoints)

    async def _probe_exact(self, session: aiohttp.ClientSession, ep: _Endpoint) -> bool:
        """One small request: supported when the answer lists every id asked, as letter variants (a
        server that ignores the field answers its natural top-k instead)."""
        probe = ScoreRequest("exact-probe", "Answer with a letter.", logprob_token_ids=self.letter_token_ids)
        res = await self._post(ep, exact_payload(self.model_name, probe), probe.request_id)
        if res.body is None:
            return False
        try:
            got = parse_score(res.body, probe.request_id, 0.0)
        except WireError:
            return False
        letters = [e for e in got.top if token_letter(str(e["token"])) is not None]
        return len(letters) >= len(self.letter_token_ids)

    async def generate(self, reqs: Sequence[GenerateRequest]) -> list[Generation | Failure]:
        """Greedy generation for each request, concurrently; results in request order."""
        model = self.model_name
        return list(
            await asyncio.gather(
                *(self._request(r.request_id, partial(generate_payload, model, r), parse_generation) for r in reqs)
            )
        )

    def requests_sent(self) -> dict[str, int]:
        """HTTP attempts sent per endpoint in the current event loop's session (retries included)."""
        return {e.base: e.sent for e in self._endpoints}

    async def served_models(self) -> dict[str, list[str]]:
        """Each endpoint's ``/v1/models`` ids (an endpoint that does not answer maps to [])."""
        session = self._ensure_session()
        out: dict[str, list[str]] = {}
        for url in self.endpoint_urls:
            try:
                async with session.get(url + "/models", headers=self._headers, allow_redirects=False) as r:
                    d: Any = await r.json() if r.status == 200 else {}
            except (aiohttp.ClientError, TimeoutError, ValueError):
                d = {}
            data = d.get("data") if isinstance(d, dict) else None
            out[url] = [str(m.get("id")) for m in data if isinstance(m, dict)] if isinstance(data, list) else []
        return out

    async def aclose(self) -> None:
        """Close the HTTP session (its keep-alive connections)."""
        if self._session is not None and not self._session.closed and self._loop is asyncio.get_running_loop():
            await self._session.close()
        self._session = None


def _retry_after_s(value: str | None) -> float:
    try:
        return max(0.0, float(value)) if value else 0.0
    except ValueError:
        return 0.0


def _with_latency(f: Failure, latency: float, retries: int) -> Failure:
    extra = {**f.extra, "retries": str(retries)} if retries else f.extra
    return Failure(f.request_id, f.kind, f.message, f.status, round(latency, 4), extra)
