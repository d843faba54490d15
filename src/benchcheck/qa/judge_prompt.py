"""The judge's rubric and the parser of its replies (pure; SPEC section 6).

The rubric scores an answer 0-1 against the reference: yes/no answers and counts must match
exactly, timestamps within 5 seconds count as right, partial answers earn partial credit.
``JUDGE_PROMPT_VERSION`` is part of the judge cache key: change it whenever the text changes,
so a cached score is never reused for a different rubric.

The parser strips reasoning blocks (``<think>`` and friends), then reads the last line that holds
any number: its last number (fractions and percentages reduced) is the score. When that number
is outside [0, 1] ("Score: 7", the judge grading on another scale) or there is no number at all,
the reply is a judge error, never a score: an earlier in-range number ("1 of the 2 people") is
not the verdict.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

JUDGE_PROMPT_VERSION = "qa-judge-v1"

JUDGE_SYSTEM = (
    "You grade answers to questions about a video. You compare a candidate answer with a "
    "reference answer written by a person who watched the video; you do not see the video."
)

JUDGE_TEMPLATE = """Score how well the candidate answer agrees with the reference answer, from 0 to 1.

Rules:
- Yes/no questions: 1 if the candidate gives the same yes/no as the reference, else 0.
- Counts and other numbers: 1 only if the number is exactly the reference number, else 0.
- Timestamps and durations: right when within 5 seconds of the reference.
- Otherwise give partial credit between 0 and 1 for answers that are partly right or incomplete.
- Judge the meaning, not the wording; extra detail that does not contradict the reference is fine.

Question: {question}
Reference answer: {reference}
Candidate answer: {candidate}

Explain your grading in one or two sentences, then give the score alone on the last line as a
number between 0 and 1 (for example 0.5)."""

_BLOCK_TAGS = ("think", "thinking", "reasoning", "reflection")
_TAGS = "|".join(_BLOCK_TAGS)
_CLOSED_BLOCK = re.compile(rf"<({_TAGS})>.*?</\1>", re.I | re.S)
# Servers that put the opening tag in the prompt return only the closing one.
_LEADING_CLOSE = re.compile(rf"^.*?</(?:{_TAGS})>", re.I | re.S)
# A reply cut off inside its reasoning.
_OPEN_TO_END = re.compile(rf"<(?:{_TAGS})>.*\Z", re.I | re.S)

_NUM = r"[-+]?(?:\d+(?:\.\d+)?|\.\d+)"
# A number, optionally as a fraction ("3/4", "0.8 out of 1") or a percentage ("80%"); not part
# of a word, version or date ("Qwen3", "v1.2", "2024-01").
_SCORE = re.compile(
    rf"(?<![\w.\-])({_NUM})(?:\s*(?:/|out\s+of)\s*({_NUM}))?(\s*%)?(?![\w])", re.I
)


def judge_prompt(question: str, reference: str, candidate: str) -> str:
    """The user turn sent to the judge for one item."""
    return JUDGE_TEMPLATE.format(question=question.strip(), reference=reference.strip(),
                                 candidate=candidate.strip())


def strip_reasoning(text: str) -> str:
    """The reply without reasoning blocks (closed, opened in the prompt, or cut off)."""
    text = _CLOSED_BLOCK.sub("", text)
    text = _LEADING_CLOSE.sub("", text)
    return _OPEN_TO_END.sub("", text).strip()


def _values(line: str) -> list[float]:
    """The line's numbers, fractions and percentages reduced; ``nan`` for a fraction over 0 or
    less (a number, but not a score)."""
    out = []
    for m in _SCORE.finditer(line):
        value = float(m.group(1))
        if m.group(2) is not None:
            denom = float(m.group(2))
            value = value / denom if denom > 0 else math.nan
        elif m.group(3):
            value /= 100.0
        out.append(value)
    return out


@dataclass(frozen=True, slots=True)
class ParsedScore:
    """A score in [0, 1] and the reasoning shown to readers, or ``score=None`` with ``error``."""

    score: float | None
    reasoning: str
    error: str | None = None


def parse_judge_reply(text: str) -> ParsedScore:
    """The last number of the last line that has any; out of [0, 1] or none is an error."""
    visible = strip_reasoning(text)
    shown = visible[-200:] if visible else "(empty after removing reasoning)"
    for line in reversed(visible.splitlines()):
        values = _values(line)
        if not values:
            continue
        last = values[-1]
        if 0.0 <= last <= 1.0:
            return ParsedScore(last, visible)
        return ParsedScore(None, visible, f"judge reply has no score between 0 and 1: its last number is "
                                          f"{line.strip()[-80:]!r}, outside 0-1 (another scale?): {shown!r}")
    return ParsedScore(None, visible, f"judge reply has no score between 0 and 1: {shown!r}")
