"""The judge's rubric and the parser of its verdicts (pure; SPEC section 6).

The rubric scores an answer 0-1 against the reference: yes/no answers and counts must match
exactly, timestamps within 5 seconds count as right, partial answers earn partial credit.
``JUDGE_PROMPT_VERSION`` is part of the judge cache key: change it whenever the text or the
parser changes, so a cached score is never reused for a different rubric or reading.

The judge is asked for a structured verdict, in one of two formats:

- ``json``: the reply is one JSON object ``{"score": <0..1>, "reasoning": "..."}`` (sent with
  ``response_format: {"type": "json_object"}`` where the endpoint supports it);
- ``line``: free reasoning, then a last line ``SCORE: <x>`` (for endpoints without JSON mode).

The parser is strict and reads either format, whatever was asked: after reasoning blocks
(``<think>`` and friends) are removed, the reply must be exactly one JSON object (a Markdown
code fence around it is allowed) whose ``score`` is a JSON number in [0, 1] (one value: repeated
``score`` keys must agree), or its last
non-empty line must be ``SCORE: <number>`` with the number in [0, 1] and no other ``SCORE:``
line disagreeing. Nothing else is a verdict: not the last number of the reply ("the reference
says 0."), not "1/1", "0.5 out of 1", "score: 1.0 (partial 0.5)" or a percentage. A reply
without a verdict is asked again and, after the judge's retries, is a judge error, never a score.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass
from typing import Literal

JUDGE_PROMPT_VERSION = "qa-judge-v2"

VerdictFormat = Literal["json", "line"]

JUDGE_SYSTEM = (
    "You grade answers to questions about a video. You compare a candidate answer with a "
    "reference answer written by a person who watched the video; you do not see the video."
)

_RUBRIC = """Score how well the candidate answer agrees with the reference answer, from 0 to 1.

Rules:
- Yes/no questions: 1 if the candidate gives the same yes/no as the reference, else 0.
- Counts and other numbers: 1 only if the number is exactly the reference number, else 0.
- Timestamps and durations: right when within 5 seconds of the reference.
- Otherwise give partial credit between 0 and 1 for answers that are partly right or incomplete.
- Judge the meaning, not the wording; extra detail that does not contradict the reference is fine.

Question: {question}
Reference answer: {reference}
Candidate answer: {candidate}

