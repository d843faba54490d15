"""The ``reference`` engine: a small deterministic rule-based program that answers like a VLM.

It is not a model, and says so: its ``model_name`` starts with ``reference:`` (the rows' model
and engine fields, the served model id, summaries). It answers from what a request holds and
nothing else: the prompt's question and options (parsed from the protocol's prompt text) and the
images in the order given, measured at the resolution they arrive in (``reference_vision``).
It never sees an item's kind or gold answer.

Rules, each giving an option and a confidence in [0, 1]; the most confident wins (ties: the
earlier rule), and below :data:`MIN_CONFIDENCE` the answer is flat:

1. **leak**: exactly one option's text appears, as whole words, in the question.
2. **plausible**: exactly one option is made only of words the engine knows; the others are not.
3. **vision**, chosen by the question's words (needs images):
   ``flash`` -> the option colour present in at least one and at most a fifth of at least
   3 frames; ``first`` -> the option colour that appears first, confident only when each
   colour's presence is one unbroken run (shuffled frames break it); ``move`` -> the direction
   the named colour's centroid travels, confident only when the steps agree; ``dot``/``mark``
   -> the corner of a tiny near-white mark (lost when the frame is too small to resolve it);
   otherwise, colour options -> the colour covering the most area.

Letters' log-probabilities: the winner ``exp(MAX_MARGIN * c)`` times as likely as each other
option (so the protocol's margin is ``MAX_MARGIN * c``), all equal when undecided; the top list
is filled with non-letter tokens, shaped like vLLM's. ``generate`` replies ``"Answer: X"`` (or
``" X"`` after an ``Answer:`` prefill), X the highest letter, the first one when flat.
"""

from __future__ import annotations

import asyncio
import itertools
import math
import re
import time
from collections.abc import Sequence
from dataclasses import dataclass

from benchcheck.engines.base import Failure, GenerateRequest, Generation, ImageRef, LetterScores, ScoreRequest
from benchcheck.engines.options import EngineOptions
from benchcheck.engines.rules.reference_vision import COLOUR_RGB, FrameFacts, frame_facts
from benchcheck.engines.rules.scripted import estimate_tokens, top_list
from benchcheck.protocol import LETTERS

RULES_VERSION = "rules-v1"
DEFAULT_NAME = f"reference:deterministic-{RULES_VERSION}"
MAX_MARGIN = 4.0  # nats between the winner and each other option at full confidence
MIN_CONFIDENCE = 0.05
LETTER_MASS = 0.95  # the rest of the probability goes to non-letter tokens
BRIEF_MAX_SHARE = 0.2
BRIEF_MIN_FRAMES = 3

_KNOWN_WORDS = frozenset(
    [*COLOUR_RGB, "top", "bottom", "left", "right", "up", "down", "middle", "centre", "center", "the", "a", "an",
     "of", "and", "or", "none", "both", "all", "yes", "no", "first", "second", "one", "two", "three", "four",
     "ball", "block", "square", "dot", "mark", "flash", "same", "it", "is", "at", "in", "on"]
)
_WORD = re.compile(r"[a-z]+")
_OPTION_LINE = re.compile(r"^([A-Z])\. (.*)$")


@dataclass(frozen=True, slots=True)
class Parsed:
    """The protocol prompt's parts (the intro is ignored)."""

    question: str | None
    options: tuple[str, ...]


def parse_prompt(prompt: str) -> Parsed:
    """Question and options of a protocol prompt (``Question: ...`` / ``Options:`` lines)."""
    question = None
    q = re.search(r"(?:^|\n)Question: (.*?)\nOptions:\n", prompt, re.S)
    if q:
        question = q.group(1).strip()
    options: list[str] = []
    block = prompt.split("Options:\n", 1)[1] if "Options:\n" in prompt else ""
    # Lines end at "\n" only: str.splitlines() also breaks at U+2028, U+2029, U+0085 and other
    # separators an option's text may hold, which cut the option list short.
    for line in block.split("\n"):
        m = _OPTION_LINE.match(line)
        if not m or m.group(1) != LETTERS[len(options)]:
            break
        options.append(m.group(2).strip())
    return Parsed(question, tuple(options))


@dataclass(frozen=True, slots=True)
class Decision:
    """The engine's answer to one request: the option it prefers (None: undecided), how
    confident it is, and the rule that decided."""

    n_options: int
    pick: int | None
    confidence: float
    rule: str

    def letter_logprobs(self) -> dict[str, float]:
        k = self.n_options
        if self.pick is None:
            return {LETTERS[i]: math.log(LETTER_MASS / k) for i in range(k)}
        ratio = math.exp(MAX_MARGIN * self.confidence)
        p_other = LETTER_MASS / (ratio + k - 1)
        return {LETTERS[i]: math.log(p_other * ratio if i == self.pick else p_other) for i in range(k)}

    @property
    def answer_index(self) -> int:
        return 0 if self.pick is None else self.pick


