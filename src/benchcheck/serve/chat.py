"""Chat-completion requests in, engine requests out, and the vLLM 0.11-shaped answers back.

Pure functions (no I/O): ``parse_chat`` validates a ``/v1/chat/completions`` body the way vLLM
does and turns it into the engine's ``ScoreRequest`` (first-token log-probs) or
``GenerateRequest`` (greedy text); ``score_completion`` / ``generate_completion`` build the
response bodies. Shapes the engine interface cannot represent are refused with a 400 naming what
is wrong, never silently rendered differently. A ``video_url`` part is the documented exception
(docs/serve.md, "Videos"): the engines take frames, so its clip reaches them as images
(``serve.media``), not as vLLM's video input.
"""

from __future__ import annotations

import binascii
import time
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any
from urllib.parse import urlsplit
from urllib.request import url2pathname

import pybase64

from benchcheck.engines.base import GenerateRequest, Generation, LetterScores, ScoreRequest
from benchcheck.engines.openai.wire import JSONDict

MAX_TOP_LOGPROBS = 20  # vLLM's default --max-logprobs, which the launcher sets (PROTOCOL.md, "Launcher")
# When a generation request gives no max_tokens, vLLM allows the rest of the context
# (max_model_len - prompt tokens): the server does the same (``serve.fill_default_max_tokens``).
# This is only the fallback for an engine whose prompt length the server cannot count.
DEFAULT_MAX_TOKENS = 512
_LOGPROB_FLOOR = -9999.0  # vLLM writes -inf log-probs as this (JSON has no infinities)
MAX_LOGPROB_TOKEN_IDS = 4096  # a bound on one request's explicit ids (every letter variant is ~100)


class RequestError(ValueError):
    """A request the server refuses; ``status`` and ``type_`` go into the vLLM-shaped error body."""

    def __init__(self, message: str, status: int = 400, type_: str = "BadRequestError") -> None:
        super().__init__(message)
        self.status = status
        self.type_ = type_


@dataclass(frozen=True, slots=True)
class VideoPart:
    """A user turn's ``video_url`` part, checked but not read: the clip's bytes (a data URL) or the
    path a ``file://`` URL names. ``serve.media`` reads and decodes it off the event loop, where
    the server's options (the allowed folder, the frame count) are known."""

    index: int  # the part's index in the user turn, for error messages
    data: bytes | None = None
    path: str | None = None


@dataclass(frozen=True, slots=True)
class ChatCall:
    """A parsed request: exactly one of ``score`` / ``generate`` is set."""

    score: ScoreRequest | None
    generate: GenerateRequest | None
    top_logprobs: int  # what the caller asked for (0 = the chosen token only)
    # No max_tokens was given: ``generate.max_tokens`` is a placeholder for the rest of the context.
    default_max_tokens: bool = False
    # A video part still to decode: its frames become the request's images (``with_frames``).
    video: VideoPart | None = None

    def with_frames(self, frames: tuple[bytes, ...]) -> ChatCall:
        """The call with a video's frames as its images, in order: the engines take frames."""
        score = replace(self.score, images=frames) if self.score is not None else None
        generate = replace(self.generate, images=frames) if self.generate is not None else None
        return replace(self, score=score, generate=generate, video=None)


def _part_text(part: Mapping[str, Any], where: str) -> str:
    """A text part's ``text``, which must be a string (as in vLLM's request schema): a missing or
    null one rendered as "" or "None" would be a different prompt from the one the client sent."""
    text = part.get("text")
    if not isinstance(text, str):
        raise RequestError(f"{where}: a text part's 'text' must be a string (got {type(text).__name__})")
    return text


def _text_of(content: object, where: str) -> str:
    """A system or assistant message's text (a string or text parts)."""
    if isinstance(content, str):
        return content
    if isinstance(content, list) and all(isinstance(p, Mapping) and p.get("type") == "text" for p in content):
        return "".join(_part_text(p, where) for p in content)
    raise RequestError(f"{where}: content must be a string or text parts")


