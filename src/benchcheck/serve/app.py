"""``benchcheck serve``: any engine behind an OpenAI-compatible (vLLM 0.11-shaped) HTTP server.

Routes: ``GET /health``, ``GET /v1/models``, ``POST /v1/chat/completions`` (see ``serve_chat``
for what a request may hold; ``serve.media`` decodes a ``video_url`` part to frames). Concurrent
requests are batched (``serve_batch``). With an API key, every ``/v1`` route needs
``Authorization: Bearer <key>`` and answers 401 otherwise, as vLLM's ``--api-key`` does. Request
bodies and headers are never logged; the access log (off by default) has the method, the path
without its query string, status, size and time only.
"""

from __future__ import annotations

import asyncio
import hmac
import logging
import os
import signal
import socket
import sys
import time
import uuid
from collections.abc import Awaitable, Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from typing import Any

import orjson
from aiohttp import web
from aiohttp.abc import AbstractAccessLogger
from aiohttp.typedefs import Middleware

from benchcheck.engines import capabilities
from benchcheck.engines.base import Engine, Failure, GenerateRequest, Generation, LetterScores, ScoreRequest
from benchcheck.engines.openai.wire import error_body
from benchcheck.serve.batch import Batcher, EngineCallError
from benchcheck.serve.chat import RequestError, generate_completion, parse_chat, score_completion
from benchcheck.serve.guard import BodyTooLarge, Guard, UnreadableBody, default_max_connections, read_body
from benchcheck.serve.media import VIDEO_DECODE_THREADS, MediaOptions, load_video

log = logging.getLogger("benchcheck.serve")

MAX_BODY_BYTES = 512 * 1024 * 1024  # 1,024 frames as data URLs fit; aiohttp's default is 1 MiB
# Client, request line, status, size, time: no headers (they may carry the API key), and the path
# without its query string (a client may pass a key as ``?api_key=``).
ACCESS_LINE = '%s "%s %s HTTP/%d.%d" %d %d %fs'
ACCESS_LOG = "benchcheck.serve.access"
CLIENT_GONE = 499  # the status nginx logs for a request whose client closed the connection

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


def json_response(obj: Any, status: int = 200) -> web.Response:
    """A compact JSON answer (orjson: request and answer JSON are a large share of the server's work)."""
    return web.Response(body=orjson.dumps(obj), status=status, content_type="application/json")


def error_response(status: int, message: str, type_: str | None = None) -> web.Response:
    """A vLLM-shaped error answer."""
    return json_response(error_body(status, message, type_), status)


def served_id(engine: Engine, served_model_name: str | None) -> str:
    """The model id the server reports (an engine may relabel it: scripted answers say so)."""
    return capabilities.served_id(engine, served_model_name or engine.model_name)


def count_prompt_tokens(engine: Engine, req: GenerateRequest) -> int | None:
    """The prompt's length as ``engine`` counts it against its context (blocking), or None for an
    engine that does not count tokens."""
    return capabilities.count_tokens(engine, req)


async def fill_default_max_tokens(engine: Engine, req: GenerateRequest) -> GenerateRequest:
    """A request that gave no ``max_tokens`` may use the rest of the context, as on vLLM
    (``max_model_len - prompt tokens``; a prompt that fills the context gets 1, which the engine
    then refuses as context-too-long). Engines whose prompt length or context is unknown keep
    ``DEFAULT_MAX_TOKENS``; a prompt that cannot be encoded is left to the engine to refuse."""
    max_len = capabilities.max_model_len(engine)
    if max_len is None:
        return req
    try:
        n = await asyncio.to_thread(count_prompt_tokens, engine, req)
    except Exception:  # the engine reports it (bad image, placeholder token) in its own words
        return req
    if n is None:
        return req
    return replace(req, max_tokens=max(1, max_len - n))


class ServerState:
    """What the handlers share: the engine, its batchers and the names it answers to."""

    def __init__(self, engine: Engine, model_id: str, aliases: set[str], max_batch_size: int, inflight: int,
                 media: MediaOptions | None = None):
        self.engine = engine
        self.media = media or MediaOptions()
        self.model_id = model_id
        self.aliases = aliases
        self.fingerprint = f"benchcheck-{engine.name}"
        self.created = int(time.time())
        # Clips are decoded on a pool of their own, not on the loop's default executor: a flood
        # of slow clips would otherwise hold every thread that token counting needs too.
        self.video_pool = ThreadPoolExecutor(VIDEO_DECODE_THREADS, thread_name_prefix="serve-video")
        slots = asyncio.Semaphore(inflight)
        # Engines that answer each request on its own (scripted) are asked per request, so one
        # slow or failing request does not hold up or fail the others of its batch.
        self.scores: Batcher[ScoreRequest, LetterScores | Failure] = Batcher(
            engine.score, max_batch_size, slots, getattr(engine, "score_each", None)
        )
        self.generations: Batcher[GenerateRequest, Generation | Failure] = Batcher(
            engine.generate, max_batch_size, slots, getattr(engine, "generate_each", None)
        )


