"""Hostile inputs 8 and 9 behind a real loopback server: one request of a batch never fails or
delays the others. A bad image answers 400 naming it, the rest of its batch 200 (as the hf engine
does); a ``delay_s`` rule holds up its own request only (docs/serve.md)."""

from __future__ import annotations

import asyncio
import base64
import io
import time
from typing import Any

import aiohttp
from aiohttp import web
from PIL import Image
from serve_fixtures import HeldEngine, until

from benchcheck.engines.rules.scripted import ScriptedEngine
from benchcheck.serve.app import STATE, build_app
from benchcheck.serve.batch import Batcher
from loopback import thread_server


def _jpeg() -> bytes:
    buf = io.BytesIO()
    Image.new("RGB", (64, 48), (200, 30, 30)).save(buf, "JPEG")
    return buf.getvalue()


def _gif_as_jpeg() -> bytes:
    """A GIF's header with its image data cut: no decoder can read it."""
    buf = io.BytesIO()
    Image.new("RGB", (64, 48)).save(buf, "GIF")
    return buf.getvalue()[:24]


def _body(text: str, image: bytes | None = None) -> dict[str, Any]:
    content: list[dict[str, Any]] = [{"type": "text", "text": text}]
    if image is not None:
        url = "data:image/jpeg;base64," + base64.b64encode(image).decode()
        content.insert(0, {"type": "image_url", "image_url": {"url": url}})
    return {"model": "vlm", "messages": [{"role": "user", "content": content}], "max_tokens": 8}


def _held_app(rules: list[dict[str, Any]], queued: int) -> tuple[web.Application, Batcher[Any, Any]]:
    """A one-slot server whose "hold" request keeps the engine until ``queued`` requests wait."""
    app: web.Application | None = None

    def ready() -> bool:
        return app is not None and app[STATE].generations.waiting == queued

    app = build_app(HeldEngine(rules, "hold", ready, name="vlm"), "vlm", max_batch_size=64, max_inflight_batches=1)
    return app, app[STATE].generations


async def _post(s: aiohttp.ClientSession, url: str, body: dict[str, Any]) -> tuple[int, dict[str, Any], float]:
    t0 = time.perf_counter()
    async with s.post(f"{url}/v1/chat/completions", json=body) as r:
        return r.status, await r.json(), time.perf_counter() - t0


def test_a_bad_image_fails_its_own_request_only() -> None:
    app, stats = _held_app([{"match": "", "reply": "ok"}], queued=6)
    bodies = [_body(f"question {i}", _jpeg()) for i in range(5)]
    bodies.insert(2, _body("question bad", _gif_as_jpeg()))

    async def go(url: str) -> list[tuple[int, dict[str, Any], float]]:
        async with aiohttp.ClientSession() as s:
            blocker = asyncio.create_task(_post(s, url, _body("hold the only slot")))
            await until(lambda: stats.calls == 1)  # the six queue behind it and go to the engine as one batch
            out = await asyncio.gather(*(_post(s, url, b) for b in bodies))
            await blocker
            return list(out)

    with thread_server(app) as url:
        results = asyncio.run(go(url))
    assert stats.largest >= 6  # they were one batch
    statuses = [r[0] for r in results]
    assert statuses == [200, 200, 400, 200, 200, 200]
    message = results[2][1]["error"]["message"]
    assert "image 0 (24 bytes): not a readable image" in message
    assert "Traceback" not in message and "\n" not in message
    assert all(r[1]["choices"][0]["message"]["content"] == "ok" for i, r in enumerate(results) if i != 2)


def test_a_delay_rule_holds_up_its_own_request_only() -> None:
    """25 requests, one of them delayed, go to the engine as one batch (a blocker holds the only
    engine slot while they queue): only the delayed one waits."""
    app, stats = _held_app([{"match": "slow", "delay_s": 2.0}, {"match": "", "reply": "ok"}], queued=25)

    async def go(url: str) -> list[tuple[int, dict[str, Any], float]]:
        async with aiohttp.ClientSession() as s:
            blocker = asyncio.create_task(_post(s, url, _body("hold the only slot")))
            await until(lambda: stats.calls == 1)
            bodies = [_body("slow one" if i == 3 else f"question {i}") for i in range(25)]
            out = list(await asyncio.gather(*(_post(s, url, b) for b in bodies)))
            await blocker
            return out

    with thread_server(app) as url:
        results = asyncio.run(go(url))
    assert stats.largest >= 25  # one batch with the delayed one
    assert all(r[0] == 200 for r in results)
    waited = [i for i, r in enumerate(results) if r[2] >= 1.5]
    assert waited == [3]


def test_one_engine_call_with_a_bad_image_answers_the_others() -> None:
    """The same in one engine call (a batch): one failure in place, five answers."""
    from benchcheck.engines.base import Failure, GenerateRequest, Generation

    engine = ScriptedEngine([{"match": "", "reply": "ok"}], name="vlm")
    reqs = [GenerateRequest(str(i), "q", (_gif_as_jpeg() if i == 2 else _jpeg(),), 8) for i in range(6)]
    out = asyncio.run(engine.generate(reqs))
    assert [type(r) for r in out] == [Generation, Generation, Failure, Generation, Generation, Generation]
    bad = out[2]
    assert isinstance(bad, Failure) and bad.status == 400 and "image 0 (24 bytes)" in bad.message
