"""Outsider audit of ``benchcheck serve`` (branch audit-qa): requests a client can send that the
server must refuse as vLLM would, with a vLLM-shaped 4xx, and keep serving."""

from __future__ import annotations

import json
import socket
import urllib.error
import urllib.request
from pathlib import Path

from serve_fixtures import cli_server, post_chat


def _raw(url: str, request: bytes) -> tuple[int, bytes]:
    """Send ``request`` as it is on a fresh connection; the status and the body of the answer."""
    host, port = url.removeprefix("http://").split(":")
    with socket.create_connection((host, int(port)), timeout=30) as s:
        s.sendall(request)
        data = b""
        while b"\r\n\r\n" not in data or len(data.partition(b"\r\n\r\n")[2]) < _length(data):
            chunk = s.recv(65536)
            if not chunk:
                break
            data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    return int(head.split()[1]), body


def _length(data: bytes) -> int:
    for line in data.partition(b"\r\n\r\n")[0].split(b"\r\n")[1:]:
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            return int(value)
    return 1 << 30


def test_a_body_that_cannot_be_decoded_is_a_400_not_a_500(rules_file: Path) -> None:
    with cli_server("--engine", "scripted", "--rules", str(rules_file), "--model", "judge") as (url, _):
        body = b'{"messages": [{"role": "user", "content": "capital of France"}]}'
        request = (b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                   b"Content-Encoding: gzip\r\nContent-Length: " + str(len(body)).encode() + b"\r\n\r\n" + body)
        status, answer = _raw(url, request)
        assert status == 400, answer
        error = json.loads(answer)["error"]
        assert error["type"] == "BadRequestError" and error["code"] == 400
        assert error["message"] == "the request body cannot be read: Can not decode content-encoding: gzip"
        # The server goes on answering.
        req = urllib.request.Request(url + "/v1/chat/completions", body, {"Content-Type": "application/json"})
        with urllib.request.urlopen(req, timeout=30) as r:
            assert json.loads(r.read())["choices"][0]["message"]["content"] == "Paris"


def _chat(url: str, extra: dict[str, object]) -> tuple[int, dict[str, object]]:
    return post_chat(url, {"messages": [{"role": "user", "content": "capital of France"}], "max_tokens": 5, **extra})


def test_fields_that_would_change_the_answer_are_refused_not_ignored(rules_file: Path) -> None:
    """vLLM would cut "Paris" at the stop string "r" (or penalise, or call a tool); answering "Paris"
    as if the field were not there is a different answer, so it is a 400 naming the field."""
    with cli_server("--engine", "scripted", "--rules", str(rules_file), "--model", "judge") as (url, _):
        for extra in ({"stop": ["r"]}, {"stop": "r"}, {"stop_token_ids": [7]}, {"presence_penalty": 0.5},
                      {"repetition_penalty": 1.2}, {"logit_bias": {"5": 10}}, {"min_tokens": 3},
                      {"ignore_eos": True}, {"tools": [{"type": "function", "function": {"name": "f"}}]},
                      {"guided_choice": ["Rome"]}):
            status, body = _chat(url, extra)
            (key,) = extra
            assert status == 400, (extra, body)
            error = body["error"]
            assert isinstance(error, dict) and error["type"] == "BadRequestError"
            assert error["message"].startswith(f"'{key}' is not supported by benchcheck serve"), error
        # Neutral values and fields without effect on greedy decoding are fine.
        for extra in ({"stop": []}, {"stop": None}, {"presence_penalty": 0}, {"frequency_penalty": 0.0},
                      {"repetition_penalty": 1.0}, {"logit_bias": {}}, {"seed": 3, "top_p": 0.5, "top_k": 5},
                      {"tool_choice": "none"}, {"response_format": {"type": "json_object"}}):
            status, body = _chat(url, extra)
            assert status == 200, (extra, body)


def test_a_path_or_method_no_route_takes_answers_json_as_vllm(rules_file: Path) -> None:
    """aiohttp answered ``404: Not Found`` as plain text; vLLM's FastAPI app answers JSON."""
    with cli_server("--engine", "scripted", "--rules", str(rules_file), "--model", "judge") as (url, _):
        for method, path, status, detail in (("POST", "/v1/completions", 404, "Not Found"),
                                             ("GET", "/nope", 404, "Not Found"),
                                             ("GET", "/v1/chat/completions", 405, "Method Not Allowed")):
            req = urllib.request.Request(url + path, b"{}" if method == "POST" else None, method=method)
            try:
                urllib.request.urlopen(req, timeout=30)
                raise AssertionError(f"{method} {path} answered 2xx")
            except urllib.error.HTTPError as e:
                assert e.code == status, (path, e.code)
                assert e.headers.get_content_type() == "application/json"
                assert json.loads(e.read()) == {"detail": detail}