STATE = web.AppKey("state", ServerState)
GUARD = web.AppKey("guard", Guard)


def _failure_response(f: Failure) -> web.Response:
    if f.kind == "context_too_long":
        msg = f.message if "maximum context length" in f.message else (
            f"This model's maximum context length is exceeded: {f.message}"
        )
        return error_response(400, msg)
    if f.kind == "bad_request":
        return error_response(f.status or 400, f.message)
    if f.kind == "http" and f.status is not None:
        return error_response(f.status, f.message)
    return error_response(500, f"{f.kind}: {f.message}")


async def _health(request: web.Request) -> web.Response:
    return web.Response(status=200)


async def _models(request: web.Request) -> web.Response:
    st = request.app[STATE]
    card: dict[str, object] = {
        "id": st.model_id,
        "object": "model",
        "created": st.created,
        "owned_by": "benchcheck",
        "root": st.engine.model_name,
        "parent": None,
        "max_model_len": capabilities.max_model_len(st.engine),
        "permission": [],
    }
    return json_response({"object": "list", "data": [card]})


async def _chat(request: web.Request) -> web.Response:
    st = request.app[STATE]
    guard = request.app[GUARD]
    try:
        raw = await read_body(request, guard.body_timeout_s, MAX_BODY_BYTES)
    except BodyTooLarge:
        # The rest of the body is not read: the connection cannot carry another request.
        resp = error_response(413, f"the request body is over {MAX_BODY_BYTES} bytes")
        resp.force_close()
        return resp
    except UnreadableBody as e:
        # What follows on the connection is not a request boundary we can trust: close it.
        resp = error_response(400, f"the request body cannot be read: {e}")
        resp.force_close()
        return resp
    if raw is None:
        resp = error_response(408, f"the request body did not arrive within {guard.body_timeout_s:g} s")
        resp.force_close()
        return resp
    try:
        body = orjson.loads(raw)
    except orjson.JSONDecodeError as e:
        return error_response(400, f"the request body is not valid JSON: {e}")
    model = body.get("model") if isinstance(body, dict) else None
    if model is not None and not isinstance(model, str):
        # vLLM's request validation answers 400 (a list or object here would not even hash).
        return error_response(400, f"'model': Input should be a valid string (got {type(model).__name__})")
    if model is not None and model not in st.aliases:
        return error_response(404, f"The model `{model}` does not exist.", "NotFoundError")
    try:
        call = parse_chat(body, uuid.uuid4().hex)
    except RequestError as e:
        return error_response(e.status, str(e), e.type_)
    if call.video is not None:
        try:
            # Off the event loop: decoding a clip takes far longer than a request should hold it.
            frames = await asyncio.get_running_loop().run_in_executor(
                st.video_pool, load_video, call.video, st.media, MAX_BODY_BYTES)
        except RequestError as e:
            return error_response(e.status, str(e), e.type_)
        call = call.with_frames(frames)
    if call.generate is not None and call.default_max_tokens:
        call = replace(call, generate=await fill_default_max_tokens(st.engine, call.generate))
    try:
        if call.score is not None:
            res = await st.scores.submit(call.score)
            if isinstance(res, Failure):
                return _failure_response(res)
            ids = call.score.logprob_token_ids
            if ids and len(res.exact) != len(ids):
                return error_response(400, "'logprob_token_ids': this engine has no exact log-probs for the ids "
                                           "asked (the hf engine has; ids must be below the vocabulary size)")
            out = score_completion(res, call.top_logprobs, st.model_id, st.fingerprint, ids)
        else:
            assert call.generate is not None
            try:
                gen = await st.generations.submit(call.generate)
            except asyncio.CancelledError:  # the client went away (handler_cancellation): stop decoding it
                cancel = getattr(st.engine, "cancel", None)
                if cancel is not None:
                    cancel([call.generate.request_id])
                raise
            if isinstance(gen, Failure):
                return _failure_response(gen)
            out = generate_completion(gen, call.generate.max_tokens, st.model_id, st.fingerprint)
    except EngineCallError as e:
        return error_response(500, f"engine error: {e}")
    return json_response(out)


@web.middleware
async def _route_errors(request: web.Request, handler: Handler) -> web.StreamResponse:
    """A path or method no route takes answers JSON, as vLLM's FastAPI app does (``{"detail": "Not
    Found"}``), not aiohttp's plain text: a client reading every error body as JSON reads this one."""
    try:
        return await handler(request)
    except (web.HTTPNotFound, web.HTTPMethodNotAllowed) as e:
        return json_response({"detail": e.reason}, e.status)


