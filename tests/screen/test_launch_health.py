"""``healthy`` reads a peer that is not an HTTP server as not healthy, never raising: a poll of a
port in the ephemeral range before the server listens can connect to itself and read its own
request back (seen in CI as ``BadStatusLine: GET /health HTTP/1.1``)."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import threading
from pathlib import Path

from aiohttp import web

from benchcheck.launch.servers import healthy
from loopback import thread_server


def test_an_echoing_peer_is_not_healthy() -> None:
    srv = socket.create_server(("127.0.0.1", 0))
    port = srv.getsockname()[1]

    def echo() -> None:
        conn, _ = srv.accept()
        with conn:
            conn.sendall(conn.recv(4096))  # what a self-connected socket reads: its own request

    t = threading.Thread(target=echo, daemon=True)
    t.start()
    try:
        assert healthy(f"http://127.0.0.1:{port}/v1", timeout=5.0) is False
    finally:
        t.join(5)
        srv.close()


def test_health_is_asked_directly_not_through_an_http_proxy_variable(tmp_path: Path) -> None:
    """Clusters often set ``http_proxy`` for outbound traffic; a proxy cannot reach this host's
    loopback, so a health poll sent through it never saw the servers healthy and ``launch`` failed
    after ``--server-timeout`` with every server up. (A fresh process: urllib reads the proxy
    variables once per process.)"""

    async def ok(request: web.Request) -> web.Response:
        return web.Response(status=200)

    app = web.Application()
    app.router.add_get("/health", ok)
    with socket.socket() as dead:  # a proxy address where nothing listens
        dead.bind(("127.0.0.1", 0))
        proxy = f"http://127.0.0.1:{dead.getsockname()[1]}"
    env = {k: v for k, v in os.environ.items() if k.lower() != "no_proxy"}
    env |= {"http_proxy": proxy, "HTTP_PROXY": proxy, "PYTHONPATH": os.path.abspath("src")}
    with thread_server(app) as url:
        res = subprocess.run([sys.executable, "-c", "import sys; from benchcheck.launch.servers import healthy; "
                              f"sys.exit(0 if healthy({url + '/v1'!r}, timeout=5.0) else 1)"],
                             env=env, cwd=tmp_path, capture_output=True, text=True, timeout=60)
    assert res.returncode == 0, res.stderr
