"""The ``scripted`` engine: answers from a rules file, so tests know what a "model" will say.

It stands in for a judge or a VLM behind ``benchcheck serve --engine scripted`` and for a GPU in
the client benchmark, so it is cheap: a regex search per request and a few dict operations.
It is labelled as scripted wherever it appears: its ``model_name`` starts with ``scripted``, and
the server adds the same label to the served model id and ``system_fingerprint``.

Rules file: a JSON list of rules; the first rule whose ``match`` regex is found (``re.search``) in
the last user message's text decides::

    [
      {"match": "capital of France", "reply": "Paris"},
      {"match": "Question: .*sky",   "letters": {"A": -0.1, "B": -2.5, " C": -4.0}},
      {"match": "overloaded",        "error": {"status": 429, "message": "try later"}, "times": 2},
      {"match": "slow",              "delay_s": 3.0},
      {"match": "",                  "reply": "I do not know", "letters": {"A": -1.4, "B": -1.4}}
    ]

Keys of a rule (``match`` and at least one action are required; unknown keys are an error):

- ``match``: a Python regex; ``ignore_case`` (bool) makes it case-insensitive.
- ``reply``: the text ``generate`` returns (cut to about ``4 * max_tokens`` characters). Scoring a
  rule without ``letters`` puts the whole reply in the top list as one token with log-prob
  ``log 0.9``.
- ``letters``: token -> log-prob (<= 0) for ``score``; the top list is filled up to the requested
  ``top_logprobs`` with non-letter tokens ranked below every scripted token (their total
  probability at most the mass left), sorted, so it has the shape of vLLM's ``top_logprobs``.
  ``generate`` on such a rule replies the best token.
- ``error``: ``{"status": int, "message": str}``: the request fails with that HTTP status
  (a 400 mentioning "maximum context length" is a context-too-long failure).
- ``delay_s``: sleep this long first (a slow or hanging VLM). A rule with only ``delay_s``
  delays and then lets the following rules decide.
- ``times``: the rule applies to its first N matching requests only (then it is skipped), e.g. a
  judge that answers 429 twice and then succeeds.
- ``images``: the rule matches only requests whose frames fit, ``{"count_min": 100,
  "count_max": 600, "short_min": 300, "short_max": 480}`` (any subset): the number of images and
  the smallest short side among them (a request without images has short side 0). The sweep's
  analysis tests use it to script a "model" whose accuracy depends only on resolution or only
  on the number of frames.

No matching rule is a ``bad_request`` failure naming the text, never a made-up answer. An image
whose size cannot be read fails its own request (400 naming the image: its index and size); the
other requests of the batch are answered. Behind ``benchcheck serve`` each request is answered as
soon as it is ready (``score_each`` / ``generate_each``), so a ``delay_s`` holds up its own request only.
Prompt tokens are estimated (4 characters per token, one token per 32x32 pixels of each image plus
2), and a prompt over ``max_model_len`` fails as context-too-long, like vLLM.
"""

from __future__ import annotations

import asyncio
import io
import json
import math
import re
import time
from collections.abc import Coroutine, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from benchcheck.engines.base import (
    Failure,
    FailureKind,
    GenerateRequest,
    Generation,
    ImageRef,
    LetterScores,
    ScoreRequest,
)
from benchcheck.engines.openai.wire import is_context_too_long
from benchcheck.engines.options import EngineOptionError, EngineOptions

_RULE_KEYS = {"match", "ignore_case", "reply", "letters", "error", "delay_s", "times", "images"}
_IMAGE_KEYS = ("count_min", "count_max", "short_min", "short_max")
_ACTIONS = ("reply", "letters", "error", "delay_s")
# Non-letter filler tokens (none matches the protocol's letter regex) that pad the top list.
_FILLERS = (
    "\n", " the", " answer", " option", " is", "the", ".", ",", " video", " (", " none", " correct",
    " in", " based", "answer", " of", " a", ":", " to", " it", " this", " that", " and", " which",
)
_REPLY_LOGPROB = math.log(0.9)


class RulesError(ValueError):
    """A rules file that cannot be used; the message names the file and the rule."""


@dataclass(slots=True)
class Rule:
    """One parsed rule (see the module docstring)."""

    pattern: re.Pattern[str]
    reply: str | None
    letters: dict[str, float] | None
    error: tuple[int, str] | None
    delay_s: float
    times: int | None
    used: int = 0
    images: dict[str, int] | None = None

    def fits(self, sizes: Sequence[tuple[int, int]]) -> bool:
        """Whether the request's frames (their sizes) satisfy the rule's ``images`` bounds."""
        if not self.images:
            return True
        b = self.images
        n = len(sizes)
        if n < b.get("count_min", 0) or n > b.get("count_max", n):
            return False
        if "short_min" not in b and "short_max" not in b:
            return True
        short = min((min(wh) for wh in sizes), default=0)
        return b.get("short_min", 0) <= short <= b.get("short_max", short)

    @property
    def delay_only(self) -> bool:
        return self.reply is None and self.letters is None and self.error is None


