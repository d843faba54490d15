"""``benchcheck serve`` over HTTP: the official openai client, vLLM-shaped errors, API keys,
batching of concurrent requests."""

from __future__ import annotations

import asyncio
import json
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import aiohttp
import openai
import pytest
from aiohttp import web
from serve_fixtures import HeldEngine, cli_server, post_chat, until

from benchcheck.engines.rules.scripted import ScriptedEngine
from benchcheck.serve.app import STATE, build_app
from loopback import thread_server

SCORE_EXTRA = {"continue_final_message": True, "add_generation_prompt": False}


def test_official_openai_client_scores_and_generates(scripted_server: str) -> None:
    client = openai.OpenAI(base_url=scripted_server + "/v1", api_key="unused", max_retries=0)
    models = client.models.list()
    assert [m.id for m in models.data] == ["scripted:judge"]
    r = client.chat.completions.create(
        model="judge",
        messages=[{"role": "user", "content": [{"type": "text", "text": "Question: sky colour?"}]},
                  {"role": "assistant", "content": "Answer:"}],
        max_tokens=1, temperature=0, logprobs=True, top_logprobs=20, extra_body=SCORE_EXTRA,
    )
    assert r.choices[0].logprobs is not None and r.choices[0].logprobs.content is not None
    first = r.choices[0].logprobs.content[0]
    assert len(first.top_logprobs) == 20 and first.token == "A"
    expected = [("A", -0.25), ("B", -2.0), (" C", -3.5), ("(D", -5.0)]
    assert [(t.token, t.logprob) for t in first.top_logprobs[:4]] == expected
    assert r.usage is not None and r.usage.prompt_tokens > 0
    assert r.model == "scripted:judge" and "scripted" in (r.system_fingerprint or "")
    g = client.chat.completions.create(
        model="scripted:judge", messages=[{"role": "user", "content": "capital of France?"}]
    )
    assert g.choices[0].message.content == "Paris" and g.choices[0].finish_reason == "stop"
    with pytest.raises(openai.RateLimitError, match="rate limited"):
        client.chat.completions.create(model="judge", messages=[{"role": "user", "content": "flaky429"}])
    with pytest.raises(openai.NotFoundError, match="does not exist"):
        client.chat.completions.create(model="other", messages=[{"role": "user", "content": "x"}])


def test_errors_have_vllm_011_shape(scripted_server: str) -> None:
    status, body = post_chat(scripted_server, {"model": "judge", "messages": [{"role": "user", "content": "x" * 4000}],
                                           "max_tokens": 10})
    assert status == 400
    assert body["error"]["type"] == "BadRequestError" and body["error"]["code"] == 400
    assert "maximum context length is 1000 tokens" in body["error"]["message"]
    status, body = post_chat(scripted_server, {"messages": [{"role": "user", "content": "Q"}], "top_logprobs": 30,
                                           "logprobs": True, "max_tokens": 1})
    assert status == 400 and "max allowed: 20" in body["error"]["message"]
    status, body = post_chat(scripted_server, {"messages": [{"role": "user", "content": "forbidden"}]})
    assert status == 403 and body["error"]["message"] == "no access"
    req = urllib.request.Request(scripted_server + "/v1/chat/completions", b"{not json",
                                 {"Content-Type": "application/json"})
    with pytest.raises(urllib.error.HTTPError) as e:
        urllib.request.urlopen(req, timeout=10)
    assert e.value.code == 400 and "not valid JSON" in json.loads(e.value.read())["error"]["message"]


def test_api_key_is_enforced_on_v1_only(rules_file: Path) -> None:
    args = ("--engine", "scripted", "--rules", str(rules_file), "--model", "j", "--api-key", "s3cret")
    with cli_server(*args) as (url, _):
        body = {"messages": [{"role": "user", "content": "capital of France"}]}
        assert post_chat(url, body) == (401, {"error": "Unauthorized"})
        assert post_chat(url, body, key="wrong")[0] == 401
        status, ok = post_chat(url, body, key="s3cret")
        assert status == 200 and ok["choices"][0]["message"]["content"] == "Paris"
        with urllib.request.urlopen(url + "/health", timeout=5) as r:  # health stays open, as in vLLM
            assert r.status == 200
        with pytest.raises(openai.AuthenticationError):
            openai.OpenAI(base_url=url + "/v1", api_key="wrong", max_retries=0).models.list()