def _part_url(part: Mapping[str, Any], key: str, kind: str, i: int, example: str) -> str:
    """The ``url`` of an ``image_url`` / ``video_url`` part: vLLM validates such a part against
    OpenAI's schema, ``{"url": "..."}``, nothing else."""
    spec = part.get(key)
    if not isinstance(spec, Mapping) or not isinstance(spec.get("url"), str):
        raise RequestError(f"user message: {kind} part {i}: '{key}' must be an object "
                           f"{{\"url\": \"{example}\"}} (got {type(spec).__name__})")
    return str(spec["url"])


def _base64(data: str, kind: str, i: int) -> bytes:
    """A data URL's payload, decoded strictly."""
    try:
        # pybase64: the same strict decoding as the standard library's, ~100x faster (32 frames
        # a request made it the server's largest cost).
        return pybase64.b64decode(data, validate=True)
    except (binascii.Error, ValueError):
        raise RequestError(f"{kind} part {i}: invalid base64 data") from None


def _decode_image(part: Mapping[str, Any], i: int) -> bytes:
    url = _part_url(part, "image_url", "image", i, "data:image/...;base64,...")
    if not url.startswith("data:image/"):
        raise RequestError(f"image part {i}: only data:image/...;base64 URLs are accepted (no fetching)")
    head, _, data = url.partition(",")
    if not head.endswith(";base64"):
        raise RequestError(f"image part {i}: the data URL must be base64-encoded")
    return _base64(data, "image", i)


def _video_part(part: Mapping[str, Any], i: int) -> VideoPart:
    """A ``video_url`` part as vLLM takes it: a base64 data URL of a video, or a ``file://`` URL
    (read only under ``--allowed-local-media-path``, checked when it is read). vLLM fetches
    http(s) URLs; this server never reaches the network, so they are refused."""
    url = _part_url(part, "video_url", "video", i, "data:video/...;base64,...")
    scheme = url.partition(":")[0].lower() if ":" in url else ""
    if scheme == "data":
        head, comma, data = url.partition(",")
        mime, _, encoding = head[len("data:"):].partition(";")
        if not mime.lower().startswith("video/"):
            raise RequestError(f"video part {i}: a data URL must have a video MIME type "
                               f"(data:video/...;base64,...; got {mime!r:.40})")
        if mime.lower() == "video/jpeg":
            # vLLM reads this type as a comma-separated list of JPEG frames, not as a clip.
            raise RequestError(f"video part {i}: data:video/jpeg frame lists are not supported; "
                               "send the frames as image_url parts")
        if encoding.lower() != "base64" or not comma:
            raise RequestError(f"video part {i}: the data URL must be base64-encoded")
        raw = _base64(data, "video", i)
        if not raw:
            raise RequestError(f"video part {i}: the data URL holds no data")
        return VideoPart(i, data=raw)
    if scheme == "file":
        # As vLLM: the host part, if any, is read as the start of the path.
        parts = urlsplit(url)
        return VideoPart(i, path=url2pathname(parts.netloc + parts.path))
    if scheme in ("http", "https"):
        raise RequestError(f"video part {i}: benchcheck serve never fetches from the network; send the video "
                           "as a data:video/...;base64 URL, or as a file:// URL under --allowed-local-media-path")
    raise RequestError(f"video part {i}: unsupported URL scheme {scheme!r:.20} "
                       "(data:video/...;base64 or file:// only)")