def _parse_rule(raw: object, where: str) -> Rule:
    if not isinstance(raw, Mapping):
        raise RulesError(f"{where}: a rule must be a JSON object")
    unknown = set(raw) - _RULE_KEYS
    if unknown:
        raise RulesError(f"{where}: unknown key(s) {sorted(unknown)}; allowed: {sorted(_RULE_KEYS)}")
    if not isinstance(raw.get("match"), str):
        raise RulesError(f"{where}: 'match' (a regex string) is required")
    if not any(k in raw for k in _ACTIONS):
        raise RulesError(f"{where}: needs one of {', '.join(_ACTIONS)}")
    try:
        pattern = re.compile(raw["match"], re.IGNORECASE if raw.get("ignore_case") else 0)
    except re.error as e:
        raise RulesError(f"{where}: bad regex {raw['match']!r}: {e}") from None
    reply = raw.get("reply")
    if reply is not None and not isinstance(reply, str):
        raise RulesError(f"{where}: 'reply' must be a string")
    letters = raw.get("letters")
    if letters is not None:
        if not isinstance(letters, Mapping) or not letters:
            raise RulesError(f"{where}: 'letters' must be a non-empty object token -> log-prob")
        for tok, lp in letters.items():
            if not isinstance(lp, int | float) or lp > 0:
                raise RulesError(f"{where}: log-prob of {tok!r} must be a number <= 0")
        letters = {str(t): float(v) for t, v in letters.items()}
    error = raw.get("error")
    if error is not None:
        if not (isinstance(error, Mapping) and isinstance(error.get("status"), int) and 400 <= error["status"] < 600):
            raise RulesError(f"{where}: 'error' must be {{\"status\": 4xx|5xx, \"message\": str}}")
        error = (int(error["status"]), str(error.get("message", "scripted error")))
    delay = raw.get("delay_s", 0.0)
    if not isinstance(delay, int | float) or delay < 0:
        raise RulesError(f"{where}: 'delay_s' must be a number >= 0")
    times = raw.get("times")
    if times is not None and (not isinstance(times, int) or times < 1):
        raise RulesError(f"{where}: 'times' must be an integer >= 1")
    images = raw.get("images")
    if images is not None:
        if (not isinstance(images, Mapping) or not images or set(images) - set(_IMAGE_KEYS)
                or not all(isinstance(v, int) and v >= 0 for v in images.values())):
            raise RulesError(f"{where}: 'images' must be an object of {', '.join(_IMAGE_KEYS)} -> integer >= 0")
        images = {str(k): int(v) for k, v in images.items()}
    return Rule(pattern, reply, letters, error, float(delay), times, images=images)


def load_rules(rules: str | Path | Sequence[Mapping[str, Any]]) -> list[Rule]:
    """Rules from a JSON file (path) or from already-parsed rule objects."""
    where = "rules"
    if isinstance(rules, str | Path):
        where = str(rules)
        try:
            raw = json.loads(Path(rules).read_text(encoding="utf-8"))
        except (OSError, ValueError) as e:
            raise RulesError(f"{where}: cannot read a JSON rules list: {e}") from None
    else:
        raw = list(rules)
    if not isinstance(raw, list) or not raw:
        raise RulesError(f"{where}: must be a non-empty JSON list of rules")
    return [_parse_rule(r, f"{where} rule {i}") for i, r in enumerate(raw)]


def top_list(scores: Mapping[str, float], n: int) -> list[dict[str, float | str]]:
    """An OpenAI-shaped top-n list holding ``scores`` and non-letter fillers for the rest of the
    probability mass, sorted by log-prob (highest first)."""
    entries: dict[str, float] = dict(scores)
    rest = 1.0 - sum(math.exp(v) for v in scores.values())
    floor = min(scores.values(), default=0.0)
    fillers = (f for f in _FILLERS if f not in entries)
    for i, tok in zip(range(max(0, n - len(entries))), fillers, strict=False):
        # Fillers rank below every scripted token; halving shares keep the total mass at most 1.
        below = floor - 1.0 - 0.1 * i
        entries[tok] = min(below, math.log(rest) - (i + 1) * math.log(2.0)) if rest > 1e-12 else below
    ranked = sorted(entries.items(), key=lambda kv: -kv[1])[:n]
    return [{"token": t, "logprob": v} for t, v in ranked]