Evidence = tuple[int, float, str]  # option index, confidence, rule


def _words(text: str) -> list[str]:
    return _WORD.findall(text.lower())


def _leak(question: str | None, options: Sequence[str]) -> Evidence | None:
    if not question:
        return None
    q = f" {' '.join(_words(question))} "
    hits = [i for i, o in enumerate(options) if _words(o) and f" {' '.join(_words(o))} " in q]
    return (hits[0], 1.0, "leak") if len(hits) == 1 else None


def _plausible(options: Sequence[str]) -> Evidence | None:
    ok = [i for i, o in enumerate(options) if _words(o) and all(w in _KNOWN_WORDS for w in _words(o))]
    return (ok[0], 1.0, "plausible") if len(ok) == 1 and len(options) > 1 else None


def _colour_options(options: Sequence[str]) -> dict[int, str]:
    return {i: o.strip().lower() for i, o in enumerate(options) if o.strip().lower() in COLOUR_RGB}


def _brief(facts: Sequence[FrameFacts], options: Sequence[str]) -> Evidence | None:
    n = len(facts)
    if n < BRIEF_MIN_FRAMES:
        return None
    limit = max(1, math.floor(BRIEF_MAX_SHARE * n))
    counts = {i: sum(c in f.area for f in facts) for i, c in _colour_options(options).items()}
    brief = [i for i, m in counts.items() if 1 <= m <= limit]
    return (brief[0], 1.0 - counts[brief[0]] / n, "vision:brief") if len(brief) == 1 else None


def _runs(flags: Sequence[bool]) -> int:
    return sum(1 for j, f in enumerate(flags) if f and (j == 0 or not flags[j - 1]))


def _first(facts: Sequence[FrameFacts], options: Sequence[str]) -> Evidence | None:
    if len(facts) < 2:
        return None
    seen = {i: [c in f.area for f in facts] for i, c in _colour_options(options).items()}
    present = {i: flags for i, flags in seen.items() if any(flags)}
    if len(present) < 2:
        return None
    extra = sum(_runs(flags) for flags in present.values()) - len(present)
    starts = sorted((flags.index(True), i) for i, flags in present.items())
    if starts[0][0] == starts[1][0]:
        return None
    return starts[0][1], max(0.0, 1.0 - extra / 2.0), "vision:first"


def _move(facts: Sequence[FrameFacts], question: str, options: Sequence[str]) -> Evidence | None:
    colour = next((w for w in _words(question) if w in COLOUR_RGB), None)
    if colour is None:
        return None
    points = [f.centroid[colour] for f in facts if colour in f.centroid]
    if len(points) < 3:
        return None
    dx = [b[0] - a[0] for a, b in itertools.pairwise(points)]
    dy = [b[1] - a[1] for a, b in itertools.pairwise(points)]
    horizontal = abs(sum(dx)) >= abs(sum(dy))
    steps = dx if horizontal else dy
    moving = [s for s in steps if abs(s) > 1e-3]
    if not moving:
        return None
    agree = abs(sum(1 if s > 0 else -1 for s in moving)) / len(moving)
    total = sum(steps)
    word = ("right" if total > 0 else "left") if horizontal else ("down" if total > 0 else "up")
    match = [i for i, o in enumerate(options) if o.strip().lower() == word]
    if not match:
        return None
    return match[0], min(1.0, max(0.0, (agree - 0.6) / 0.3)), "vision:move"


def _corner(x: float, y: float) -> str:
    return f"{'top' if y < 0.5 else 'bottom'} {'left' if x < 0.5 else 'right'}"


def _mark(facts: Sequence[FrameFacts], options: Sequence[str]) -> Evidence | None:
    corners = [_corner(*f.mark) for f in facts if f.mark is not None]
    if not corners:
        return None
    best = max(set(corners), key=lambda c: (corners.count(c), c))
    match = [i for i, o in enumerate(options) if " ".join(_words(o)) == best]
    return (match[0], corners.count(best) / len(facts), "vision:mark") if match else None


def _dominant(facts: Sequence[FrameFacts], options: Sequence[str]) -> Evidence | None:
    colours = _colour_options(options)
    if not colours:
        return None
    mean = sorted(((sum(f.area.get(c, 0.0) for f in facts) / len(facts), i) for i, c in colours.items()),
                  reverse=True)
    best = mean[0][0]
    second = mean[1][0] if len(mean) > 1 else 0.0
    if best <= 0.0:
        return None
    ratio = best / second if second > 0 else math.inf
    return mean[0][1], min(1.0, max(0.0, (ratio - 1.2) / 1.8)), "vision:dominant"


