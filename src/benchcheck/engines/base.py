"""The engine interface (docs/ARCHITECTURE.md, "Engines") and the records it passes.

Kept importable with the standard library alone: the GPU machine has torch, transformers,
numpy and Pillow but none of the server-side packages.
"""

from __future__ import annotations

from asyncio import CancelledError
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal, Protocol, runtime_checkable

from benchcheck.protocol import ASSISTANT_PREFIX, TOP_LOGPROBS

# A frame: JPEG bytes in memory, or the path of a JPEG file.
ImageRef = bytes | Path

FailureKind = Literal["context_too_long", "bad_request", "http", "connection", "timeout", "internal"]


@dataclass(frozen=True, slots=True)
class ScoreRequest:
    """One protocol forward: user turn = images then ``prompt``; assistant turn prefilled with
    ``assistant_prefix`` and continued; the answer is the first generated token's top log-probs."""

    request_id: str
    prompt: str
    images: tuple[ImageRef, ...] = ()
    assistant_prefix: str = ASSISTANT_PREFIX
    top_logprobs: int = TOP_LOGPROBS
    # vLLM's ``logprob_token_ids``: the exact log-probs of these vocabulary ids (served requests).
    # Empty: an engine with exact letter scores returns those of every letter variant instead.
    logprob_token_ids: tuple[int, ...] = ()


@dataclass(frozen=True, slots=True)
class LetterScores:
    """The first generated position: its top tokens as OpenAI-shaped ``{"token", "logprob"}``
    dicts (feed them to ``protocol.letter_logprobs``), plus accounting."""

    request_id: str
    top: list[dict[str, float | str]]
    top1_token: str
    prompt_tokens: int
    latency_s: float
    model: str = ""
    # Exact log-probs from the full softmax (``{"token", "logprob", "token_id"}``) of the ids asked
    # for, or of every letter variant the protocol's regex accepts; empty when the engine has none.
    # ``protocol.letter_logprobs(exact, k)`` merges them into ``lp_exact``.
    exact: list[dict[str, float | str | int]] = field(default_factory=list)
    exact_source: str = ""  # how ``exact`` was obtained: "full_softmax", "logprob_token_ids", ""


@dataclass(frozen=True, slots=True)
class GenerateRequest:
    """Greedy generation (sweep, QA): user turn = images, then the video part when
    ``video_url`` is set, then ``prompt``; ``assistant_prefix`` optional (None: a normal
    generation prompt).

    ``video_url`` is a clip the server fetches (``http(s)://``) or a ``data:video/...;base64``
    URL, sent as an OpenAI ``video_url`` content part (vLLM's video input); ``response_format``
    (``"json_object"``) asks the server for JSON mode. Both are wire fields: the ``openai``
    engine sends them (QA's endpoint VLM and judge); the in-process engines do not read them.
    """

    request_id: str
    prompt: str
    images: tuple[ImageRef, ...] = ()
    max_tokens: int = 128
    assistant_prefix: str | None = None
    system: str | None = None
    video_url: str | None = None
    response_format: str | None = None


@dataclass(frozen=True, slots=True)
class Generation:
    request_id: str
    text: str
    prompt_tokens: int
    completion_tokens: int
    latency_s: float
    model: str = ""


@dataclass(frozen=True, slots=True)
class Failure:
    """A request that produced no answer. Never dropped: it becomes an error row."""

    request_id: str
    kind: FailureKind
    message: str
    status: int | None = None
    latency_s: float = 0.0
    extra: dict[str, str] = field(default_factory=dict)

    def __str__(self) -> str:
        code = f" {self.status}" if self.status is not None else ""
        return f"{self.kind}{code}: {self.message}"


@runtime_checkable
class Engine(Protocol):
    """Every provider answers both request types; which one answered is invisible to callers."""

    name: str
    model_name: str
    revision: str | None

    async def score(self, reqs: Sequence[ScoreRequest]) -> list[LetterScores | Failure]: ...

    async def generate(self, reqs: Sequence[GenerateRequest]) -> list[Generation | Failure]: ...

    async def aclose(self) -> None: ...


class CallCancelled(CancelledError):
    """An in-process engine call cancelled part-way (Ctrl-C cancels the run's tasks), raised once
    its work has stopped. ``answers``: one per request in order, the answer (or ``Failure``) it
    finished, None for a request it did not: a caller may keep the whole answers and must redo
    the rest. A ``CancelledError``: the cancellation goes on wherever it is not caught."""

    def __init__(self, answers: Sequence[object | None]) -> None:
        super().__init__(f"cancelled with {sum(a is not None for a in answers)} of {len(answers)} requests answered")
        self.answers = list(answers)


def engine_config_hash(engine: object) -> str | None:
    """The hash of an engine's own configuration (its ``config_hash``: the hf engine's
    ``HFConfig.hash``), written beside engine, model and revision; None for engines without one."""
    v = getattr(engine, "config_hash", None)
    return v if isinstance(v, str) else None
