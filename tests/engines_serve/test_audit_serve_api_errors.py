"""Requests a vLLM client may send that ``benchcheck serve`` must answer with a vLLM-shaped JSON
error (never a 500, a plain-text page or a traceback in its log): a real server on loopback."""

from __future__ import annotations

import json
import socket
import time
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
from serve_fixtures import cli_server

KEY = "s3cret-key"


@pytest.fixture(scope="module")
def keyed_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Path]]:
    """A scripted server with an API key and its log file."""
    d = tmp_path_factory.mktemp("keyed")
    rules = d / "rules.json"
    rules.write_text(json.dumps([{"match": "", "reply": "ok"}]))
    log = d / "server.log"
    with cli_server("--engine", "scripted", "--rules", str(rules), "--model", "judge", "--api-key", KEY,
                    log=log) as (url, _):
        yield url, log


def raw_post(url: str, headers: bytes, body: bytes = b"") -> tuple[int, bytes, bytes]:
    """POST /v1/chat/completions with these raw header lines: (status, response headers, body)."""
    parts = urlsplit(url)
    assert parts.hostname and parts.port
    with socket.create_connection((parts.hostname, parts.port), timeout=30) as s:
        s.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nConnection: close\r\n" + headers
                  + b"Content-Length: %d\r\n\r\n" % len(body) + body)
        data = b""
        while chunk := s.recv(65536):
            data += chunk
    head, _, rest = data.partition(b"\r\n\r\n")
    return int(head.split(b" ", 2)[1]), head, rest


def chat_body() -> bytes:
    body: dict[str, Any] = {"model": "judge", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 2}
    return json.dumps(body).encode()


def test_an_authorization_header_that_is_not_utf8_is_a_401_not_a_500(keyed_server: tuple[str, Path]) -> None:
    url, log = keyed_server
    status, _, body = raw_post(url, b"Authorization: Bearer \xff\xfe\r\nContent-Type: application/json\r\n",
                               chat_body())
    assert (status, json.loads(body)) == (401, {"error": "Unauthorized"})
    # The right key still passes, and nothing reached the log as a traceback.
    status, _, body = raw_post(url, b"Authorization: Bearer " + KEY.encode() + b"\r\n", chat_body())
    assert status == 200, body
    assert "Traceback" not in log.read_text()


@pytest.mark.parametrize("part", [{"type": "text", "text": None}, {"type": "text"}, {"type": "text", "text": 5}])
@pytest.mark.parametrize("role", ["user", "system", "assistant"])
def test_a_text_part_without_a_string_is_refused_not_rendered_as_none(keyed_server: tuple[str, Path],
                                                                      part: dict[str, Any], role: str) -> None:
    # The scripted rule echoes nothing: a prompt of "None" would be answered "ok" (200).
    url, _ = keyed_server
    messages: list[dict[str, Any]] = [{"role": "user", "content": [part] if role == "user" else "hi"}]
    extra: dict[str, Any] = {}
    if role == "system":
        messages.insert(0, {"role": "system", "content": [part]})
    if role == "assistant":
        messages.append({"role": "assistant", "content": [part]})
        extra = {"continue_final_message": True, "add_generation_prompt": False}
    body = json.dumps({"model": "judge", "messages": messages, "max_tokens": 2, **extra}).encode()
    status, _, answer = raw_post(url, b"Authorization: Bearer " + KEY.encode() + b"\r\n", body)
    err = json.loads(answer)["error"]
    assert (status, err["type"], err["code"]) == (400, "BadRequestError", 400)
    assert "'text' must be a string" in err["message"]


def test_a_body_over_the_limit_is_a_json_413(keyed_server: tuple[str, Path]) -> None:
    # gzip of spaces that inflate past the server's limit: ~0.5 MB on the wire, the same answer
    # as a body that large sent as is (aiohttp counts the decompressed bytes).
    from benchcheck.serve.app import MAX_BODY_BYTES

    z = zlib.compressobj(1, zlib.DEFLATED, 31)  # 31: gzip framing
    chunk = b" " * (1 << 20)
    body = b"".join(z.compress(chunk) for _ in range(MAX_BODY_BYTES // len(chunk) + 1)) + z.flush()
    url, log = keyed_server
    status, head, answer = raw_post(url, b"Authorization: Bearer " + KEY.encode() + b"\r\nContent-Encoding: gzip\r\n"
                                    b"Content-Type: application/json\r\n", body)
    assert status == 413
    assert b"application/json" in head.lower()
    err = json.loads(answer)["error"]
    assert (err["code"], err["type"]) == (413, "BadRequestError")
    assert str(MAX_BODY_BYTES) in err["message"]
    assert "Traceback" not in log.read_text()


def test_a_body_declared_over_the_limit_is_a_413_before_it_is_read(keyed_server: tuple[str, Path]) -> None:
    """A Content-Length over the limit and a few bytes of body: the 413 came only after the body
    timeout (aiohttp counts the bytes as they arrive), the connection held for a body it refuses."""
    from benchcheck.serve.app import MAX_BODY_BYTES
    from benchcheck.serve.guard import BODY_TIMEOUT_S

    url, log = keyed_server
    parts = urlsplit(url)
    assert parts.hostname and parts.port
    t0 = time.monotonic()
    with socket.create_connection((parts.hostname, parts.port), timeout=BODY_TIMEOUT_S / 10) as s:
        s.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " + KEY.encode()
                  + b"\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n" % (MAX_BODY_BYTES + 1)
                  + b'{"model": "judge", "messages": [')
        data = b""
        while chunk := s.recv(65536):  # the server closes the connection after its answer
            data += chunk
    assert time.monotonic() - t0 < BODY_TIMEOUT_S / 10
    head, _, answer = data.partition(b"\r\n\r\n")
    assert head.split(b" ", 2)[1] == b"413" and b"application/json" in head.lower()
    assert len(answer.splitlines()) == 1
    err = json.loads(answer)["error"]
    assert (err["code"], err["type"]) == (413, "BadRequestError")
    assert str(MAX_BODY_BYTES) in err["message"]
    assert "Traceback" not in log.read_text()
