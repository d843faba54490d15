"""Typed records passed between the QA stages: the VLM's answer and the judge's verdict.

Both are stored as JSONL rows in the output folder (answers, judge cache) before any summary
is computed, so a killed run resumes and ``qa judge`` can re-score stored answers.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any, Literal

Status = Literal["ok", "error"]

# Why a VLM call produced no answer.
VLMErrorKind = Literal["watchdog", "exit", "bad_output", "video", "http", "timeout", "connection", "internal",
                      "not_run", "context_too_long"]


@dataclass(frozen=True, slots=True)
class VLMAnswer:
    """One item's VLM call: the answer and the model the deployment reported, or an error.

    ``latency_s`` is the wall clock of the whole item in both modes (the command; or, in
    endpoint mode, the frame decoding and the HTTP request); ``prep_s`` is the client-side
    preparation part of it (frame decoding in endpoint mode, 0 in command mode).
    ``concurrency`` is the ``--concurrency`` of the run that measured it (``None`` in rows written
    before it was recorded): a rerun under another concurrency reuses the answer, but its latency
    was measured under other load and is reported apart (:func:`benchcheck.qa.summary.build_summary`).
    """

    item_id: str
    status: Status
    latency_s: float
    answer: str | None = None
    model: str | None = None
    error: str | None = None
    error_kind: VLMErrorKind | None = None
    prep_s: float = 0.0
    concurrency: int | None = None

    def to_row(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_row(cls, row: dict[str, Any]) -> VLMAnswer:
        names = cls.__dataclass_fields__
        return cls(**{k: v for k, v in row.items() if k in names})


@dataclass(frozen=True, slots=True)
class Judgement:
    """The judge's verdict on one answer: a score in [0, 1], or an error (never a low score).

    ``judge_model`` is the model the judge's response reported; ``http_status`` is set when the
    judge host answered with an HTTP error.
    """

    item_id: str
    status: Status
    score: float | None = None
    reasoning: str = ""
    judge_model: str | None = None
    error: str | None = None
    http_status: int | None = None

    def to_row(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_row(cls, row: dict[str, Any]) -> Judgement:
        names = cls.__dataclass_fields__
        return cls(**{k: v for k, v in row.items() if k in names})