def test_server_binds_loopback_by_default(scripted_server: str) -> None:
    assert scripted_server.startswith("http://127.0.0.1:")


def test_concurrent_requests_reach_the_engine_as_one_batch() -> None:
    # One engine call in flight: the first request holds it until the 24 sent after it started
    # are queued; those must then go in together as the next call.
    app: web.Application | None = None

    def queued() -> bool:
        return app is not None and app[STATE].scores.waiting == 24

    engine = HeldEngine([{"match": "", "letters": {"A": -0.1}}], "first", queued)
    app = build_app(engine, "m", max_batch_size=64, max_inflight_batches=1)
    stats = app[STATE].scores

    def body(text: str) -> dict[str, Any]:
        return {"messages": [{"role": "user", "content": text}, {"role": "assistant", "content": "Answer:"}],
                "logprobs": True, "top_logprobs": 5, "max_tokens": 1, **SCORE_EXTRA}

    async def run(url: str) -> list[int]:
        async with aiohttp.ClientSession() as s:
            async def one(text: str) -> int:
                if text != "first":
                    await until(lambda: stats.calls == 1)
                async with s.post(url + "/v1/chat/completions", json=body(text)) as r:
                    return r.status

            return list(await asyncio.gather(one("first"), *(one("Q") for _ in range(24))))

    with thread_server(app) as url:
        statuses = asyncio.run(run(url))
    assert statuses == [200] * 25
    assert stats.requests == 25 and stats.calls == 2 and stats.largest == 24


def test_access_log_has_no_headers_or_bodies(rules_file: Path, tmp_path: Path) -> None:
    log = tmp_path / "server.log"
    args = ("--engine", "scripted", "--rules", str(rules_file), "--model", "j", "--api-key", "TOPSECRETKEY",
            "--access-log")
    with cli_server(*args, log=log) as (url, _):
        status, _ = post_chat(url, {"messages": [{"role": "user", "content": "capital of France PRIVATEBODY"}]},
                          key="TOPSECRETKEY")
        assert status == 200
        deadline = time.monotonic() + 10  # the access line is written just after the answer
        while "POST /v1/chat/completions" not in log.read_text() and time.monotonic() < deadline:
            time.sleep(0.05)
    text = log.read_text()
    assert "POST /v1/chat/completions" in text and " 200 " in text
    assert "TOPSECRETKEY" not in text and "PRIVATEBODY" not in text


def test_access_log_has_no_query_strings(rules_file: Path, tmp_path: Path) -> None:
    """A client may pass a key in the query (``?api_key=``): the access log wrote it with the path,
    for answered requests and for those whose client left first."""
    import socket

    log = tmp_path / "server.log"
    args = ("--engine", "scripted", "--rules", str(rules_file), "--model", "j", "--access-log")
    with cli_server(*args, log=log) as (url, _):
        with urllib.request.urlopen(url + "/v1/models?api_key=QUERYSECRET1&x=1", timeout=30) as r:
            assert r.status == 200
        raw = json.dumps({"messages": [{"role": "user", "content": "hang"}]}).encode()  # answered after 30 s
        host, port = url.removeprefix("http://").split(":")
        with socket.create_connection((host, int(port))) as s:
            s.sendall(b"POST /v1/chat/completions?api_key=QUERYSECRET2 HTTP/1.1\r\nHost: x\r\n"
                      b"Content-Type: application/json\r\nContent-Length: %d\r\n\r\n" % len(raw) + raw)
            time.sleep(0.5)  # the handler waits on the engine
        deadline = time.monotonic() + 20  # the access lines are written just after the answers
        while " 499 " not in log.read_text() and time.monotonic() < deadline:
            time.sleep(0.05)
    text = log.read_text()
    assert '"GET /v1/models HTTP/1.1" 200 ' in text, text
    assert '"POST /v1/chat/completions HTTP/1.1" 499 0 ' in text, text
    assert "QUERYSECRET" not in text and "api_key" not in text