def _user_turn(content: object) -> tuple[str, tuple[bytes, ...], VideoPart | None]:
    """The user turn as the engines take it: images (or one video) first, then one text."""
    if isinstance(content, str):
        return content, (), None
    if not isinstance(content, list) or not content:
        raise RequestError("user message: content must be a string or a non-empty list of parts")
    images: list[bytes] = []
    video: VideoPart | None = None
    text: str | None = None
    for i, part in enumerate(content):
        kind = part.get("type") if isinstance(part, Mapping) else None
        if kind == "image_url" and isinstance(part, Mapping):
            if text is not None:
                raise RequestError("user message: image parts must come before the text part")
            images.append(_decode_image(part, i))
        elif kind == "video_url" and isinstance(part, Mapping):
            if text is not None:
                raise RequestError("user message: video parts must come before the text part")
            if video is not None:
                raise RequestError(f"user message: part {i}: one video part is supported")
            video = _video_part(part, i)
        elif kind == "text" and isinstance(part, Mapping):
            if text is not None:
                raise RequestError("user message: one text part is supported")
            text = _part_text(part, "user message")
        else:
            raise RequestError(f"user message: part {i} has unsupported type {kind!r}")
    if text is None:
        raise RequestError("user message: a text part is required")
    if video is not None and images:
        # The engines take one sequence of frames: a video's and the images' would run together.
        raise RequestError("user message: a video part cannot be combined with image parts")
    return text, tuple(images), video


def _int_field(body: Mapping[str, Any], key: str, lo: int, default: int | None) -> int | None:
    value = body.get(key)
    if value is None:
        return default
    if not isinstance(value, int) or isinstance(value, bool) or value < lo:
        raise RequestError(f"'{key}' must be an integer >= {lo}")
    return value


# What vLLM's pydantic request model takes for a bool field (lax mode): JSON true/false, the
# numbers 0 and 1, and these strings in any case.
_TRUE_WORDS = frozenset({"1", "on", "t", "true", "y", "yes"})
_FALSE_WORDS = frozenset({"0", "off", "f", "false", "n", "no"})


def _bool_field(body: Mapping[str, Any], key: str, default: bool) -> bool:
    value = body.get(key, default)
    if value is None:
        return default
    if isinstance(value, bool):
        return value
    if isinstance(value, int | float) and value in (0, 1):
        return bool(value)
    if isinstance(value, str) and value.lower() in _TRUE_WORDS | _FALSE_WORDS:
        return value.lower() in _TRUE_WORDS
    raise RequestError(f"'{key}': Input should be a valid boolean (got {value!r:.60})")


# vLLM fields that would change the answer, each with the values that leave it as greedy decoding
# gives it. The engines cannot honour them, so a request that sets one otherwise is refused: vLLM
# would cut at a stop string, penalise repeats, call a tool ..., and an answer that silently did
# not would differ from vLLM's. (``seed``, ``top_p``, ``top_k``: no effect on greedy decoding.)
_NEUTRAL: dict[str, tuple[object, ...]] = {
    "stop": (None, "", []),
    "stop_token_ids": (None, []),
    "bad_words": (None, []),
    "logit_bias": (None, {}),
    "presence_penalty": (None, 0),
    "frequency_penalty": (None, 0),
    "repetition_penalty": (None, 1),
    "length_penalty": (None, 1),
    "min_tokens": (None, 0),
    "ignore_eos": (None, False),
    "use_beam_search": (None, False),
    "include_stop_str_in_output": (None, False),
    "echo": (None, False),
    "prompt_logprobs": (None, 0),
    "tools": (None, []),
    "tool_choice": (None, "none", "auto"),
    "guided_json": (None,),
    "guided_regex": (None,),
    "guided_choice": (None,),
    "guided_grammar": (None,),
    "structured_outputs": (None,),
}


def _refuse_unsupported(body: Mapping[str, Any]) -> None:
    """A 400 naming the first field set to a value that would change the answer (``_NEUTRAL``)."""
    for key, neutral in _NEUTRAL.items():
        value = body.get(key)
        if value not in neutral:
            raise RequestError(f"'{key}' is not supported by benchcheck serve (got {value!r:.60}): its "
                               "answer would differ from vLLM's; leave it out")


