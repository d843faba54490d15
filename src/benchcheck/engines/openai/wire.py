"""The OpenAI / vLLM 0.11 chat-completions wire format, shared by the client and the server.

Client side: the exact request bodies of docs/PROTOCOL.md, "Requests" (``score_body``) and of greedy generation
(``generate_body``), their bytes as sent (``score_payload`` / ``generate_payload``, which splice
the frames' base64 in rather than JSON-encode it), and the parsers of their responses. Server
side: the error body and the context-too-long rule. Both sides import this module so they cannot
drift apart.

vLLM 0.11 shapes (the original runs' pin) matched here:

- score answer: ``choices[0].logprobs.content[0] = {"token", "logprob", "bytes", "top_logprobs":
  [{"token", "logprob", "bytes"}, ...]}`` and ``usage.prompt_tokens``;
- errors: ``{"error": {"message", "type", "param", "code"}}`` (vLLM >= 0.10.1; older servers sent
  the flat ``{"object": "error", "message", "type", "param", "code"}``, which ``error_message``
  also reads).
"""

from __future__ import annotations

import dataclasses
import json
import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pybase64

from benchcheck.engines.base import GenerateRequest, Generation, ImageRef, LetterScores, ScoreRequest

# PROTOCOL.md, "Requests": a 400 whose text holds one of these is a context-too-long failure.
CONTEXT_TOO_LONG_MARKERS = ("maximum", "longer than", "context length")

JSONDict = dict[str, Any]


class WireError(ValueError):
    """A response that does not have the shape of an OpenAI chat completion."""


def image_data_url(image: ImageRef) -> str:
    """A frame as the data URL the protocol sends (``data:image/jpeg;base64,...``)."""
    data = image.read_bytes() if isinstance(image, Path) else image
    return "data:image/jpeg;base64," + pybase64.b64encode(data).decode("ascii")


def user_content(prompt: str, images: tuple[ImageRef, ...], video_url: str | None = None) -> list[JSONDict]:
    """The user turn: image parts first, then the video part if any, then the text part (as the
    original runs' ``logprob_request``)."""
    parts: list[JSONDict] = [{"type": "image_url", "image_url": {"url": image_data_url(i)}} for i in images]
    if video_url is not None:
        parts.append({"type": "video_url", "video_url": {"url": video_url}})
    parts.append({"type": "text", "text": prompt})
    return parts


def score_body(model: str, req: ScoreRequest) -> JSONDict:
    """The protocol's request (PROTOCOL.md, "Requests"): prefilled assistant turn continued, first
    token's top log-probs."""
    return {
        "model": model,
        "messages": [
            {"role": "user", "content": user_content(req.prompt, req.images)},
            {"role": "assistant", "content": req.assistant_prefix},
        ],
        "temperature": 0.0,
        "max_tokens": 1,
        "logprobs": True,
        "top_logprobs": req.top_logprobs,
        "continue_final_message": True,
        "add_generation_prompt": False,
    }


def generate_body(model: str, req: GenerateRequest) -> JSONDict:
    """Greedy generation; a prefilled assistant turn is continued, otherwise a generation prompt."""
    messages: list[JSONDict] = []
    if req.system is not None:
        messages.append({"role": "system", "content": req.system})
    messages.append({"role": "user", "content": user_content(req.prompt, req.images, req.video_url)})
    body: JSONDict = {"model": model, "messages": messages, "temperature": 0.0, "max_tokens": req.max_tokens}
    if req.response_format is not None:
        body["response_format"] = {"type": req.response_format}
    if req.assistant_prefix is not None:
        messages.append({"role": "assistant", "content": req.assistant_prefix})
        body["continue_final_message"] = True
        body["add_generation_prompt"] = False
    return body


_CONTENT_LIST = b'"content":['
_IMAGE_HEAD = b'{"type":"image_url","image_url":{"url":"data:image/jpeg;base64,'
_IMAGE_TAIL = b'"}},'


def encode_body(body: JSONDict, images: tuple[ImageRef, ...]) -> bytes:
    """Compact JSON bytes of ``body`` (built without images) with ``images`` put in front of the
    user turn's parts: the bytes of ``json.dumps`` of the same body built with the images.

    Faster than running the JSON encoder over megabytes of base64 (they are only copied): the
    user turn's part list is the first ``"content":[`` of the JSON, since string contents have
    their quotes escaped and the user turn is the first message with a part list; base64 needs
    no JSON escaping.
    """
    raw = json.dumps(body, separators=(",", ":"), ensure_ascii=False).encode()
    if not images:
        return raw
    head, sep, tail = raw.partition(_CONTENT_LIST)
    if not sep:
        raise ValueError("encode_body: the body has no user turn with a part list")
    chunks = [head, sep]
    for image in images:
        data = image.read_bytes() if isinstance(image, Path) else image
        chunks += [_IMAGE_HEAD, pybase64.b64encode(data), _IMAGE_TAIL]
    chunks.append(tail)
    return b"".join(chunks)