def _access_fields(request: web.BaseRequest) -> tuple[str, str, str, int, int]:
    """The client and request line of an access-log line (``ACCESS_LINE``): the path as sent, its
    query string left out."""
    v = request.version
    return request.remote or "-", request.method, request.rel_url.raw_path, v.major, v.minor


class _AccessLogger(AbstractAccessLogger):
    """aiohttp's access log in ``ACCESS_LINE``'s shape: its own ``%r`` has the query string."""

    def log(self, request: web.BaseRequest, response: web.StreamResponse, time: float) -> None:
        self.logger.info(ACCESS_LINE, *_access_fields(request), response.status, response.body_length, time)


def _gone_middleware() -> Middleware:
    """An access-log line for a request whose client disconnected before its answer: aiohttp
    cancels the handler (``handler_cancellation``) and logs nothing, so the requests an operator
    most wants to see (clients that timed out) would be missing from the log."""
    access = logging.getLogger(ACCESS_LOG)

    @web.middleware
    async def gone(request: web.Request, handler: Handler) -> web.StreamResponse:
        t0 = time.perf_counter()
        try:
            return await handler(request)
        except asyncio.CancelledError:
            access.info(ACCESS_LINE, *_access_fields(request), CLIENT_GONE, 0, time.perf_counter() - t0)
            raise

    return gone


def _auth_middleware(api_key: str) -> Middleware:
    expected = f"Bearer {api_key}".encode()

    @web.middleware
    async def auth(request: web.Request, handler: Handler) -> web.StreamResponse:
        if request.path.startswith("/v1"):
            # aiohttp decodes header bytes as UTF-8 with surrogateescape: encoding back the same
            # way gives the bytes sent, so a header that is not UTF-8 is a mismatch (401), not a 500.
            given = request.headers.get("Authorization", "").encode("utf-8", "surrogateescape")
            if not hmac.compare_digest(given, expected):
                return json_response({"error": "Unauthorized"}, 401)
        return await handler(request)

    return auth


def build_app(
    engine: Engine,
    served_model_name: str | None = None,
    api_key: str | None = None,
    max_batch_size: int = 64,
    max_inflight_batches: int = 1,
    guard: Guard | None = None,
    access_log: bool = False,
    media: MediaOptions | None = None,
) -> web.Application:
    """The server as an aiohttp application (run it with ``run_server`` or an AppRunner).

    ``served_model_name`` defaults to the engine's model name; requests may name either.
    ``max_inflight_batches`` bounds concurrent engine calls (1 for a model on one device).
    ``guard``: the connection limits (``serve_guard``); its header timeout and cap act only when
    the server is run by ``run_server``, its body timeout always. ``access_log``: a request whose
    client disconnected before its answer is logged with status 499 (aiohttp's access log, which
    ``run_server`` turns on with it, logs only answered requests). ``media``: how ``video_url``
    parts are read (frames kept, the folder ``file://`` URLs may name; ``serve.media``).
    """
    model_id = served_id(engine, served_model_name)
    aliases = {model_id, engine.model_name} | ({served_model_name} if served_model_name else set())
    guard = guard or Guard()
    middlewares = [*([_gone_middleware()] if access_log else []), guard.middleware(), _route_errors,
                   *([_auth_middleware(api_key)] if api_key else [])]
    app = web.Application(client_max_size=MAX_BODY_BYTES, middlewares=middlewares)
    state = ServerState(engine, model_id, aliases, max_batch_size, max_inflight_batches, media)
    app[STATE] = state
    app[GUARD] = guard

    async def startup(_: web.Application) -> None:
        state.scores.start()
        state.generations.start()

    async def cleanup(_: web.Application) -> None:
        await state.scores.stop()
        await state.generations.stop()
        state.video_pool.shutdown(wait=False, cancel_futures=True)
        await engine.aclose()

    app.on_startup.append(startup)
    app.on_cleanup.append(cleanup)
    app.router.add_get("/health", _health)
    app.router.add_get("/v1/models", _models)
    app.router.add_post("/v1/chat/completions", _chat)
    return app