def parse_chat(body: object, request_id: str) -> ChatCall:
    """Validate a chat-completions body and map it to one engine request."""
    if not isinstance(body, Mapping):
        raise RequestError("the request body must be a JSON object")
    model = body.get("model")
    if model is not None and not isinstance(model, str):
        raise RequestError(f"'model': Input should be a valid string (got {type(model).__name__})")
    if body.get("stream_options") and not body.get("stream"):
        # vLLM's check, on the raw values, before it validates any field.
        raise RequestError("Stream options can only be defined when `stream=True`.")
    _refuse_unsupported(body)
    if _bool_field(body, "stream", False):
        raise RequestError("'stream' is not supported by benchcheck serve")
    if _int_field(body, "n", 1, 1) != 1:
        raise RequestError("'n' must be 1")
    temperature = body.get("temperature")
    if temperature is not None and (not isinstance(temperature, int | float) or temperature != 0):
        raise RequestError("benchcheck serve decodes greedily: 'temperature' must be 0 or absent")
    logprobs = _bool_field(body, "logprobs", False)
    top = _int_field(body, "top_logprobs", 0, 0) or 0
    if top > MAX_TOP_LOGPROBS:
        raise RequestError(f"Requested top_logprobs of {top}, which is greater than max allowed: {MAX_TOP_LOGPROBS}")
    if top and not logprobs:
        raise RequestError("when using `top_logprobs`, `logprobs` must be set to true.")
    token_ids = _token_ids(body)
    if token_ids and not logprobs:
        raise RequestError("when using `logprob_token_ids`, `logprobs` must be set to true.")
    max_tokens = _int_field(body, "max_completion_tokens", 1, None) or _int_field(body, "max_tokens", 1, None)
    cont = _bool_field(body, "continue_final_message", False)
    add_prompt = _bool_field(body, "add_generation_prompt", True)
    if cont and add_prompt:
        raise RequestError("Cannot set both `continue_final_message` and `add_generation_prompt` to True.")

    messages = body.get("messages")
    if not isinstance(messages, list) or not messages or not all(isinstance(m, Mapping) for m in messages):
        raise RequestError("'messages' must be a non-empty list of message objects")
    roles = [m.get("role") for m in messages]
    if "developer" in roles:
        # OpenAI's newer name for "system", but vLLM does not rename it: the chat template gets
        # role "developer" (Qwen-VL templates: a "<|im_start|>developer" turn, different tokens from
        # a system turn), which the engines' [system, user, assistant] layout cannot represent.
        raise RequestError(f"messages[{roles.index('developer')}]: role 'developer' is not supported by "
                           "benchcheck serve (vLLM renders it through the chat template as its own role, "
                           "not as 'system'); send the instructions as a 'system' message")
    system = _text_of(messages[0].get("content"), "system message") if roles[0] == "system" else None
    rest = messages[1:] if system is not None else messages
    prefix: str | None = None
    if cont:
        if len(rest) != 2 or rest[-1].get("role") != "assistant":
            raise RequestError("continue_final_message needs messages [system?, user, assistant]")
        prefix = _text_of(rest[-1].get("content"), "assistant message")
        rest = rest[:1]
    elif not add_prompt:
        raise RequestError("add_generation_prompt=false is supported only with continue_final_message=true")
    if len(rest) != 1 or rest[0].get("role") != "user":
        raise RequestError(f"benchcheck serve takes one user turn (got roles {roles})")
    text, images, video = _user_turn(rest[0].get("content"))

    if logprobs:
        if max_tokens != 1:
            # Without max_tokens vLLM would generate up to the context with per-token log-probs;
            # answering a 1-token completion instead would be a silent divergence.
            raise RequestError("benchcheck serve returns logprobs only for max_tokens=1 (first-token scoring): "
                               f"give max_tokens=1 explicitly (got {max_tokens})")
        if system is not None or prefix is None:
            raise RequestError(
                "benchcheck serve returns logprobs only for first-token scoring: messages [user, assistant] "
                "with continue_final_message=true and no system message"
            )
        score = ScoreRequest(request_id, text, images, prefix, max(top, 1), token_ids)
        return ChatCall(score=score, generate=None, top_logprobs=top, video=video)
    gen = GenerateRequest(request_id, text, images, max_tokens or DEFAULT_MAX_TOKENS, prefix, system)
    return ChatCall(score=None, generate=gen, top_logprobs=0, default_max_tokens=max_tokens is None, video=video)


