"""Seed 001: stop when the server cannot serve 65,536 tokens. A 60,000-token server holds the budget
(58,128) but is refused unless the user lowers the floor explicitly with --min-context."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import threading
from pathlib import Path

from aiohttp import web
from sweep_helpers import item, write_items, write_rules

from benchcheck.engines.rules.scripted import ScriptedEngine
from benchcheck.serve.app import build_app
from benchcheck.sweep.engine import MIN_CONTEXT, check_context
from loopback import free_port, thread_server

RULES = [{"match": "", "reply": "The answer is A."}]


def _argv(tmp: Path, store: Path, url: str, *extra: str) -> list[str]:
    items = write_items(tmp / "items", [item("Alpha", 0, "mid100"), item("Alpha", 1, "s720")])
    argv = [sys.executable, "-m", "benchcheck", "sweep", "run"]
    for p in items:
        argv += ["--items", str(p)]
    return [*argv, "--store", str(store), "--results", str(tmp / "fp" / "results"), "--engine", "openai",
            "--endpoint", f"{url}/v1", "--model", "small", "--conds", "v_1", "--decode-workers", "0",
            "--no-progress", *extra]


def test_the_floor_is_65536_and_the_budget_need_stays_below_it() -> None:
    assert MIN_CONTEXT == 65536
    assert check_context(65536, None, True) is None
    msg = check_context(60000, None, True)
    assert msg is not None and "60,000 tokens < 65,536" in msg and "--min-context 60000" in msg
    assert check_context(60000, None, True, min_context=60000) is None
    assert check_context(40000, None, True, min_context=30000) is not None  # never below the budget's need
    assert check_context(60000, None, False) is None  # blind conditions need no context


def test_a_60000_server_is_refused_then_accepted_with_an_explicit_floor(tmp_path: Path, store: Path) -> None:
    write_rules(tmp_path / "r.json", RULES)
    engine = ScriptedEngine(RULES, name="small", max_model_len=60000)
    with thread_server(build_app(engine, "small")) as url:
        refused = subprocess.run(_argv(tmp_path, store, url), capture_output=True, text=True, timeout=120)
        assert refused.returncode == 2, refused.stderr
        assert "60,000 tokens < 65,536" in refused.stderr and "--min-context 60000" in refused.stderr
        assert "Traceback" not in refused.stderr
        assert not (tmp_path / "fp" / "results" / "conditions_results.csv").exists()
        accepted = subprocess.run(_argv(tmp_path, store, url, "--min-context", "60000"), capture_output=True,
                                  text=True, timeout=120)
    assert accepted.returncode == 0, accepted.stderr
    assert (tmp_path / "fp" / "results" / "conditions_results.csv").is_file()
    log = (tmp_path / "fp" / "results" / "logs" / "runner.log").read_text()  # RESULTS/logs by default
    assert "context floor lowered to 60,000 tokens by --min-context" in log


def test_the_context_probe_does_not_carry_the_key_through_a_redirect(tmp_path: Path, store: Path) -> None:
    """``sweep run`` asks each endpoint's ``/v1/models`` for its context with the API key; an endpoint
    that redirects to another host must not get the key sent there."""
    seen: dict[str, list[str | None]] = {"endpoint": [], "other": []}

    async def other_models(request: web.Request) -> web.Response:
        seen["other"].append(request.headers.get("Authorization"))
        return web.json_response({"data": [{"id": "small", "max_model_len": 1000}]})

    other = web.Application()
    other.router.add_get("/v1/models", other_models)
    with thread_server(other) as other_url:
        elsewhere = other_url.replace("127.0.0.1", "localhost") + "/v1/models"

        async def redirect(request: web.Request) -> web.Response:
            seen["endpoint"].append(request.headers.get("Authorization"))
            raise web.HTTPFound(elsewhere)

        endpoint = web.Application()
        endpoint.router.add_get("/v1/models", redirect)
        with thread_server(endpoint) as url:
            env = {**os.environ, "SWEEP_KEY": "sk-sweep-secret-123"}
            res = subprocess.run(_argv(tmp_path, store, url, "--api-key-env", "SWEEP_KEY"), capture_output=True,
                                 text=True, timeout=120, env=env)
    assert res.returncode == 2, res.stderr  # 1,000 tokens: refused before any request
    assert seen["endpoint"] == ["Bearer sk-sweep-secret-123"]
    assert seen["other"] and not any(seen["other"]), seen["other"]


def test_the_context_probe_never_sends_the_key_to_an_http_proxy_of_the_environment(tmp_path: Path,
                                                                                   store: Path) -> None:
    """The engine's requests (aiohttp) ignore ``http_proxy``; the context probe (urllib) sent the
    endpoint's key in clear to that proxy, a host the key was not meant for, and then read no
    context from the answer."""
    got: list[bytes] = []
    proxy = socket.create_server(("127.0.0.1", 0))

    def record() -> None:
        proxy.settimeout(60)
        try:
            conn, _ = proxy.accept()
        except OSError:
            return
        with conn:
            conn.settimeout(5)
            got.append(conn.recv(65536))

    t = threading.Thread(target=record, daemon=True)
    t.start()

    async def models(request: web.Request) -> web.Response:
        return web.json_response({"data": [{"id": "small", "max_model_len": 1000}]})

    endpoint = web.Application()
    endpoint.router.add_get("/v1/models", models)
    try:
        with thread_server(endpoint) as url:
            proxy_url = f"http://127.0.0.1:{proxy.getsockname()[1]}"
            env = {k: v for k, v in os.environ.items() if k.lower() != "no_proxy"}
            env |= {"SWEEP_KEY": "sk-sweep-secret-123", "http_proxy": proxy_url, "HTTP_PROXY": proxy_url}
            res = subprocess.run(_argv(tmp_path, store, url, "--api-key-env", "SWEEP_KEY"), capture_output=True,
                                 text=True, timeout=120, env=env)
    finally:
        proxy.close()
        t.join(10)
    assert not got, got
    assert res.returncode == 2 and "1,000" in res.stderr, res.stderr  # the endpoint's own context, read directly


def test_a_context_that_cannot_be_read_is_refused_naming_why(tmp_path: Path, store: Path) -> None:
    """A server that refuses the key, a wrong port or a model list of another shape stops the run
    with the cause, not with 'serve with --max-model-len', a server setting that would not help."""
    engine = ScriptedEngine(RULES, name="small")
    with thread_server(build_app(engine, "small", api_key="sk-right-key-123456")) as url:
        no_key = subprocess.run(_argv(tmp_path, store, url), capture_output=True, text=True, timeout=120)
    assert no_key.returncode == 2, no_key.stderr
    assert f"{url}/v1/models answered HTTP 401" in no_key.stderr and "--api-key-env" in no_key.stderr
    assert "Serve with --max-model-len" not in no_key.stderr

    down = f"http://127.0.0.1:{free_port()}"
    refused = subprocess.run(_argv(tmp_path, store, down), capture_output=True, text=True, timeout=120)
    assert refused.returncode == 2, refused.stderr
    assert f"{down}/v1/models cannot be reached" in refused.stderr and "--endpoint" in refused.stderr

    async def a_list(request: web.Request) -> web.Response:
        return web.json_response([{"id": "small", "max_model_len": 65536}])

    odd = web.Application()
    odd.router.add_get("/v1/models", a_list)
    with thread_server(odd) as url:
        shaped = subprocess.run(_argv(tmp_path, store, url), capture_output=True, text=True, timeout=120)
    assert shaped.returncode == 2, shaped.stderr
    assert "Traceback" not in shaped.stderr and f"{url}/v1/models reports no max_model_len" in shaped.stderr
    assert not (tmp_path / "fp" / "results" / "conditions_results.csv").exists()
