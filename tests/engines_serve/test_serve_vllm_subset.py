"""``benchcheck serve`` against vLLM's chat request schema (branch serve-vllm): fields vLLM takes
or refuses, checked on a real scripted server on loopback."""

from __future__ import annotations

import base64
import io
import json
import socket
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from PIL import Image
from serve_fixtures import cli_server, post_chat


def _png() -> str:
    buf = io.BytesIO()
    Image.new("RGB", (8, 8), "red").save(buf, "PNG")
    return "data:image/png;base64," + base64.b64encode(buf.getvalue()).decode()


IMAGE = _png()


@pytest.fixture(scope="module")
def server(rules_file: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Path]]:
    """One scripted server for the module (no rule here counts its uses); (URL, its log file)."""
    log = tmp_path_factory.mktemp("serve") / "server.log"
    with cli_server("--engine", "scripted", "--rules", str(rules_file), "--model", "judge", log=log) as (url, _):
        yield url, log


def _generate(url: str, **extra: Any) -> tuple[int, dict[str, Any]]:
    return post_chat(url, {"messages": [{"role": "user", "content": "capital of France"}], "max_tokens": 5, **extra})


def _score(url: str, logprobs: object) -> tuple[int, dict[str, Any]]:
    return post_chat(url, {
        "messages": [{"role": "user", "content": "Question: sky?"}, {"role": "assistant", "content": "Answer:"}],
        "max_tokens": 1, "logprobs": logprobs, "top_logprobs": 2,
        "continue_final_message": True, "add_generation_prompt": False,
    })


def _bad_request(status: int, answer: dict[str, Any]) -> str:
    assert status == 400, answer
    error = answer["error"]
    assert error["type"] == "BadRequestError" and error["code"] == 400
    return str(error["message"])


def test_stream_options_without_stream_is_refused_as_vllm_does(server: tuple[str, Path]) -> None:
    url, _ = server
    for extra in ({}, {"stream": False}):
        message = _bad_request(*_generate(url, stream_options={"include_usage": True}, **extra))
        assert message == "Stream options can only be defined when `stream=True`."
    # vLLM's check is on truthiness: a null or empty stream_options passes.
    for empty in (None, {}):
        status, answer = _generate(url, stream_options=empty)
        assert status == 200 and answer["choices"][0]["message"]["content"] == "Paris"


def test_bool_fields_take_what_vllms_lax_pydantic_bool_takes(server: tuple[str, Path]) -> None:
    url, _ = server
    for yes in (True, 1, 1.0, "true", "yes", "On"):
        status, answer = _score(url, yes)
        assert status == 200, (yes, answer)
        assert [e["token"] for e in answer["choices"][0]["logprobs"]["content"][0]["top_logprobs"]] == ["A", "B"]
    for no in (0, "false", "no"):
        status, answer = _generate(url, logprobs=no)
        assert status == 200 and answer["choices"][0]["logprobs"] is None, (no, answer)
    for bad in (2, -1, 0.5, "maybe", " yes", [], {}):
        message = _bad_request(*_score(url, bad))
        assert message.startswith("'logprobs': Input should be a valid boolean"), (bad, message)
    # The same rule for every bool field: "stream": "false" is not streaming.
    status, answer = _generate(url, stream="false")
    assert status == 200 and answer["choices"][0]["message"]["content"] == "Paris"
    assert "'stream' is not supported" in _bad_request(*_generate(url, stream=1))


def test_an_image_url_part_must_be_an_object_with_a_url(server: tuple[str, Path]) -> None:
    url, _ = server
    for spec in (IMAGE, {"uri": IMAGE}, {"url": 5}, None):
        content = [{"type": "image_url", "image_url": spec}, {"type": "text", "text": "capital of France"}]
        status, answer = post_chat(url, {"messages": [{"role": "user", "content": content}], "max_tokens": 5})
        message = _bad_request(status, answer)
        assert message.startswith("user message: image part 0: 'image_url' must be an object"), (spec, message)
    content = [{"type": "image_url", "image_url": {"url": IMAGE}}, {"type": "text", "text": "capital of France"}]
    status, answer = post_chat(url, {"messages": [{"role": "user", "content": content}], "max_tokens": 5})
    assert status == 200 and answer["choices"][0]["message"]["content"] == "Paris"


def test_the_developer_role_is_refused_not_rendered_as_system(server: tuple[str, Path]) -> None:
    """vLLM gives the chat template role "developer" as it is; the tiny model's template renders
    "<|im_start|>developer", so answering it as a system turn would be a different prompt."""
    url, _ = server
    messages = [{"role": "developer", "content": "Be brief."}, {"role": "user", "content": "capital of France"}]
    message = _bad_request(*post_chat(url, {"messages": messages, "max_tokens": 5}))
    assert message.startswith("messages[0]: role 'developer' is not supported"), message
    assert "'system'" in message
    messages[0]["role"] = "system"
    status, answer = post_chat(url, {"messages": messages, "max_tokens": 5})
    assert status == 200 and answer["choices"][0]["message"]["content"] == "Paris"


def test_a_body_that_is_not_the_gzip_it_claims_leaves_no_traceback(server: tuple[str, Path]) -> None:
    url, log = server
    host, port = url.removeprefix("http://").split(":")
    body = b'{"messages": [{"role": "user", "content": "capital of France"}]}'
    with socket.create_connection((host, int(port)), timeout=30) as s:
        s.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                  b"Content-Encoding: gzip\r\nContent-Length: " + str(len(body)).encode() + b"\r\n\r\n" + body)
        data = b""
        while chunk := s.recv(65536):  # the server closes the connection once it is done with it
            data += chunk
    head, _, answer = data.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 400 ")
    assert json.loads(answer)["error"]["message"].startswith("the request body cannot be read")
    status, ok = _generate(url)
    assert status == 200 and ok["choices"][0]["message"]["content"] == "Paris"
    text = log.read_text()
    assert "Traceback" not in text and "Unhandled exception" not in text, text
