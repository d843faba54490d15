"""The VLM under test: the protocol both runners follow and the choice between them."""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from benchcheck.masking import Masker
from benchcheck.qa.dataset import QAItem
from benchcheck.qa.errors import PreconditionError
from benchcheck.qa.records import VLMAnswer


class VLM(Protocol):
    """A way to ask the deployed VLM about one item (a command line or an endpoint)."""

    def settings(self) -> dict[str, Any]: ...

    async def answer(self, item: QAItem) -> VLMAnswer: ...

    async def aclose(self) -> None: ...


@dataclass(frozen=True, slots=True)
class VLMOptions:
    """How to reach the VLM: exactly one of ``cmd`` or ``endpoint`` (with ``model``)."""

    cmd: str | None = None
    endpoint: str | None = None
    model: str | None = None
    api_key_env: str | None = None
    inline_media: bool = False
    video_url_base: str | None = None
    max_side: int = 768
    max_tokens: int = 512
    env_passed: tuple[str, ...] = ()  # --vlm-env: secret-named variables the command may see


def make_vlm(opts: VLMOptions, *, num_frames: int, timeout_s: float, watchdog_grace_s: float,
             concurrency: int, redactor: Masker, warn: Callable[[str], None],
             env: Mapping[str, str] | None = None) -> VLM:
    """The command or endpoint VLM; inconsistent options are a :class:`PreconditionError`."""
    env = os.environ if env is None else env
    if (opts.cmd is None) == (opts.endpoint is None):
        raise PreconditionError("give exactly one of --vlm-cmd or --vlm-endpoint")
    if opts.cmd is not None:
        if opts.video_url_base or opts.model or opts.api_key_env:
            raise PreconditionError("--vlm-model, --vlm-api-key-env and --video-url-base apply to --vlm-endpoint "
                                    "only")
        from benchcheck.qa.vlm_cmd import CommandVLM

        unset = [n for n in opts.env_passed if n not in env]
        if unset:
            raise PreconditionError(f"--vlm-env {', '.join(unset)}: not set in this environment")
        try:
            return CommandVLM(opts.cmd, num_frames, timeout_s, watchdog_grace_s, redactor, env, opts.env_passed,
                              opts.inline_media, warn)
        except ValueError as e:
            raise PreconditionError(str(e)) from None
    return _endpoint_vlm(opts, num_frames=num_frames, timeout_s=timeout_s, watchdog_grace_s=watchdog_grace_s,
                         concurrency=concurrency, redactor=redactor, warn=warn, env=env)


def _endpoint_vlm(opts: VLMOptions, *, num_frames: int, timeout_s: float, watchdog_grace_s: float,
                  concurrency: int, redactor: Masker, warn: Callable[[str], None],
                  env: Mapping[str, str]) -> VLM:
    from benchcheck.qa.urls import media_base_url, service_base_url
    from benchcheck.qa.vlm_endpoint import EndpointVLM, MediaMode

    if not opts.model:
        raise PreconditionError("--vlm-endpoint needs --vlm-model (the model id the server serves)")
    if opts.env_passed:
        raise PreconditionError("--vlm-env applies to --vlm-cmd only (the endpoint runs elsewhere)")
    if opts.inline_media and opts.video_url_base:
        raise PreconditionError("--inline-media and --video-url-base exclude each other")
    key = None
    if opts.api_key_env:
        key = env.get(opts.api_key_env)
        if not key:
            raise PreconditionError(f"--vlm-api-key-env {opts.api_key_env}: that variable is not set")
    try:
        endpoint = service_base_url(opts.endpoint or "", "--vlm-endpoint")
        base = media_base_url(opts.video_url_base) if opts.video_url_base else None
    except ValueError as e:
        raise PreconditionError(str(e)) from None
    media: MediaMode = "inline" if opts.inline_media else "url" if base else "frames"
    return EndpointVLM(endpoint, opts.model, num_frames=num_frames, timeout_s=timeout_s,
                       watchdog_grace_s=watchdog_grace_s, redactor=redactor, api_key=key, media=media,
                       video_url_base=base, max_side=opts.max_side, max_tokens=opts.max_tokens,
                       concurrency=concurrency, warn=warn)

