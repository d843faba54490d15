"""Hostile input 7: sockets trickling headers or bodies must not starve ``benchcheck serve``.

A real server (``--max-connections 8 --header-timeout 1 --body-timeout 1``) with twelve sockets
trickling header bytes and one trickling its body: a normal request is answered meanwhile, the
tricklers are closed, the slow body gets 408, and the server keeps serving."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import threading
import time
import urllib.request
from pathlib import Path

from serve_fixtures import cli_server


def _ask(url: str, text: str = "hi") -> str:
    body = json.dumps({"model": "vlm", "messages": [{"role": "user", "content": text}], "max_tokens": 4}).encode()
    req = urllib.request.Request(f"{url}/v1/chat/completions", body, {"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=10) as r:
        return str(json.loads(r.read())["choices"][0]["message"]["content"])


def _closed_by_server(s: socket.socket) -> bool:
    try:
        return s.recv(1) == b""
    except (ConnectionResetError, BrokenPipeError):
        return True
    except TimeoutError:
        return False


def test_tricklers_are_cut_and_normal_requests_are_served(tmp_path: Path) -> None:
    rules = tmp_path / "rules.json"
    rules.write_text(json.dumps([{"match": "", "reply": "ok"}]))
    with cli_server("--engine", "scripted", "--rules", str(rules), "--model", "vlm", "--max-connections", "8",
                    "--header-timeout", "1", "--body-timeout", "1") as (url, proc):
        port = int(url.rsplit(":", 1)[1])
        stop = threading.Event()
        tricklers = [socket.create_connection(("127.0.0.1", port), timeout=5) for _ in range(12)]

        def trickle() -> None:  # one header byte per socket every 0.2 s, never the blank line
            for s in tricklers:
                with contextlib.suppress(OSError):
                    s.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\n")
            while not stop.wait(0.2):
                for s in tricklers:
                    with contextlib.suppress(OSError):
                        s.sendall(b"X")

        t = threading.Thread(target=trickle, daemon=True)
        t.start()
        try:
            time.sleep(0.3)
            t0 = time.monotonic()
            assert _ask(url) == "ok"  # at the cap: the longest-waiting trickler made room
            assert time.monotonic() - t0 < 3
            time.sleep(1.5)  # past the header timeout
            for s in tricklers:
                s.settimeout(2)
            assert all(_closed_by_server(s) for s in tricklers)

            slow = socket.create_connection(("127.0.0.1", port), timeout=5)
            slow.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                         b"Content-Length: 1000\r\n\r\n{\"model\"")
            t1 = time.monotonic()
            answer = b""
            while chunk := slow.recv(65536):
                answer += chunk
            assert answer.startswith(b"HTTP/1.1 408"), answer[:200]
            assert time.monotonic() - t1 < 5
            slow.close()
            assert [_ask(url, f"again {i}") for i in range(3)] == ["ok"] * 3  # keeps serving
            assert proc.poll() is None
        finally:
            stop.set()
            t.join(5)
            for s in tricklers:
                s.close()
        os.killpg(proc.pid, signal.SIGTERM)  # a clean stop on SIGTERM, as the launcher stops it
        assert proc.wait(timeout=20) == 0


def test_more_tricklers_than_the_open_files_limit(tmp_path: Path) -> None:
    """As in the report (1,100 sockets under ``ulimit -n 1024``), scaled down: 200 trickling sockets
    against a server limited to 128 open files, with the default cap and header timeout."""
    import resource
    import subprocess
    import sys

    from loopback import free_port, wait_health

    rules = tmp_path / "rules.json"
    rules.write_text(json.dumps([{"match": "", "reply": "ok"}]))
    port = free_port()

    def low_limit() -> None:
        resource.setrlimit(resource.RLIMIT_NOFILE, (128, 128))

    log = (tmp_path / "serve.log").open("wb")
    proc = subprocess.Popen([sys.executable, "-m", "benchcheck", "serve", "--engine", "scripted", "--rules",
                             str(rules), "--model", "vlm", "--port", str(port)], stdout=log, stderr=subprocess.STDOUT,
                            preexec_fn=low_limit, start_new_session=True)
    url = f"http://127.0.0.1:{port}"
    tricklers: list[socket.socket] = []
    try:
        wait_health(url, proc, timeout_s=60)
        for _ in range(200):
            s = socket.create_connection(("127.0.0.1", port), timeout=5)
            s.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\n")
            tricklers.append(s)
        assert [_ask(url, f"q {i}") for i in range(5)] == ["ok"] * 5
        assert proc.poll() is None
    finally:
        for s in tricklers:
            s.close()
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=20)
        log.close()
    assert b"Too many open files" not in (tmp_path / "serve.log").read_bytes()


def test_at_the_cap_with_every_request_in_progress_new_ones_wait(tmp_path: Path) -> None:
    from concurrent.futures import ThreadPoolExecutor

    rules = tmp_path / "rules.json"
    rules.write_text(json.dumps([{"match": "slow", "delay_s": 1.0}, {"match": "", "reply": "ok"}]))
    with cli_server("--engine", "scripted", "--rules", str(rules), "--model", "vlm", "--max-connections", "2") as (
            url, _), ThreadPoolExecutor(4) as ex:
        answers = list(ex.map(lambda i: _ask(url, f"slow {i}" if i < 2 else f"fast {i}"), range(4)))
    assert answers == ["ok"] * 4
