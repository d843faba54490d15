"""Seed 000 runs ``STEP=1 ...`` then ``STEP=2 ...``: the second launch finds the first server's port
in TIME_WAIT and must take it (servers bind with SO_REUSEADDR); a port with a listener stays refused."""

from __future__ import annotations

import json
import socket
import sys
import time
from pathlib import Path

import pytest

from benchcheck.launch.servers import ServerSpec, port_free, start, stop, wait_healthy
from loopback import free_port

_TIME_WAIT = "06"


def _time_wait_on(port: int) -> bool:
    """Whether a loopback TCP socket with local port ``port`` is in TIME_WAIT (/proc/net/tcp)."""
    for line in Path("/proc/net/tcp").read_text().splitlines()[1:]:
        local, state = line.split()[1], line.split()[3]
        if int(local.split(":")[1], 16) == port and state == _TIME_WAIT:
            return True
    return False


def _serve_spec(rules: Path, port: int) -> ServerSpec:
    return ServerSpec(0, port, (sys.executable, "-m", "benchcheck", "serve", "--engine", "scripted", "--rules",
                                str(rules), "--model", "vlm", "--port", str(port)))


def _ask(port: int) -> str:
    """One chat request with ``Connection: close``, read until the server has closed its end: the side
    that closes first keeps the TIME_WAIT, so the server's port is left in it."""
    body = json.dumps({"model": "vlm", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 4}).encode()
    head = (f"POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
            f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n").encode()
    with socket.create_connection(("127.0.0.1", port), timeout=30) as s:
        s.sendall(head + body)
        data = b""
        while chunk := s.recv(65536):  # b"": the server's FIN arrived before we close
            data += chunk
    reply = json.loads(data.split(b"\r\n\r\n", 1)[1])
    return str(reply["choices"][0]["message"]["content"])


@pytest.mark.skipif(not Path("/proc/net/tcp").exists(), reason="reads TIME_WAIT from /proc/net/tcp (Linux)")
def test_step_2_starts_seconds_after_step_1_on_the_same_port(tmp_path: Path) -> None:
    rules = tmp_path / "rules.json"
    rules.write_text(json.dumps([{"match": "", "reply": "ok"}]))
    port = free_port()
    first = start(_serve_spec(rules, port), tmp_path / "vllm_s1_gpu0.log")
    try:
        wait_healthy([first], 60)
        assert _ask(port) == "ok"
    finally:
        stop([first.proc])
    t_stopped = time.monotonic()
    assert _time_wait_on(port), "the test needs the first server's port in TIME_WAIT"
    assert port_free("127.0.0.1", port)
    second = start(_serve_spec(rules, port), tmp_path / "vllm_s2_gpu0.log")  # refused before: "already in use"
    try:
        wait_healthy([second], 60)
        assert _ask(port) == "ok"
        assert time.monotonic() - t_stopped < 30  # within seconds, not after TIME_WAIT's minute
        assert not port_free("127.0.0.1", port)  # a listener: taken
        with pytest.raises(RuntimeError, match="already in use"):
            start(_serve_spec(rules, port), tmp_path / "vllm_s3_gpu0.log")
    finally:
        stop([second.proc])


def test_a_listener_on_the_port_is_still_refused() -> None:
    with socket.socket() as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        s.bind(("127.0.0.1", 0))
        s.listen()
        assert not port_free("127.0.0.1", s.getsockname()[1])
