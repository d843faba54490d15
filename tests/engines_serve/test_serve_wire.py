"""Wire format: request bodies, response parsing, error shapes, and server-side request parsing."""

from __future__ import annotations

import base64
import json
from pathlib import Path

import pytest

from benchcheck.engines.base import GenerateRequest, Generation, LetterScores, ScoreRequest
from benchcheck.engines.openai.client import normalize_endpoint
from benchcheck.engines.openai.wire import (
    WireError,
    error_body,
    error_message,
    generate_body,
    generate_payload,
    is_context_too_long,
    parse_generation,
    parse_score,
    score_body,
    score_payload,
)
from benchcheck.protocol import letter_logprobs
from benchcheck.serve.chat import RequestError, generate_completion, parse_chat, score_completion


def test_score_body_is_spec_section_3(tmp_path: Path) -> None:
    frame = tmp_path / "f.jpg"
    frame.write_bytes(b"\xff\xd8fake")
    body = score_body("Qwen/Qwen3-VL-8B-Instruct", ScoreRequest("r1", "Q?", (b"\xff\xd8x", frame)))
    assert body["model"] == "Qwen/Qwen3-VL-8B-Instruct"
    user, assistant = body["messages"]
    assert [p["type"] for p in user["content"]] == ["image_url", "image_url", "text"]
    assert user["content"][0]["image_url"]["url"] == "data:image/jpeg;base64," + base64.b64encode(b"\xff\xd8x").decode()
    assert user["content"][1]["image_url"]["url"].endswith(base64.b64encode(b"\xff\xd8fake").decode())
    assert user["content"][2] == {"type": "text", "text": "Q?"}
    assert assistant == {"role": "assistant", "content": "Answer:"}
    assert body["continue_final_message"] is True and body["add_generation_prompt"] is False
    assert (body["logprobs"], body["top_logprobs"], body["max_tokens"], body["temperature"]) == (True, 20, 1, 0.0)


def test_generate_body_system_and_prefix() -> None:
    plain = generate_body("m", GenerateRequest("g", "hi", max_tokens=7))
    assert plain["messages"] == [{"role": "user", "content": [{"type": "text", "text": "hi"}]}]
    assert plain["max_tokens"] == 7 and "continue_final_message" not in plain
    full = generate_body("m", GenerateRequest("g", "hi", system="be brief", assistant_prefix="Sure"))
    assert [m["role"] for m in full["messages"]] == ["system", "user", "assistant"]
    assert full["continue_final_message"] is True and full["add_generation_prompt"] is False


def test_parse_score_reads_first_token_top_list() -> None:
    d = {
        "model": "m",
        "choices": [{"logprobs": {"content": [{"token": "B", "logprob": -0.1, "bytes": [66], "top_logprobs": [
            {"token": "B", "logprob": -0.1, "bytes": [66]}, {"token": " A", "logprob": -2.5, "bytes": [32, 65]}]}]}}],
        "usage": {"prompt_tokens": 321},
    }
    s = parse_score(d, "r", 0.5)
    assert s.top == [{"token": "B", "logprob": -0.1}, {"token": " A", "logprob": -2.5}]
    assert (s.top1_token, s.prompt_tokens, s.model) == ("B", 321, "m")
    lp, missing, _ = letter_logprobs(s.top, 3)
    assert lp[:2] == [-2.5, -0.1] and missing == ["C"]
    with pytest.raises(WireError):
        parse_score({"choices": [{"logprobs": None}]}, "r", 0.0)
    with pytest.raises(WireError):
        parse_generation({"choices": []}, "r", 0.0)


@pytest.mark.parametrize(
    "text",
    [
        json.dumps(error_body(400, "maximum context length is 10")),
        json.dumps({"object": "error", "message": "maximum context length is 10", "type": "BadRequestError",
                    "param": None, "code": 400}),
    ],
)
def test_error_message_reads_both_vllm_shapes(text: str) -> None:
    assert error_message(text) == "maximum context length is 10"
    assert is_context_too_long(400, text)
    assert not is_context_too_long(500, text)


def test_error_message_of_plain_text_and_unauthorized() -> None:
    assert error_message('{"error": "Unauthorized"}') == "Unauthorized"
    assert error_message("  oops \n") == "oops"


def test_normalize_endpoint() -> None:
    for u in ("http://h:8001", "http://h:8001/", "http://h:8001/v1", "http://h:8001/v1/"):
        assert normalize_endpoint(u) == "http://h:8001/v1"
    with pytest.raises(ValueError, match="http"):
        normalize_endpoint("h:8001")


@pytest.mark.parametrize(("url", "says"), [
    ("http://127.0.0.1:abc/v1", "not a valid URL"),
    ("http://127.0.0.1:99999/v1", "not a valid URL"),
    ("http://h:0", "not a valid URL"),
    ("http://h x:8001", "not a valid URL"),
    ("http://[::1/v1", "not a valid URL"),
    ("http://h:8001/v1?x=1", "query or fragment"),
    ("http://h:8001/v1#top", "query or fragment"),
])
def test_normalize_endpoint_refuses_a_url_the_client_cannot_use(url: str, says: str) -> None:
    """A port that is not a number or out of range, a space in the host, an unclosed bracket, a
    query or fragment: refused up front naming the endpoint, not a failure of every request (or a
    traceback from the sweep's context probe, which read the port first)."""
    with pytest.raises(ValueError, match=says) as e:
        normalize_endpoint(url)
    assert str(e.value).startswith("endpoint ")


