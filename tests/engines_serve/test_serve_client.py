"""The ``openai`` engine against real ``benchcheck serve`` processes on loopback: answers,
retries, failure kinds, timeouts, killed servers, several endpoints, API keys."""

from __future__ import annotations

import asyncio
import io
import json
import os
import signal
import time
from pathlib import Path
from typing import Any

import pytest
from PIL import Image
from serve_fixtures import cli_server

from benchcheck.engines.base import Failure, GenerateRequest, Generation, LetterScores, ScoreRequest
from benchcheck.engines.openai.client import OpenAIEngine
from benchcheck.masking import MASK
from benchcheck.protocol import letter_logprobs
from loopback import free_port, thread_server


def _score(engine: OpenAIEngine, *prompts: str) -> list[LetterScores | Failure]:
    async def go() -> list[LetterScores | Failure]:
        try:
            return await engine.score([ScoreRequest(f"r{i}", p) for i, p in enumerate(prompts)])
        finally:
            await engine.aclose()

    return asyncio.run(go())


def _frame(i: int) -> bytes:
    buf = io.BytesIO()
    Image.new("RGB", (448, 256), (i * 7 % 256, 80, 160)).save(buf, "JPEG", quality=85)
    return buf.getvalue()


def test_scores_generations_and_order(scripted_server: str) -> None:
    engine = OpenAIEngine([scripted_server], "judge")  # no /v1: added
    prompts = [f"Question: {i}" for i in range(50)]
    res = _score(engine, *prompts)
    assert [r.request_id for r in res] == [f"r{i}" for i in range(50)]
    first = res[0]
    assert isinstance(first, LetterScores) and first.model == "scripted:judge" and first.top1_token == "A"
    lp, _, _ = letter_logprobs(first.top, 4)
    assert lp == [-0.25, -2.0, -3.5, -5.0]

    async def gen() -> list[Generation | Failure]:
        reqs = [GenerateRequest("g", "capital of France?", system="brief"), GenerateRequest("h", "zzz")]
        try:
            return await engine.generate(reqs)
        finally:
            await engine.aclose()

    g, h = asyncio.run(gen())
    assert isinstance(g, Generation) and g.text == "Paris" and g.model == "scripted:judge" and g.prompt_tokens > 0
    assert isinstance(h, Generation) and h.text == "fallback"


def test_images_travel_as_data_urls(rules_file: Path) -> None:
    frames = tuple(_frame(i) for i in range(32))

    async def go(url: str) -> list[LetterScores | Failure]:
        engine = OpenAIEngine([url + "/v1"], "judge")
        try:
            return await engine.score([ScoreRequest("v", "Question: what?", frames[:1]),
                                       ScoreRequest("w", "Question: what?", frames)])
        finally:
            await engine.aclose()

    with cli_server("--engine", "scripted", "--rules", str(rules_file), "--model", "judge") as (url, _):
        one, many = asyncio.run(go(url))
    assert isinstance(one, LetterScores) and isinstance(many, LetterScores)
    assert many.prompt_tokens - one.prompt_tokens == 31 * (14 * 8 + 2)  # the server saw 32 real 448x256 JPEGs


def test_retries_429_and_5xx_but_not_400(scripted_server: str) -> None:
    engine = OpenAIEngine([scripted_server], "judge", max_retries=3)
    flaky429, flaky503, once400, forbidden = _score(engine, "flaky429", "flaky503", "once400", "forbidden")
    assert isinstance(flaky429, LetterScores) and isinstance(flaky503, LetterScores)  # third attempt succeeded
    assert isinstance(once400, Failure) and (once400.kind, once400.status) == ("bad_request", 400)
    assert "bad field" in once400.message
    assert isinstance(forbidden, Failure) and (forbidden.kind, forbidden.status) == ("bad_request", 403)
    # The 400 rule fires once: had the client retried, the retry would have succeeded.
    [again] = _score(engine, "once400")
    assert isinstance(again, LetterScores)


def test_retries_are_bounded(scripted_server: str) -> None:
    engine = OpenAIEngine([scripted_server], "judge", max_retries=1)
    t0 = time.perf_counter()
    [res] = _score(engine, "always500")
    assert isinstance(res, Failure) and (res.kind, res.status) == ("http", 500) and "broken" in res.message
    assert res.extra == {"retries": "1"} and time.perf_counter() - t0 < 5