def run_server(
    engine: Engine,
    served_model_name: str | None = None,
    host: str = "127.0.0.1",
    port: int = 8000,
    api_key: str | None = None,
    max_batch_size: int = 64,
    max_inflight_batches: int = 1,
    access_log: bool = False,
    guard: Guard | None = None,
    media: MediaOptions | None = None,
    launch_tag: str | None = None,
) -> signal.Signals:
    """Serve until interrupted or terminated (blocking); returns the signal that stopped it
    (SIGINT: Ctrl-C, SIGTERM: a launcher, systemd, ``docker stop``). Binds to loopback unless ``host`` says
    otherwise (an empty ``host`` is a ValueError, not every interface). ``guard`` (default: the
    usual limits, the cap within the open-files limit) times out slow headers and bodies and caps
    connections. The "serving" line ends with this process's pid and ``launch_tag`` when given:
    the launcher that started the server gave it the tag, and takes only the line that carries it
    for its server's, though another launch's server writes to the same log."""
    check_host(host)
    logging.basicConfig(level=logging.INFO, stream=sys.stderr, format="%(asctime)s %(name)s %(message)s")
    guard = guard or Guard(max_connections=default_max_connections())
    app = build_app(engine, served_model_name, api_key, max_batch_size, max_inflight_batches, guard, access_log,
                    media)
    model_id = app[STATE].model_id
    auth = "with API key" if api_key else "no API key"

    tag = f"; launch tag {launch_tag}" if launch_tag else ""

    def announce(bound: int) -> None:
        log.info("serving %r (engine %s) on http://%s:%d/v1, %s; header timeout %g s, body timeout %g s, "
                 "at most %d connections; pid %d%s", model_id, engine.name, host, bound, auth,
                 guard.header_timeout_s, guard.body_timeout_s, guard.max_connections, os.getpid(), tag)

    return asyncio.run(_serve(app, host, port, guard, access_log, announce))


# Seconds a request in progress at Ctrl-C may take to finish before it is cut (and again for its
# handler to end once cancelled): a scoring forward ends within it, a long generation does not.
CTRL_C_GRACE_S = 0.1


async def _serve(app: web.Application, host: str, port: int, guard: Guard, access_log: bool,
                 announce: Callable[[int], None]) -> signal.Signals:
    """aiohttp's request handling behind the guard's protocol, until SIGINT or SIGTERM (returned).
    ``announce`` gets the bound port once the socket listens: a "serving" line before a failed bind
    (a port in use) read as a server that had started, and ``--port 0`` is told the port it got.

    SIGTERM drains: the requests in progress are answered first (aiohttp's shutdown, up to a
    minute; ``launch`` waits 10 s before SIGKILL). Ctrl-C is someone at the terminal who wants
    the server gone: the requests in progress are cut, their connections closed unanswered (a
    client's connection error, retried later, never an error answer that would count against its
    item), and the engine's calls stop at their next batch (``Batcher.stop``)."""
    # handler_cancellation: a client that disconnects cancels its handler, as vLLM aborts its
    # request; a queued request is then never handed to the engine, a generation stops decoding.
    runner = web.AppRunner(app, access_log=logging.getLogger(ACCESS_LOG) if access_log else None,
                           access_log_class=_AccessLogger, handle_signals=False, handler_cancellation=True)
    await runner.setup()
    loop = asyncio.get_running_loop()
    assert runner.server is not None
    try:
        listener = _listen(host, port)
    except OSError:
        await runner.cleanup()
        raise
    stop = asyncio.Event()
    stopped_by: list[signal.Signals] = []

    def on_signal(sig: signal.Signals) -> None:
        stopped_by.append(sig)
        stop.set()

    # Before the "serving" line: a Ctrl-C once it shows is always this server's stop.
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, on_signal, sig)
    announce(listener.getsockname()[1])
    accepting = asyncio.create_task(guard.accept_loop(listener, runner.server))
    try:
        await asyncio.wait([accepting, asyncio.create_task(stop.wait())], return_when=asyncio.FIRST_COMPLETED)
        if accepting.done():
            accepting.result()  # the accept loop failed: raise its error
    finally:
        accepting.cancel()
        await asyncio.gather(accepting, return_exceptions=True)
        listener.close()
        if stopped_by[:1] == [signal.SIGINT]:
            await runner.server.shutdown(CTRL_C_GRACE_S)  # the requests in progress cut
        await runner.cleanup()
    return stopped_by[0]


def check_host(host: str) -> str:
    """``host`` as given, unless it is empty: binding "" listens on every interface, so an unset
    shell variable (``--host "$HOST"``) would expose the server; exposing it must be said
    (``0.0.0.0``, ``::``)."""
    if not host.strip():
        raise ValueError("the host is empty, which would bind every interface: give an address "
                         "(127.0.0.1 for loopback, 0.0.0.0 to expose the server deliberately)")
    return host


def _listen(host: str, port: int) -> socket.socket:
    """The listening socket; ``SO_REUSEADDR`` as aiohttp's own sites bind (a port in TIME_WAIT after a
    stopped server is free)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host, port))
        sock.listen(128)
        sock.setblocking(False)
    except OSError:
        sock.close()
        raise
    return sock