def score_payload(model: str, req: ScoreRequest) -> bytes:
    """``score_body`` as the bytes sent."""
    return encode_body(score_body(model, ScoreRequest(req.request_id, req.prompt, (), req.assistant_prefix,
                                                      req.top_logprobs)), req.images)


def exact_payload(model: str, req: ScoreRequest) -> bytes:
    """``score_body`` plus vLLM's ``logprob_token_ids`` (newer vLLM; ``benchcheck serve``): the
    answer's log-prob list then holds the sampled token and every requested id's exact log-prob."""
    body = score_body(model, ScoreRequest(req.request_id, req.prompt, (), req.assistant_prefix, req.top_logprobs))
    body["logprob_token_ids"] = list(req.logprob_token_ids)
    return encode_body(body, req.images)


def generate_payload(model: str, req: GenerateRequest) -> bytes:
    """``generate_body`` as the bytes sent."""
    return encode_body(generate_body(model, dataclasses.replace(req, images=())), req.images)


def _first_choice(d: Mapping[str, Any]) -> Mapping[str, Any]:
    choices = d.get("choices")
    if not isinstance(choices, list) or not choices or not isinstance(choices[0], Mapping):
        raise WireError("response has no choices")
    return choices[0]


def _usage(d: Mapping[str, Any], key: str) -> int:
    usage = d.get("usage")
    value = usage.get(key) if isinstance(usage, Mapping) else None
    if isinstance(value, bool) or not isinstance(value, int | float):
        return 0  # absent (or not a count): the accounting is unknown, the answer still stands
    if not math.isfinite(value):
        raise WireError(f"usage.{key} is not a finite number: {value!r:.40}")
    return int(value)


def _logprob(entry: Mapping[str, Any]) -> float:
    """An entry's log-prob as a float; a missing, null, non-numeric or NaN one is a ``WireError``."""
    value = entry.get("logprob")
    if isinstance(value, bool) or not isinstance(value, int | float) or math.isnan(value):
        raise WireError(f"top_logprobs entry {entry.get('token')!r:.40} has no numeric logprob: {value!r:.40}")
    return float(value)


def parse_score(d: Mapping[str, Any], request_id: str, latency_s: float) -> LetterScores:
    """The first generated position's top log-probs, as ``{"token", "logprob"}`` dicts."""
    choice = _first_choice(d)
    logprobs = choice.get("logprobs")
    content = logprobs.get("content") if isinstance(logprobs, Mapping) else None
    if not isinstance(content, list) or not content or not isinstance(content[0], Mapping):
        raise WireError("response has no logprobs.content (was logprobs=true honoured?)")
    first = content[0]
    raw_top = first.get("top_logprobs")
    if not isinstance(raw_top, list):
        raise WireError("response has no top_logprobs for the first token")
    top: list[dict[str, float | str]] = []
    for e in raw_top:
        if not isinstance(e, Mapping) or not isinstance(e.get("token"), str):
            raise WireError(f"malformed top_logprobs entry {e!r:.80}")
        top.append({"token": e["token"], "logprob": _logprob(e)})
    return LetterScores(
        request_id=request_id,
        top=top,
        top1_token=str(first.get("token", "")),
        prompt_tokens=_usage(d, "prompt_tokens"),
        latency_s=round(latency_s, 4),
        model=str(d.get("model", "")),
    )


def parse_generation(d: Mapping[str, Any], request_id: str, latency_s: float) -> Generation:
    """The generated text and token accounting of a chat completion."""
    message = _first_choice(d).get("message")
    text = message.get("content") if isinstance(message, Mapping) else None
    if not isinstance(text, str):
        raise WireError("response has no choices[0].message.content")
    return Generation(
        request_id=request_id,
        text=text,
        prompt_tokens=_usage(d, "prompt_tokens"),
        completion_tokens=_usage(d, "completion_tokens"),
        latency_s=round(latency_s, 4),
        model=str(d.get("model", "")),
    )


def error_body(status: int, message: str, type_: str | None = None) -> JSONDict:
    """vLLM 0.11's error body."""
    kind = type_ or _ERROR_TYPES.get(status, "InternalServerError" if status >= 500 else "BadRequestError")
    return {"error": {"message": message, "type": kind, "param": None, "code": status}}


_ERROR_TYPES = {400: "BadRequestError", 404: "NotFoundError", 429: "RateLimitError", 500: "InternalServerError"}


def error_message(text: str) -> str:
    """The message of an error body in either vLLM shape; the raw text (shortened) otherwise."""
    try:
        d = json.loads(text)
    except ValueError:
        return text.strip()[:300]
    if isinstance(d, Mapping):
        inner = d.get("error")
        if isinstance(inner, Mapping) and isinstance(inner.get("message"), str):
            return str(inner["message"])
        if isinstance(d.get("message"), str):
            return str(d["message"])
        if isinstance(inner, str):
            return inner
    return text.strip()[:300]


def is_context_too_long(status: int, text: str) -> bool:
    """PROTOCOL.md, "Requests": a 400 whose text mentions the context limit."""
    return status == 400 and any(m in text for m in CONTEXT_TOO_LONG_MARKERS)
