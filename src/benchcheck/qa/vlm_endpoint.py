"""The VLM as an OpenAI-compatible chat endpoint (``--vlm-endpoint URL --vlm-model NAME``).

Three ways to show the clip:

- ``frames`` (default): ``num_frames`` time-uniform JPEG frames as image parts, sent through
  the registry's ``openai`` engine with no retries;
- ``url`` (``--video-url-base``): one ``video_url`` part pointing at ``<base>/<video path>``,
  so the server fetches the clip itself (the base must be routable from the server);
- ``inline`` (``--inline-media``): the clip inline as a base64 ``data:`` URL; warns above
  about 10 MB, which servers commonly reject (HTTP 413/422).

Every mode goes through the ``openai`` engine, built by the registry (frames as image parts,
a clip as the request's ``video_url`` part), so QA has the engine's failure kinds:
``context_too_long`` (a 400 naming the context limit), ``timeout``, ``connection``, ``http``,
and ``bad_output`` for a 200 that is not a chat completion. There are no retries (SPEC section 6:
no retries around the VLM call): the engine is built with ``max_retries=0``, so a 429 or 5xx
is the item's error, not a wait. ``--timeout`` bounds the request; the watchdog
(``timeout + grace``) bounds the whole item, preparation included.
The reported latency is the wall clock of the whole item (frame decoding and the request), as
in command mode; ``prep_s`` gives the client-side preparation alone.
"""

from __future__ import annotations

import asyncio
import base64
import mimetypes
import time
from collections.abc import Callable
from typing import Any, Literal
from urllib.parse import quote

from benchcheck.engines.base import Failure, GenerateRequest
from benchcheck.engines.options import EngineOptions
from benchcheck.engines.registry import from_options
from benchcheck.masking import Masker
from benchcheck.qa.dataset import QAItem, video_problem
from benchcheck.qa.frames import sample_jpegs
from benchcheck.qa.records import VLMAnswer, VLMErrorKind

MediaMode = Literal["frames", "url", "inline"]
INLINE_WARN_BYTES = 10 * 1024 * 1024

# The engine's failure kinds as QA's error kinds (``http`` for every other HTTP refusal).
_FAILURE_KINDS: dict[str, VLMErrorKind] = {"timeout": "timeout", "connection": "connection",
                                          "context_too_long": "context_too_long", "internal": "bad_output"}


def inline_video_url(data: bytes, name: str) -> str:
    mime = mimetypes.guess_type(name)[0] or "video/mp4"
    return f"data:{mime};base64," + base64.b64encode(data).decode("ascii")


class EndpointVLM:
    """Asks an OpenAI-compatible VLM server about each clip."""

    kind = "endpoint"

    def __init__(self, endpoint: str, model: str, *, num_frames: int, timeout_s: float,
                 watchdog_grace_s: float, redactor: Masker, api_key: str | None = None,
                 media: MediaMode = "frames", video_url_base: str | None = None, max_side: int = 768,
                 max_tokens: int = 512, concurrency: int = 1,
                 warn: Callable[[str], None] = lambda _msg: None) -> None:
        if media == "url" and not video_url_base:
            raise ValueError("media mode 'url' needs a video URL base")
        self.endpoint = endpoint.rstrip("/")
        self.model = model
        self.num_frames = num_frames
        self.timeout_s = timeout_s
        self.watchdog_grace_s = watchdog_grace_s
        self.redactor = redactor
        self.api_key = api_key
        self.media: MediaMode = media
        self.video_url_base = video_url_base.rstrip("/") if video_url_base else None
        self.max_side = max_side
        self.max_tokens = max_tokens
        self.warn = warn
        # No retries around the VLM call (SPEC section 6); the key rides in the options, never in a log.
        self.engine = from_options("openai", EngineOptions(
            model=model, endpoints=(self.endpoint,), api_key=api_key, workers=concurrency, timeout_s=timeout_s,
            max_retries=0))

    def settings(self) -> dict[str, Any]:
        """What identifies this VLM in the run configuration (no secrets)."""
        return {"mode": self.kind, "vlm_endpoint": self.endpoint, "vlm_model": self.model,
                "media": self.media, "video_url_base": self.video_url_base, "max_side": self.max_side,
                "max_tokens": self.max_tokens}

    async def answer(self, item: QAItem) -> VLMAnswer:
        limit = self.timeout_s + self.watchdog_grace_s
        start = time.monotonic()
        try:
            return await asyncio.wait_for(self._answer(item), timeout=limit)
        except TimeoutError:
            elapsed = time.monotonic() - start
            msg = (f"killed by the watchdog after {elapsed:.1f} s (--timeout {self.timeout_s:g} + "
                   f"--watchdog-grace {self.watchdog_grace_s:g}): the VLM endpoint never answered")
            return VLMAnswer(item.id, "error", elapsed, error=msg, error_kind="watchdog")

    async def _answer(self, item: QAItem) -> VLMAnswer:
        """``latency_s`` is the wall clock of the whole item, as in command mode: frame decoding
        (also reported alone as ``prep_s``) plus the request."""
        t0 = time.monotonic()
        if (problem := video_problem(item)) is not None:
            return VLMAnswer(item.id, "error", 0.0, error=problem, error_kind="video")
        try:
            content = await asyncio.to_thread(self._media, item)
        except (ValueError, OSError) as e:
            prep = time.monotonic() - t0
            return VLMAnswer(item.id, "error", prep, error=str(e), error_kind="video", prep_s=prep)
        prep = time.monotonic() - t0
        if isinstance(content, tuple):
            req = GenerateRequest(request_id=item.id, prompt=item.question, images=content,
                                  max_tokens=self.max_tokens)
        else:
            req = GenerateRequest(request_id=item.id, prompt=item.question, video_url=content,
                                  max_tokens=self.max_tokens)
        (res,) = await self.engine.generate([req])
        latency = time.monotonic() - t0
        if isinstance(res, Failure):
            kind = _FAILURE_KINDS.get(res.kind, "http")
            return VLMAnswer(item.id, "error", latency, error=self.redactor.text(f"VLM endpoint {res}"),
                             error_kind=kind, prep_s=prep)
        return VLMAnswer(item.id, "ok", latency, answer=res.text, model=res.model or None, prep_s=prep)

    def _media(self, item: QAItem) -> tuple[bytes, ...] | str:
        """Frames (a tuple of JPEGs) or the clip's URL; runs in a worker thread."""
        if self.media == "frames":
            return tuple(sample_jpegs(item.video_path, self.num_frames, self.max_side))
        if self.media == "url":
            return f"{self.video_url_base}/{quote(item.video.replace(chr(92), '/'))}"
        data = item.video_path.read_bytes()
        if len(data) > INLINE_WARN_BYTES:
            self.warn(f"{item.id}: {item.video} is {len(data) / 2**20:.1f} MB inline (--inline-media); "
                      "servers often reject clips over ~10 MB (HTTP 413/422): serve the clips by URL instead")
        return inline_video_url(data, item.video)

    async def aclose(self) -> None:
        await self.engine.aclose()