"""

_ASK = {
    "json": 'Reply with one JSON object and nothing else: {{"score": <a number from 0 to 1>, '
            '"reasoning": "<one or two sentences>"}}',
    "line": "Explain your grading in one or two sentences, then end with a last line that holds only "
            "SCORE: <a number from 0 to 1> (for example SCORE: 0.5).",
}

_BLOCK_TAGS = ("think", "thinking", "reasoning", "reflection")
_TAGS = "|".join(_BLOCK_TAGS)
_CLOSED_BLOCK = re.compile(rf"<({_TAGS})>.*?</\1>", re.I | re.S)
# Servers that put the opening tag in the prompt return only the closing one.
_LEADING_CLOSE = re.compile(rf"^.*?</(?:{_TAGS})>", re.I | re.S)
# A reply cut off inside its reasoning.
_OPEN_TO_END = re.compile(rf"<(?:{_TAGS})>.*\Z", re.I | re.S)

_FENCE = re.compile(r"```[A-Za-z]*[ \t]*\n?(.*?)\n?[ \t]*```", re.S)
_NUMBER = r"[-+]?(?:\d+(?:\.\d+)?|\.\d+)"
_SCORE_LINE = re.compile(rf"score\s*:\s*({_NUMBER})", re.I)
_SCORE_START = re.compile(r"score\s*:", re.I)


def judge_prompt(question: str, reference: str, candidate: str, fmt: VerdictFormat = "json") -> str:
    """The user turn sent to the judge for one item, asking for a verdict in ``fmt``."""
    return _RUBRIC.format(question=question.strip(), reference=reference.strip(),
                          candidate=candidate.strip()) + _ASK[fmt].format()


def strip_reasoning(text: str) -> str:
    """The reply without reasoning blocks (closed, opened in the prompt, or cut off)."""
    text = _CLOSED_BLOCK.sub("", text)
    text = _LEADING_CLOSE.sub("", text)
    return _OPEN_TO_END.sub("", text).strip()


@dataclass(frozen=True, slots=True)
class ParsedScore:
    """A score in [0, 1] and the reasoning shown to readers, or ``score=None`` with ``error``."""

    score: float | None
    reasoning: str
    error: str | None = None


def _in_range(value: float, what: str, visible: str) -> ParsedScore:
    if not math.isfinite(value) or not 0.0 <= value <= 1.0:
        return ParsedScore(None, visible, f"judge verdict {what} is {value!r}, outside 0-1 (another scale?)")
    return ParsedScore(value, visible)


def _from_json(obj: dict[str, object], visible: str) -> ParsedScore:
    score = obj.get("score")
    if isinstance(score, bool) or not isinstance(score, int | float):
        return ParsedScore(None, visible, f"judge verdict JSON has no numeric 'score' (got {score!r:.40})")
    reasoning = obj.get("reasoning")
    try:
        value = float(score)
    except OverflowError:  # a JSON integer past float's range: out of range like `SCORE: 1e999`, not a crash
        value = math.inf
    parsed = _in_range(value, "'score'", visible)
    if parsed.score is None:
        return parsed
    return ParsedScore(parsed.score, reasoning if isinstance(reasoning, str) and reasoning.strip() else visible)


class _DisagreeingScores(ValueError):
    """A JSON object with two ``score`` keys of different values."""


def _no_disagreeing_scores(pairs: list[tuple[str, object]]) -> dict[str, object]:
    """``json.loads`` keeps the last of repeated keys: ``{"score": 0, ..., "score": 1}`` read as 1,
    where two disagreeing ``SCORE:`` lines are no verdict. The same rule for both formats."""
    if len({json.dumps(v, sort_keys=True) for k, v in pairs if k == "score"}) > 1:
        raise _DisagreeingScores
    return dict(pairs)


def _json_object(body: str) -> dict[str, object] | None:
    """The reply as one JSON object (bare or in one code fence), else None; raises
    :class:`_DisagreeingScores` for an object whose ``score`` keys disagree."""
    fenced = _FENCE.fullmatch(body)
    candidate = (fenced.group(1) if fenced else body).strip()
    if not candidate.startswith("{"):
        return None
    try:
        obj = json.loads(candidate, object_pairs_hook=_no_disagreeing_scores)
    except _DisagreeingScores:
        raise
    except (ValueError, RecursionError):  # nesting past the decoder's depth is no verdict, not a crash
        return None
    return obj if isinstance(obj, dict) else None


def _score_lines(visible: str) -> tuple[list[str], str | None]:
    """The lines that start with ``SCORE:`` (Markdown emphasis removed) and the last non-empty line."""
    lines = [ln.replace("*", "").replace("`", "").strip() for ln in visible.splitlines()]
    lines = [ln for ln in lines if ln]
    return [ln for ln in lines if _SCORE_START.match(ln)], (lines[-1] if lines else None)


def parse_verdict(text: str) -> ParsedScore:
    """The verdict of a judge reply (see the module docstring); ``score=None`` with ``error``
    when the reply holds none."""
    visible = strip_reasoning(text)
    shown = repr(visible[-200:]) if visible else "(empty after removing reasoning)"
    try:
        obj = _json_object(visible)
    except _DisagreeingScores:
        return ParsedScore(None, visible, f"judge verdict JSON has disagreeing 'score' keys: {shown}")
    if obj is not None:
        return _from_json(obj, visible)
    score_lines, last = _score_lines(visible)
    m = _SCORE_LINE.fullmatch(last) if last is not None else None
    if m is None:
        return ParsedScore(None, visible, "judge reply has no verdict (neither a JSON object with 'score' nor "
                                          f"a last line 'SCORE: <0..1>'): {shown}")
    value = float(m.group(1))
    others = {ln for ln in score_lines if (o := _SCORE_LINE.fullmatch(ln)) is None or float(o.group(1)) != value}
    if others:
        return ParsedScore(None, visible, f"judge reply has disagreeing SCORE lines: {shown}")
    return _in_range(value, "SCORE", visible)