def test_context_too_long_is_its_own_failure(scripted_server: str) -> None:
    [res] = _score(OpenAIEngine([scripted_server], "judge"), "Question: " + "long " * 1000)
    assert isinstance(res, Failure) and res.kind == "context_too_long" and res.status == 400
    assert "maximum context length" in res.message


def test_a_hanging_server_gives_a_timeout_not_a_hang(scripted_server: str) -> None:
    t0 = time.perf_counter()
    [res] = _score(OpenAIEngine([scripted_server], "judge", timeout_s=1.0), "hang")
    assert isinstance(res, Failure) and res.kind == "timeout" and time.perf_counter() - t0 < 5


def test_a_killed_server_gives_failures(rules_file: Path) -> None:
    args = ("--engine", "scripted", "--rules", str(rules_file), "--model", "judge")
    with cli_server(*args) as (url, proc):
        engine = OpenAIEngine([url], "judge", max_retries=1, timeout_s=30)

        async def go() -> list[LetterScores | Failure]:
            try:
                before = await engine.score([ScoreRequest("ok", "Question: x")])
                pending = asyncio.ensure_future(engine.score([ScoreRequest(f"h{i}", "hang") for i in range(4)]))
                await asyncio.sleep(0.5)
                os.killpg(proc.pid, signal.SIGKILL)  # killed while answering
                during = await pending
                after = await engine.score([ScoreRequest("late", "Question: x")])
                return [*before, *during, *after]
            finally:
                await engine.aclose()

        t0 = time.perf_counter()
        res = asyncio.run(go())
    assert isinstance(res[0], LetterScores)
    assert all(isinstance(r, Failure) and r.kind == "connection" for r in res[1:])
    assert len(res) == 6 and time.perf_counter() - t0 < 15


def test_requests_spread_over_endpoints_and_avoid_a_dead_one(rules_file: Path) -> None:
    args = ("--engine", "scripted", "--rules", str(rules_file), "--model", "judge")
    dead = f"http://127.0.0.1:{free_port()}"
    with cli_server(*args) as (a, _), cli_server(*args) as (b, _):
        engine = OpenAIEngine([a, b], "judge", concurrency=4)

        async def go(eng: OpenAIEngine) -> tuple[list[LetterScores | Failure], dict[str, int]]:
            try:
                res = await eng.score([ScoreRequest(str(i), "Question: q") for i in range(40)])
                return res, eng.requests_sent()
            finally:
                await eng.aclose()

        res, sent = asyncio.run(go(engine))
        assert all(isinstance(r, LetterScores) for r in res)
        assert sorted(sent.values()) == [20, 20]
        async def waves(eng: OpenAIEngine) -> tuple[list[LetterScores | Failure], list[dict[str, int]]]:
            try:
                first = await eng.score([ScoreRequest(f"a{i}", "Question: q") for i in range(10)])
                after_first = eng.requests_sent()
                second = await eng.score([ScoreRequest(f"b{i}", "Question: q") for i in range(40)])
                return first + second, [after_first, eng.requests_sent()]
            finally:
                await eng.aclose()

        res, (s1, s2) = asyncio.run(waves(OpenAIEngine([dead, a], "judge", max_retries=2)))
        assert all(isinstance(r, LetterScores) for r in res)  # a refused connection retries elsewhere
        assert s2[dead + "/v1"] == s1[dead + "/v1"]  # and the dead one is skipped afterwards
        assert s2[a + "/v1"] == 50


def test_api_key_goes_to_the_endpoint(rules_file: Path) -> None:
    args = ("--engine", "scripted", "--rules", str(rules_file), "--model", "judge", "--api-key", "k3y")
    with cli_server(*args) as (url, _):
        [ok] = _score(OpenAIEngine([url], "judge", api_key="k3y"), "Question: q")
        [denied] = _score(OpenAIEngine([url], "judge"), "Question: q")
        models = asyncio.run(_models(OpenAIEngine([url], "judge", api_key="k3y")))
    assert isinstance(ok, LetterScores)
    assert isinstance(denied, Failure) and (denied.kind, denied.status) == ("bad_request", 401)
    assert "k3y" not in repr(OpenAIEngine([url], "judge", api_key="k3y"))
    assert models == {url + "/v1": ["scripted:judge"]}


