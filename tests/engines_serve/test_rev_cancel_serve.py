"""Clients that disconnect from ``benchcheck serve`` (handler cancellation), seen from outside:
real server processes, raw sockets closed mid-request."""

from __future__ import annotations

import json
import socket
import time
from pathlib import Path

from serve_fixtures import cli_server


def _send(url: str, body: dict[str, object]) -> socket.socket:
    """A request written on a fresh connection; the caller closes it to leave."""
    raw = json.dumps(body).encode()
    host, port = url.removeprefix("http://").split(":")
    s = socket.create_connection((host, int(port)))
    s.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
              b"Content-Length: %d\r\n\r\n" % len(raw) + raw)
    return s


def _wait_for(log: Path, text: str, timeout_s: float = 20.0) -> str:
    deadline = time.monotonic() + timeout_s
    while text not in (got := log.read_text()) and time.monotonic() < deadline:
        time.sleep(0.05)
    return got


def test_a_request_whose_client_left_has_its_access_log_line(rules_file: Path, tmp_path: Path) -> None:
    log = tmp_path / "server.log"
    args = ("--engine", "scripted", "--rules", str(rules_file), "--model", "j", "--access-log")
    with cli_server(*args, log=log) as (url, _):
        s = _send(url, {"messages": [{"role": "user", "content": "hang"}]})  # answered after 30 s
        time.sleep(0.5)  # the handler waits on the engine
        s.close()
        text = _wait_for(log, '"POST /v1/chat/completions HTTP/1.1" 499 ')
    lines = [ln for ln in text.splitlines() if "POST /v1/chat/completions" in ln]
    assert len(lines) == 1 and '"POST /v1/chat/completions HTTP/1.1" 499 0 ' in lines[0], text
    assert "Traceback" not in text


def test_a_client_that_leaves_mid_body_is_a_cancelled_request_not_a_server_error(
        rules_file: Path, tmp_path: Path) -> None:
    log = tmp_path / "server.log"
    args = ("--engine", "scripted", "--rules", str(rules_file), "--model", "j", "--access-log")
    with cli_server(*args, log=log) as (url, _):
        host, port = url.removeprefix("http://").split(":")
        for _ in range(3):
            with socket.create_connection((host, int(port))) as s:
                s.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                          b'Content-Length: 100\r\n\r\n{"messages')
                time.sleep(0.3)  # the handler waits for the rest of the body
        text = _wait_for(log, '"POST /v1/chat/completions HTTP/1.1" 499 ')
        time.sleep(0.5)  # the other two lines
        text = log.read_text()
    lines = [ln for ln in text.splitlines() if "POST /v1/chat/completions" in ln]
    assert len(lines) == 3 and all(" 499 0 " in ln for ln in lines), text
    assert "Traceback" not in text and "Error handling request" not in text
