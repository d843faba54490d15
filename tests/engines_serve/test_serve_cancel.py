"""A generation whose client went away stops (as vLLM aborts a request on disconnect): the engine
stops decoding a cancelled row at its next step, and ``benchcheck serve`` cancels a request when
its client disconnects, so a long generation no longer holds every request queued behind it."""

from __future__ import annotations

import json
import socket
import threading
import time
from pathlib import Path

from serve_fixtures import cli_server, post_chat

from benchcheck.engines.base import GenerateRequest, Generation
from benchcheck.engines.hf.engine import HFEngine

LONG = 2000  # new tokens: a random-weight model never stops by itself


def _request(model: str, max_tokens: int) -> dict[str, object]:
    return {"model": model, "messages": [{"role": "user", "content": "Tell a long story."}],
            "max_tokens": max_tokens, "temperature": 0}


def _ask(url: str, model: str, max_tokens: int) -> dict[str, object]:
    status, out = post_chat(url, _request(model, max_tokens), timeout_s=300)
    assert status == 200, out
    return out


def test_the_engine_stops_a_cancelled_generation(tiny_model: Path) -> None:
    engine = HFEngine(tiny_model, device="cpu")
    req = GenerateRequest("gone", "Tell a long story.", (), max_tokens=LONG)
    out: list[object] = []
    worker = threading.Thread(target=lambda: out.extend(engine.generate_sync([req])))
    worker.start()
    deadline = time.monotonic() + 120
    while "gone" not in engine._cancellations._running:  # the call has begun
        assert time.monotonic() < deadline
        time.sleep(0.001)
    engine.cancel(["gone", "never-asked"])
    worker.join(300)
    (gen,) = out
    assert isinstance(gen, Generation)
    assert gen.completion_tokens < LONG
    assert not engine._cancellations._running and not engine._cancellations._gone  # nothing kept
    # a later request of the same id is generated in full
    again = engine.generate_sync([GenerateRequest("gone", "Tell a long story.", (), max_tokens=40)])
    assert isinstance(again[0], Generation) and again[0].completion_tokens == 40


def test_a_client_that_disconnects_no_longer_holds_the_queue(tiny_model: Path) -> None:
    model = str(tiny_model)
    with cli_server("--engine", "hf", "--model", model, "--device", "cpu") as (url, _):
        _ask(url, model, 4)  # warm
        t0 = time.monotonic()
        full = _ask(url, model, LONG)
        whole = time.monotonic() - t0
        assert full["usage"]["completion_tokens"] == LONG  # type: ignore[index]
        host, port = url.removeprefix("http://").split(":")
        body = json.dumps(_request(model, LONG)).encode()
        with socket.create_connection((host, int(port))) as s:
            s.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                      b"Content-Length: %d\r\n\r\n" % len(body) + body)
            time.sleep(min(0.2 * whole, 2.0))  # the generation is under way
        t0 = time.monotonic()
        short = _ask(url, model, 4)
        waited = time.monotonic() - t0
        assert short["usage"]["completion_tokens"] == 4  # type: ignore[index]
        # Without the cancellation the short request waited for the rest of the long one
        # (about 0.8 of ``whole``).
        assert waited < 0.4 * whole, (waited, whole)