def test_a_key_the_server_echoes_is_masked_in_failures() -> None:
    """A server that refuses the key and quotes it ("Incorrect API key provided: sk-…", as some
    proxies do): the failure becomes an error row and a console line, so it must not carry the key."""
    from aiohttp import web

    key = "sk-echoed-secret-4242"

    async def chat(request: web.Request) -> web.Response:
        given = request.headers.get("Authorization", "").removeprefix("Bearer ")
        status = 500 if "retry" in (await request.json())["messages"][0]["content"][-1]["text"] else 401
        return web.json_response({"error": {"message": f"Incorrect API key provided: {given}"}}, status=status)

    app = web.Application()
    app.router.add_post("/v1/chat/completions", chat)
    with thread_server(app) as url:
        async def go() -> list[Any]:
            engine = OpenAIEngine([url], "m", api_key=key, max_retries=1)
            try:
                return [*await engine.score([ScoreRequest("s", "Question: q"), ScoreRequest("r", "Question: retry")]),
                        *await engine.generate([GenerateRequest("g", "Question: q")])]
            finally:
                await engine.aclose()

        res = asyncio.run(go())
    assert [(f.kind, f.status) for f in res] == [("bad_request", 401), ("http", 500), ("bad_request", 401)]
    for f in res:
        assert key not in f.message and key not in str(f) and "Incorrect API key provided: ***" in f.message


def test_masking_an_echoed_key_neither_leaks_a_cut_key_nor_cuts_up_words() -> None:
    """A plain-text error body that quotes the key where the message is cut short keeps no piece of
    it; a key too short to be a secret ("1", as local servers take) leaves the message whole."""
    from aiohttp import web

    key = "sk-echoed-secret-at-the-cut-4242"

    async def chat(request: web.Request) -> web.Response:
        given = request.headers.get("Authorization", "").removeprefix("Bearer ")
        return web.Response(text="x" * 290 + f" key {given} refused", status=401)

    app = web.Application()
    app.router.add_post("/v1/chat/completions", chat)
    with thread_server(app) as url:
        async def go(k: str) -> Any:
            engine = OpenAIEngine([url], "m", api_key=k, max_retries=0)
            try:
                return (await engine.score([ScoreRequest("s", "Question: q")]))[0]
            finally:
                await engine.aclose()

        cut, plain = asyncio.run(go(key)), asyncio.run(go("1"))
    assert isinstance(cut, Failure) and "sk-echoed" not in cut.message and "sk-" not in cut.message
    assert isinstance(plain, Failure) and url.removeprefix("http://") in plain.message and MASK not in plain.message


async def _models(engine: OpenAIEngine) -> dict[str, list[str]]:
    try:
        return await engine.served_models()
    finally:
        await engine.aclose()


def test_a_200_that_is_not_a_chat_completion_is_an_internal_failure() -> None:
    from aiohttp import web

    answers = iter([b"[]", b"not json", b'{"choices": []}'])

    async def chat(request: web.Request) -> web.Response:
        return web.Response(body=next(answers), content_type="application/json")

    app = web.Application()
    app.router.add_post("/v1/chat/completions", chat)
    with thread_server(app) as url:
        async def go() -> list[LetterScores | Failure]:
            engine = OpenAIEngine([url], "m", concurrency=1)
            try:
                return await engine.score([ScoreRequest(str(i), "Question: q") for i in range(3)])
            finally:
                await engine.aclose()

        res = asyncio.run(go())
    assert [r.kind for r in res if isinstance(r, Failure)] == ["internal"] * 3
    assert "no choices" in res[2].message  # type: ignore[union-attr]


def _malformed_logprob_app(entry: dict[str, object]) -> Any:
    """A server whose scoring answers carry one malformed top-log-prob entry for prompts with "bad"."""
    from aiohttp import web

    async def chat(request: web.Request) -> web.Response:
        body = await request.json()
        prompt = body["messages"][0]["content"][-1]["text"]
        top: list[dict[str, object]] = [{"token": "A", "logprob": -0.5}]
        if "bad" in prompt:
            top.append(entry)
        usage: dict[str, object] = {"prompt_tokens": 7, "completion_tokens": 1}
        if "inf-usage" in prompt:
            usage["prompt_tokens"] = float("inf")
        return web.json_response({
            "model": "m", "usage": usage,
            "choices": [{"index": 0, "message": {"role": "assistant", "content": "A"},
                         "logprobs": {"content": [{"token": "A", "logprob": -0.5, "top_logprobs": top}]}}],
        }, dumps=lambda o: json.dumps(o, allow_nan=True))

    app = web.Application()
    app.router.add_post("/v1/chat/completions", chat)
    return app


