"""``--api-key-env VAR`` naming a variable that is unset or empty: the run is refused in one line
naming it, before any request or row (it sent no key, wrote an error row per item and stopped on
"check the API key" without naming the variable)."""

from __future__ import annotations

import os
from pathlib import Path

from aiohttp import web
from screen_helpers import cli

from benchcheck.engines.rules.scripted import ScriptedEngine
from benchcheck.serve.app import build_app
from loopback import thread_server

RULES = [{"match": "", "reply": "A", "letters": {"A": -0.1, "B": -2.0}}]


def _keyed_server(seen: list[str | None]) -> web.Application:
    app = build_app(ScriptedEngine(RULES, name="m"), "m", api_key="sk-the-right-key-123")

    @web.middleware
    async def count(request: web.Request, handler):  # type: ignore[no-untyped-def]
        seen.append(request.headers.get("Authorization"))
        return await handler(request)

    app.middlewares.insert(0, count)
    return app


def test_screen_refuses_an_unset_or_empty_key_variable(tmp_path: Path) -> None:
    assert cli("demo", "items", "--out", str(tmp_path / "items")).returncode == 0
    seen: list[str | None] = []
    env = {k: v for k, v in os.environ.items() if k != "NOT_SET_KEY"} | {"EMPTY_KEY": ""}
    with thread_server(_keyed_server(seen)) as url:
        for var in ("NOT_SET_KEY", "EMPTY_KEY"):
            r = cli("screen", "--items", str(tmp_path / "items"), "--step", "1", "--results", str(tmp_path / "res"),
                    "--engine", "openai", "--endpoint", url + "/v1", "--model", "m", "--api-key-env", var,
                    "--limit", "2", "--no-progress", env=env)
            assert r.returncode == 2, r.stdout + r.stderr
            assert r.stderr.strip().splitlines() == [
                f"error: --api-key-env {var}: that variable is not set in this environment (export it, "
                "or leave --api-key-env out for a server without a key)"]
        planned = cli("screen", "--items", str(tmp_path / "items"), "--step", "1", "--results", str(tmp_path / "res"),
                      "--engine", "openai", "--endpoint", url + "/v1", "--model", "m", "--api-key-env", "NOT_SET_KEY",
                      "--limit", "2", "--plan-only", env=env)  # a plan sends nothing: no key needed
        assert planned.returncode == 0, planned.stderr
    assert seen == []
    assert not list((tmp_path / "res").rglob("*.jsonl"))


def test_sweep_run_refuses_an_unset_key_variable(tmp_path: Path) -> None:
    assert cli("demo", "items", "--out", str(tmp_path / "items")).returncode == 0
    (tmp_path / "store").mkdir()
    seen: list[str | None] = []
    env = {k: v for k, v in os.environ.items() if k != "NOT_SET_KEY"}
    with thread_server(_keyed_server(seen)) as url:
        r = cli("sweep", "run", "--items", str(tmp_path / "items"), "--store", str(tmp_path / "store"),
                "--results", str(tmp_path / "sw"), "--engine", "openai", "--endpoint", url + "/v1", "--model", "m",
                "--api-key-env", "NOT_SET_KEY", "--conds", "v_blind", "--limit", "2", "--no-progress", env=env)
    assert r.returncode == 2, r.stdout + r.stderr
    assert "error: --api-key-env NOT_SET_KEY: that variable is not set" in r.stderr and "Traceback" not in r.stderr
    assert seen == []
    assert not (tmp_path / "sw" / "conditions_results.csv").exists()
