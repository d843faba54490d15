"""``healthy`` reads a peer that is not an HTTP server as not healthy, never raising: a poll of a
port in the ephemeral range before the server listens can connect to itself and read its own
request back (seen in CI as ``BadStatusLine: GET /health HTTP/1.1``)."""

from __future__ import annotations

import socket
import threading

from benchcheck.launch.servers import healthy


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