@pytest.mark.parametrize("entry", [
    {"token": "B"},                        # missing logprob: KeyError before the fix
    {"token": "B", "logprob": None},       # null: TypeError
    {"token": "B", "logprob": "-1.0x"},    # not a number: ValueError
    {"token": "B", "logprob": [1]},
    {"token": "B", "logprob": float("nan")},
])
def test_malformed_logprob_is_a_failure_of_that_request_only(entry: dict[str, object]) -> None:
    with thread_server(_malformed_logprob_app(entry)) as url:
        res = _score(OpenAIEngine([url], "m", max_retries=0), "good 1", "bad 2", "good 3")
    assert isinstance(res[0], LetterScores) and isinstance(res[2], LetterScores)
    assert res[0].top == [{"token": "A", "logprob": -0.5}] and res[0].prompt_tokens == 7
    bad = res[1]
    assert isinstance(bad, Failure) and bad.kind == "internal" and bad.request_id == "r1"
    assert "logprob" in bad.message


def test_non_finite_usage_is_a_failure_not_an_exception() -> None:
    with thread_server(_malformed_logprob_app({})) as url:
        res = _score(OpenAIEngine([url], "m", max_retries=0), "inf-usage", "good")
    assert isinstance(res[0], Failure) and res[0].kind == "internal" and "usage" in res[0].message
    assert isinstance(res[1], LetterScores)


def test_unexpected_parser_exception_fails_one_request(monkeypatch: pytest.MonkeyPatch) -> None:
    """Whatever a parser raises, score() returns a Failure for that request, never raises."""
    import benchcheck.engines.openai.client as oa

    def broken(d: dict[str, Any], rid: str, latency: float) -> LetterScores:
        if rid == "r1":
            raise RuntimeError("parser bug")
        return real(d, rid, latency)

    real = oa.parse_score
    monkeypatch.setattr(oa, "parse_score", broken)
    with thread_server(_malformed_logprob_app({})) as url:
        res = _score(OpenAIEngine([url], "m", max_retries=0), "good 1", "good 2")
    assert isinstance(res[0], LetterScores)
    assert isinstance(res[1], Failure) and res[1].kind == "internal" and "RuntimeError: parser bug" in res[1].message


def test_an_endpoint_with_credentials_in_its_url_is_refused_without_echoing_them(tmp_path: Path) -> None:
    """Endpoints are written into run logs and failure messages, so a key inside the URL would be
    too: ``screen`` refuses it in one line, which masks the credentials, and writes nothing."""
    import subprocess
    import sys

    from benchcheck.engines.openai.client import normalize_endpoint

    with pytest.raises(ValueError, match=r"'http://\*\*\*@127\.0\.0\.1:9/v1'"):
        normalize_endpoint("http://me:sk-verysecret12345@127.0.0.1:9/v1")
    assert normalize_endpoint("http://127.0.0.1:9") == "http://127.0.0.1:9/v1"
    items = tmp_path / "items.jsonl"
    items.write_text(json.dumps({"item_id": "S_0", "bench": "S", "question": "q?", "options": ["a", "b"],
                                 "answer": 0}) + "\n")
    p = subprocess.run([sys.executable, "-m", "benchcheck", "screen", "--items", str(items), "--step", "1",
                        "--results", str(tmp_path / "r"), "--engine", "openai", "--endpoint",
                        "http://me:sk-verysecret12345@127.0.0.1:9/v1", "--model", "m", "--no-progress"],
                       capture_output=True, text=True, timeout=120)
    assert p.returncode == 2 and "credentials in the URL" in p.stderr
    assert "verysecret" not in p.stdout + p.stderr and len(p.stderr.strip().splitlines()) == 1
    assert not any("verysecret" in f.read_text(errors="replace") for f in tmp_path.rglob("*") if f.is_file())