def test_cli_errors_are_one_line(rules_file: Path, tmp_path: Path) -> None:
    import subprocess
    import sys

    from loopback import free_port

    def serve(*args: str) -> subprocess.CompletedProcess[str]:
        cmd = [sys.executable, "-c", "from benchcheck.cli import main; main()", "serve", *args]
        return subprocess.run(cmd, capture_output=True, text=True, timeout=120)

    missing = serve("--engine", "scripted", "--model", "j")
    assert missing.returncode == 2 and missing.stderr.strip() == "error: --engine scripted needs --rules FILE"
    bad = tmp_path / "bad.json"
    bad.write_text('[{"match": "("}]')
    res = serve("--engine", "scripted", "--rules", str(bad), "--model", "j")
    assert res.returncode == 2 and "bad.json rule 0" in res.stderr and "Traceback" not in res.stderr
    res = serve("--model", str(tmp_path / "no-such-model-dir"), "--port", str(free_port()))
    assert res.returncode == 2 and "cannot load model" in res.stderr and "Traceback" not in res.stderr


def _apppost_chat(app: Any, bodies: list[dict[str, Any]]) -> list[tuple[int, dict[str, Any]]]:
    with thread_server(app) as url:
        return [post_chat(url, b) for b in bodies]


def test_logprobs_without_max_tokens_is_refused() -> None:
    """vLLM would generate to the end of the context with log-probs; a silent 1-token answer is not that."""
    app = build_app(ScriptedEngine([{"match": "", "letters": {"A": -0.1}}], "m"), "m")
    msgs = [{"role": "user", "content": "Q"}, {"role": "assistant", "content": "Answer:"}]
    base = {"messages": msgs, "logprobs": True, "top_logprobs": 5, **SCORE_EXTRA}
    (missing, null, one) = _apppost_chat(app, [base, {**base, "max_tokens": None}, {**base, "max_tokens": 1}])
    for status, body in (missing, null):
        assert status == 400 and body["error"]["type"] == "BadRequestError"
        assert "max_tokens=1" in body["error"]["message"]
    assert one[0] == 200 and one[1]["choices"][0]["logprobs"]["content"][0]["token"] == "A"


def test_no_max_tokens_uses_the_rest_of_the_context() -> None:
    """As on vLLM: a prompt 300 tokens short of the limit is answered (up to 300 tokens), not refused."""
    engine = ScriptedEngine([{"match": "", "reply": "w" * 8000}], "m", max_model_len=1000)
    seen: list[int] = []
    real = engine.generate_each  # the server asks the scripted engine per request

    def spy(reqs: Any) -> Any:
        seen.extend(r.max_tokens for r in reqs)
        return real(reqs)

    engine.generate_each = spy  # type: ignore[method-assign]
    app = build_app(engine, "m")
    near = {"messages": [{"role": "user", "content": "p" * 2800}]}  # 700 tokens by the scripted estimate
    short = {"messages": [{"role": "user", "content": "p" * 40}]}  # 10 tokens
    full = {"messages": [{"role": "user", "content": "p" * 4000}]}  # 1000 tokens: nothing left
    explicit = {**near, "max_tokens": 512}
    (r_near, r_short, r_full, r_explicit) = _apppost_chat(app, [near, short, full, explicit])
    assert r_near[0] == 200, r_near
    assert r_near[1]["usage"]["prompt_tokens"] == 700 and r_near[1]["usage"]["completion_tokens"] == 300
    assert r_near[1]["choices"][0]["finish_reason"] == "length"
    assert r_short[0] == 200 and r_short[1]["usage"]["completion_tokens"] == 990
    assert seen[:2] == [300, 990]
    for status, body in (r_full, r_explicit):
        assert status == 400 and "maximum context length is 1000 tokens" in body["error"]["message"]


@pytest.mark.parametrize("model", [["m"], {"name": "m"}, 5, True])
def test_non_string_model_is_a_vllm_shaped_400(model: object) -> None:
    app = build_app(ScriptedEngine([{"match": "", "reply": "ok"}], "m"), "m")
    [(status, body)] = _apppost_chat(app, [{"model": model, "messages": [{"role": "user", "content": "x"}]}])
    assert status == 400
    assert body["error"]["type"] == "BadRequestError" and body["error"]["code"] == 400
    assert "'model'" in body["error"]["message"] and "string" in body["error"]["message"]
