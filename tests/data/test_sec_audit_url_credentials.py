"""A URL with ``user:password@`` (an ``HF_ENDPOINT`` with credentials, a logged endpoint) never reaches
an error message or a masked log: the Hub client quotes the URL it failed on, whole."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from aiohttp import web

from benchcheck.masking import Masker, redact
from loopback import thread_server

PASSWORD = "PaSsW0rd-42xyz"


def test_the_password_of_a_url_is_masked_whole() -> None:
    assert redact(f"GET http://alice:{PASSWORD}@h:1/v1 failed") == "GET http://***@h:1/v1 failed"
    assert redact('"https://ghp_tok123456@github.com/x"') == '"https://***@github.com/x"'
    assert Masker([]).text("a@b.c http://h/path@x") == "a@b.c http://h/path@x"  # no userinfo: as it is


def test_data_fetch_never_prints_the_endpoints_credentials(tmp_path: Path) -> None:
    seen: list[str] = []

    async def fail(request: web.Request) -> web.Response:
        seen.append(request.path)
        return web.json_response({"error": "boom"}, status=500)

    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", fail)
    with thread_server(app) as url:
        endpoint = url.replace("http://", f"http://alice:{PASSWORD}@")
        env = {**os.environ, "HF_ENDPOINT": endpoint, "HF_HUB_DISABLE_TELEMETRY": "1", "HF_HOME": str(tmp_path / "hf"),
               "PYTHONPATH": os.path.abspath("src")}
        env.pop("HF_TOKEN", None)
        res = subprocess.run([sys.executable, "-m", "benchcheck", "data", "fetch", "some/repo", "--kind", "items",
                              "--out", str(tmp_path / "out")], capture_output=True, text=True, env=env, timeout=120)
    assert seen, res.stderr  # the Hub client asked the endpoint and failed
    assert res.returncode != 0 and "some/repo" in res.stderr
    assert PASSWORD not in res.stdout + res.stderr