_SOF_MARKERS = frozenset(range(0xC0, 0xD0)) - {0xC4, 0xC8, 0xCC}  # start-of-frame (not DHT/JPG/DAC)


def jpeg_size(data: bytes) -> tuple[int, int] | None:
    """(width, height) from a JPEG's start-of-frame segment; None if ``data`` is not a JPEG
    whose header can be walked (a few dozen bytes read, far cheaper than opening the image)."""
    if not data.startswith(b"\xff\xd8"):
        return None
    i, n = 2, len(data)
    while i + 9 <= n:
        if data[i] != 0xFF:
            return None
        marker = data[i + 1]
        if marker == 0xFF:  # fill byte
            i += 1
            continue
        if marker in _SOF_MARKERS:
            return int.from_bytes(data[i + 7 : i + 9], "big"), int.from_bytes(data[i + 5 : i + 7], "big")
        i += 2 + int.from_bytes(data[i + 2 : i + 4], "big")
    return None


def _image_size(image: ImageRef) -> tuple[int, int]:
    data = image.read_bytes() if isinstance(image, Path) else image
    size = jpeg_size(data)
    if size is None:
        from PIL import Image

        with Image.open(io.BytesIO(data)) as im:  # other formats: the header only, no decoding
            size = im.size
    return int(size[0]), int(size[1])


class UnreadableImage(ValueError):
    """An image of a request whose size cannot be read; the message names it (one line)."""


def image_sizes(images: Sequence[ImageRef]) -> list[tuple[int, int]]:
    """(width, height) of each image; an unreadable one raises :class:`UnreadableImage` naming it
    (its index in the request and its size), whatever PIL raised."""
    sizes = []
    for k, image in enumerate(images):
        try:
            sizes.append(_image_size(image))
        except Exception as e:  # PIL raises more than OSError for a broken header
            what = str(image) if isinstance(image, Path) else f"{len(image)} bytes"
            raise UnreadableImage(f"image {k} ({what}): not a readable image ({type(e).__name__})") from None
    return sizes


def _size_tokens(size: tuple[int, int]) -> int:
    return math.ceil(size[0] / 32) * math.ceil(size[1] / 32) + 2


def estimate_tokens(text: str, images: Sequence[ImageRef] = (), sizes: Sequence[tuple[int, int]] | None = None) -> int:
    """The scripted engine's token count: 4 characters per token, 32x32 pixels per image token
    (``sizes``: the images' sizes when already read)."""
    sizes = image_sizes(images) if sizes is None else sizes
    return (len(text) + 3) // 4 + sum(_size_tokens(wh) for wh in sizes)


def _failure_kind(status: int, message: str) -> FailureKind:
    if is_context_too_long(status, message):
        return "context_too_long"
    return "bad_request" if status < 500 and status != 429 else "http"