def _vision(question: str, options: Sequence[str], facts: Sequence[FrameFacts]) -> Evidence | None:
    words = set(_words(question))
    if "flash" in words or "flashed" in words:
        return _brief(facts, options)
    if "first" in words:
        return _first(facts, options)
    if words & {"move", "moves", "moving"}:
        return _move(facts, question, options)
    if words & {"dot", "mark"}:
        return _mark(facts, options)
    return _dominant(facts, options)


def decide(prompt: str, images: Sequence[ImageRef]) -> Decision:
    """The engine's decision for a prompt and its images (raises ``ValueError`` when the prompt
    has no options or an image cannot be read)."""
    parsed = parse_prompt(prompt)
    options = parsed.options
    if len(options) < 2:
        raise ValueError("no lettered options (A. ..., B. ...) after 'Options:' in the prompt")
    found: list[Evidence] = [e for e in (_leak(parsed.question, options), _plausible(options)) if e]
    if images and parsed.question:
        facts = []
        for k, im in enumerate(images):
            try:
                facts.append(frame_facts(im))
            except Exception as e:  # PIL raises more than OSError for a broken file; one request fails
                what = str(im) if not isinstance(im, bytes | bytearray) else f"{len(im)} bytes"
                raise ValueError(f"image {k} ({what}): not a readable image ({type(e).__name__})") from None
        seen = _vision(parsed.question, options, facts)
        if seen:
            found.append(seen)
    best = max(found, key=lambda e: e[1], default=None)
    if best is None or best[1] < MIN_CONFIDENCE:
        return Decision(len(options), None, 0.0, best[2] if best else "none")
    return Decision(len(options), best[0], best[1], best[2])


class ReferenceEngine:
    """The rule-based reference engine (see the module docstring)."""

    name = "reference"
    concurrent_calls = 4  # pure Python over small frames: a few calls at once behind a server
    # Rules read any prompt: no context limit of their own (the sweep's context check asks for one).
    max_model_len = 1 << 20

    def __init__(self, name: str = DEFAULT_NAME) -> None:
        self.model_name = name if name.startswith("reference") else f"reference:{name}"
        self.revision: str | None = RULES_VERSION

    @classmethod
    def from_options(cls, o: EngineOptions) -> ReferenceEngine:
        """Nothing to load: a given served name only labels the rows (always ``reference:...``)."""
        return cls(o.served_name or DEFAULT_NAME)

    def served_id(self, name: str) -> str:
        """Rule-based answers are always labelled as such in a served model id."""
        return name if "reference" in name else f"reference:{name}"

    def count_tokens(self, req: GenerateRequest) -> int:
        return estimate_tokens((req.system or "") + req.prompt + (req.assistant_prefix or ""), req.images)

    def _decide(self, request_id: str, prompt: str, images: Sequence[ImageRef]) -> Decision | Failure:
        try:
            return decide(prompt, images)
        except ValueError as e:
            return Failure(request_id, "bad_request", f"reference engine: {e}", status=400)

    def _answer(self, request_id: str, prompt: str, images: Sequence[ImageRef]
                ) -> tuple[dict[str, float], str] | Failure:
        """The letters' log-probs and the letter a reply names (subclasses change only this)."""
        d = self._decide(request_id, prompt, images)
        if isinstance(d, Failure):
            return d
        return d.letter_logprobs(), LETTERS[d.answer_index]

    def _score_one(self, req: ScoreRequest) -> LetterScores | Failure:
        t0 = time.perf_counter()
        answer = self._answer(req.request_id, req.prompt, req.images)
        if isinstance(answer, Failure):
            return answer
        top = top_list(answer[0], req.top_logprobs)
        return LetterScores(req.request_id, top, str(top[0]["token"]),
                            estimate_tokens(req.prompt + req.assistant_prefix, req.images),
                            round(time.perf_counter() - t0, 6), self.model_name)

    def _generate_one(self, req: GenerateRequest) -> Generation | Failure:
        t0 = time.perf_counter()
        answer = self._answer(req.request_id, req.prompt, req.images)
        if isinstance(answer, Failure):
            return answer
        letter = answer[1]
        text = f" {letter}" if (req.assistant_prefix or "").rstrip().endswith("Answer:") else f"Answer: {letter}"
        tokens = estimate_tokens((req.system or "") + req.prompt + (req.assistant_prefix or ""), req.images)
        return Generation(req.request_id, text, tokens, 3, round(time.perf_counter() - t0, 6), self.model_name)

    async def score(self, reqs: Sequence[ScoreRequest]) -> list[LetterScores | Failure]:
        """Letters' log-probs per request (frames are measured in a worker thread)."""
        return await asyncio.to_thread(lambda: [self._score_one(r) for r in reqs])

    async def generate(self, reqs: Sequence[GenerateRequest]) -> list[Generation | Failure]:
        """``"Answer: X"`` per request."""
        return await asyncio.to_thread(lambda: [self._generate_one(r) for r in reqs])

    async def aclose(self) -> None:
        """Nothing to release."""