ASSISTANT = {"role": "assistant", "content": "Answer:"}


def _user(*parts: dict[str, object]) -> list[dict[str, object]]:
    return [{"role": "user", "content": list(parts)}, ASSISTANT]


def _img(url: str) -> dict[str, object]:
    return {"type": "image_url", "image_url": {"url": url}}


TEXT_Q = {"type": "text", "text": "Q"}


def _chat(**kw: object) -> dict[str, object]:
    body: dict[str, object] = {
        "model": "m",
        "messages": [{"role": "user", "content": "Q"}, {"role": "assistant", "content": "Answer:"}],
        "max_tokens": 1, "logprobs": True, "top_logprobs": 20,
        "continue_final_message": True, "add_generation_prompt": False,
    }
    body.update(kw)
    return body


def test_parse_chat_score_and_generate() -> None:
    img = base64.b64encode(b"jpegbytes").decode()
    content = [{"type": "image_url", "image_url": {"url": f"data:image/jpeg;base64,{img}"}},
               {"type": "text", "text": "Q"}]
    call = parse_chat(_chat(messages=[{"role": "user", "content": content}, ASSISTANT]), "id")
    assert call.score == ScoreRequest("id", "Q", (b"jpegbytes",), "Answer:", 20)
    gen = parse_chat({"messages": [{"role": "system", "content": "S"}, {"role": "user", "content": "Hi"}]}, "g")
    assert gen.generate == GenerateRequest("g", "Hi", (), 512, None, "S")
    assert gen.default_max_tokens  # the server replaces 512 by the rest of the context
    given = parse_chat({"messages": [{"role": "user", "content": "Hi"}], "max_tokens": 512}, "g")
    assert given.generate is not None and given.generate.max_tokens == 512 and not given.default_max_tokens
    few = parse_chat(_chat(top_logprobs=None), "f")  # logprobs without top_logprobs: the chosen token only
    assert few.score is not None and few.score.top_logprobs == 1 and few.top_logprobs == 0


@pytest.mark.parametrize(
    ("change", "needle"),
    [
        ({"top_logprobs": 21}, "greater than max allowed: 20"),
        ({"logprobs": False}, "`logprobs` must be set to true"),
        ({"add_generation_prompt": True}, "Cannot set both"),
        ({"stream": True}, "stream"),
        ({"temperature": 0.7}, "greedily"),
        ({"max_tokens": 5}, "max_tokens=1"),
        ({"max_tokens": None}, "max_tokens=1"),  # not silently a 1-token completion
        ({"model": ["m"]}, "'model'"),
        ({"n": 2}, "'n'"),
        ({"messages": [{"role": "user", "content": "Q"}], "add_generation_prompt": True,
          "continue_final_message": False}, "first-token scoring"),
        ({"messages": _user(TEXT_Q, _img("data:image/jpeg;base64,AA=="))}, "before the text"),
        ({"messages": _user(_img("http://x/a.jpg"), TEXT_Q)}, "no fetching"),
        ({"messages": _user(_img("data:image/jpeg;base64,@@"), TEXT_Q)}, "invalid base64"),
        ({"messages": [{"role": "user", "content": "a"}, {"role": "assistant", "content": "b"},
                       {"role": "user", "content": "c"}, ASSISTANT]}, "[system?, user, assistant]"),
    ],
)
def test_parse_chat_refuses_what_it_cannot_render(change: dict[str, object], needle: str) -> None:
    with pytest.raises(RequestError) as e:
        parse_chat(_chat(**change), "x")
    assert needle in str(e.value) and e.value.status == 400


def test_completion_bodies_have_vllm_shape() -> None:
    res = LetterScores("r", [{"token": "B", "logprob": -0.1}, {"token": "A", "logprob": float("-inf")}], "B", 42, 0.01)
    body = score_completion(res, 1, "served", "fp")
    first = body["choices"][0]["logprobs"]["content"][0]
    assert first["token"] == "B" and first["bytes"] == [66] and len(first["top_logprobs"]) == 1
    usage = {"prompt_tokens": 42, "completion_tokens": 1, "total_tokens": 43, "prompt_tokens_details": None}
    assert body["usage"] == usage
    full = score_completion(res, 20, "served", "fp")["choices"][0]["logprobs"]["content"][0]["top_logprobs"]
    assert full[1]["logprob"] == -9999.0  # vLLM's stand-in for -inf
    gen = generate_completion(Generation("g", "hello", 3, 4, 0.1), 4, "served", "fp")
    assert gen["choices"][0]["message"]["content"] == "hello" and gen["choices"][0]["finish_reason"] == "length"
    assert parse_generation(gen, "g", 0.0).text == "hello"


def test_payload_bytes_equal_the_json_of_the_body(tmp_path: Path) -> None:
    frame = tmp_path / "f.jpg"
    frame.write_bytes(b"\xff\xd8 on disk")
    images = (b"\xff\xd8\x00\x01", frame)
    tricky = 'say "content":[ here \u00e9'  # quotes in text are escaped, so they cannot confuse the splice
    req = ScoreRequest("r", tricky, images)
    assert json.loads(score_payload("m", req)) == score_body("m", req)
    compact = json.dumps(score_body("m", req), separators=(",", ":"), ensure_ascii=False)
    assert score_payload("m", req) == compact.encode()
    gen = GenerateRequest("g", tricky, images, system='sys "content":[', assistant_prefix="Sure")
    assert json.loads(generate_payload("m", gen)) == generate_body("m", gen)