class ScriptedEngine:
    """An engine whose answers come from a rules file (see the module docstring)."""

    name = "scripted"

    def __init__(
        self,
        rules: str | Path | Sequence[Mapping[str, Any]],
        name: str = "scripted",
        max_model_len: int = 65536,
    ) -> None:
        self.rules = load_rules(rules)
        self.model_name = name if name.startswith("scripted") else f"scripted:{name}"
        self.revision: str | None = None
        self.max_model_len = max_model_len

    concurrent_calls = 64  # answers cost nothing; a delay rule must not hold up other requests

    @classmethod
    def from_options(cls, o: EngineOptions) -> ScriptedEngine:
        if not o.rules:
            raise EngineOptionError("--engine scripted needs --rules FILE")
        return cls(o.rules, name=o.served_name or "scripted", max_model_len=o.max_model_len or 65536)

    def served_id(self, name: str) -> str:
        """Scripted answers are always labelled as such in a served model id."""
        return name if "scripted" in name else f"scripted:{name}"

    def count_tokens(self, req: GenerateRequest) -> int:
        return estimate_tokens((req.system or "") + req.prompt + (req.assistant_prefix or ""), req.images)

    def _pick(self, text: str, sizes: Sequence[tuple[int, int]] = ()) -> tuple[float, Rule | None]:
        """Total delay of the delay-only rules passed, and the deciding rule (or None)."""
        delay = 0.0
        for rule in self.rules:
            if (rule.times is not None and rule.used >= rule.times) or not rule.pattern.search(text):
                continue
            if not rule.fits(sizes):
                continue
            rule.used += 1
            delay += rule.delay_s
            if not rule.delay_only:
                return delay, rule
        return delay, None

    def _too_long(self, request_id: str, prompt_tokens: int, max_tokens: int) -> Failure | None:
        if prompt_tokens + max_tokens <= self.max_model_len:
            return None
        msg = (
            f"This model's maximum context length is {self.max_model_len} tokens. However, you requested "
            f"{prompt_tokens + max_tokens} tokens ({prompt_tokens} in the messages, {max_tokens} in the "
            "completion). Please reduce the length of the messages or completion."
        )
        return Failure(request_id, "context_too_long", msg, status=400)

    def _decide(self, request_id: str, text: str, rule: Rule | None) -> Failure | Rule:
        """The rule that answers, or the failure it (or the lack of a rule) stands for."""
        if rule is None:
            return Failure(request_id, "bad_request", f"scripted: no rule matches {text[:80]!r}", status=400)
        if rule.error is not None:
            status, message = rule.error
            return Failure(request_id, _failure_kind(status, message), message, status=status)
        return rule

    async def _answering_rule(self, request_id: str, prompt: str, images: Sequence[ImageRef], counted_text: str,
                              max_tokens: int) -> tuple[Rule, int] | Failure:
        """After the rule's delay: the rule that answers and the prompt's token count, or the failure
        (an unreadable image, no rule, a scripted error, a prompt over the context) that answers instead."""
        try:
            sizes = image_sizes(images)
        except UnreadableImage as e:  # this request only: the others of its batch are answered
            return Failure(request_id, "bad_request", f"scripted: {e}", status=400)
        delay, rule = self._pick(prompt, sizes)
        if delay:
            await asyncio.sleep(delay)
        decided = self._decide(request_id, prompt, rule)
        if isinstance(decided, Failure):
            return decided
        tokens = estimate_tokens(counted_text, sizes=sizes)
        too_long = self._too_long(request_id, tokens, max_tokens)
        return too_long if too_long is not None else (decided, tokens)

    async def _score_one(self, req: ScoreRequest, t0: float) -> LetterScores | Failure:
        answering = await self._answering_rule(req.request_id, req.prompt, req.images,
                                               req.prompt + req.assistant_prefix, 1)
        if isinstance(answering, Failure):
            return answering
        decided, tokens = answering
        scores = decided.letters if decided.letters is not None else {decided.reply or "": _REPLY_LOGPROB}
        top = top_list(scores, req.top_logprobs)
        return LetterScores(
            request_id=req.request_id,
            top=top,
            top1_token=str(top[0]["token"]),
            prompt_tokens=tokens,
            latency_s=round(time.perf_counter() - t0, 6),
            model=self.model_name,
        )

    async def _generate_one(self, req: GenerateRequest, t0: float) -> Generation | Failure:
        answering = await self._answering_rule(req.request_id, req.prompt, req.images,
                                               (req.system or "") + req.prompt + (req.assistant_prefix or ""),
                                               req.max_tokens)
        if isinstance(answering, Failure):
            return answering
        decided, tokens = answering
        if decided.reply is not None:
            text = decided.reply[: 4 * req.max_tokens]
        else:
            text = max((decided.letters or {}).items(), key=lambda kv: kv[1])[0]
        return Generation(
            request_id=req.request_id,
            text=text,
            prompt_tokens=tokens,
            completion_tokens=max(1, (len(text) + 3) // 4),
            latency_s=round(time.perf_counter() - t0, 6),
            model=self.model_name,
        )

    def score_each(self, reqs: Sequence[ScoreRequest]) -> list[Coroutine[Any, Any, LetterScores | Failure]]:
        """One awaitable per request, so a server answers each as soon as it is ready: a ``delay_s``
        rule holds up its own request, not the others batched with it."""
        t0 = time.perf_counter()
        return [self._score_one(r, t0) for r in reqs]

    def generate_each(self, reqs: Sequence[GenerateRequest]) -> list[Coroutine[Any, Any, Generation | Failure]]:
        """As :meth:`score_each`, for replies."""
        t0 = time.perf_counter()
        return [self._generate_one(r, t0) for r in reqs]

    async def score(self, reqs: Sequence[ScoreRequest]) -> list[LetterScores | Failure]:
        """Letters' log-probs per request, from the first deciding rule."""
        return list(await asyncio.gather(*self.score_each(reqs)))

    async def generate(self, reqs: Sequence[GenerateRequest]) -> list[Generation | Failure]:
        """Reply texts per request, from the first deciding rule."""
        return list(await asyncio.gather(*self.generate_each(reqs)))

    async def aclose(self) -> None:
        """Nothing to release."""