def _token_ids(body: Mapping[str, Any]) -> tuple[int, ...]:
    """vLLM's ``logprob_token_ids``: explicit vocabulary ids whose log-probs replace the top-k."""
    value = body.get("logprob_token_ids")
    if value is None:
        return ()
    if not isinstance(value, list) or not all(isinstance(v, int) and not isinstance(v, bool) and v >= 0
                                              for v in value):
        raise RequestError("'logprob_token_ids' must be a list of non-negative integers")
    if len(value) > MAX_LOGPROB_TOKEN_IDS:
        raise RequestError(f"'logprob_token_ids' holds {len(value)} ids; at most {MAX_LOGPROB_TOKEN_IDS}")
    return tuple(dict.fromkeys(value))


def _lp(value: float | str) -> float:
    v = float(value)
    return v if v > _LOGPROB_FLOOR else _LOGPROB_FLOOR


def _entry(token: str, logprob: float) -> JSONDict:
    return {"token": token, "logprob": logprob, "bytes": list(token.encode("utf-8"))}


def _envelope(model: str, fingerprint: str, message: str, finish: str, logprobs: JSONDict | None,
              prompt_tokens: int, completion_tokens: int) -> JSONDict:
    return {
        "id": f"chatcmpl-{uuid.uuid4().hex}",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model,
        "choices": [{
            "index": 0,
            "message": {"role": "assistant", "content": message, "reasoning_content": None, "tool_calls": []},
            "logprobs": logprobs,
            "finish_reason": finish,
            "stop_reason": None,
        }],
        "system_fingerprint": fingerprint,
        "usage": {
            "prompt_tokens": prompt_tokens,
            "completion_tokens": completion_tokens,
            "total_tokens": prompt_tokens + completion_tokens,
            "prompt_tokens_details": None,
        },
        "prompt_logprobs": None,
    }


def score_completion(res: LetterScores, top_logprobs: int, model: str, fingerprint: str,
                     token_ids: tuple[int, ...] = ()) -> JSONDict:
    """A ``max_tokens=1`` completion whose only token is the greedy one, with its top log-probs.

    With ``token_ids`` (vLLM's ``logprob_token_ids``) the list holds, as vLLM's does, the sampled
    token and then every requested id's exact log-prob, in the order asked, instead of the top-k.
    """
    top = [_entry(str(e["token"]), _lp(e["logprob"])) for e in res.top]
    chosen = next((e["logprob"] for e in top if e["token"] == res.top1_token), top[0]["logprob"] if top else 0.0)
    shown = top[:top_logprobs]
    if token_ids:
        asked = [_entry(str(e["token"]), _lp(e["logprob"])) for e in res.exact]
        sampled = [] if any(e["token"] == res.top1_token for e in asked) else [_entry(res.top1_token, chosen)]
        shown = sampled + asked
    content = [{**_entry(res.top1_token, chosen), "top_logprobs": shown}]
    return _envelope(model, fingerprint, res.top1_token, "length", {"content": content}, res.prompt_tokens, 1)


def generate_completion(res: Generation, max_tokens: int, model: str, fingerprint: str) -> JSONDict:
    """A greedy completion; ``finish_reason`` is "length" when it used all of ``max_tokens``."""
    finish = "length" if res.completion_tokens >= max_tokens else "stop"
    return _envelope(model, fingerprint, res.text, finish, None, res.prompt_tokens, res.completion_tokens)
