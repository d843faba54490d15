"""``reference-prior``: the reference engine with a planted letter prior, guesses and noise.

The plain reference engine is flat when a request does not hold the answer, so it never removes
an item by chance and the audit has nothing to find. This engine behaves like a model that has
opinions it should not have, in a way the construction knows exactly, so the audit's estimates
can be checked against the truth (``demo.audit_truth``):

- **evidence**: the reference engine's decision (``reference.decide``): ``MAX_MARGIN * c`` nats
  for the option it sees;
- **a guess** where the reference engine is undecided: an option chosen by a hash of the
  question and the option's text (so unrelated to the gold answer, and the same option whatever
  the order), held with a strength up to :data:`GUESS_MAX` nats from a hash of the item's text;
- **noise**: every position's score moves by a normal draw of sd :data:`NOISE_SD` seeded by the
  whole prompt (re-asking in another order gives another draw);
- **the planted prior**: :data:`PRIOR` nats added to position A, always.

The letters' log-probabilities are the log-softmax of those scores over the letters, times
``LETTER_MASS``: so the recorded log-probs minus the planted prior are the scores without the
prior, up to a constant the margin and the pick ignore (what the ground-truth check replays).
Like the reference engine it is a program, not a model, and its name says so.
"""

from __future__ import annotations

import hashlib
import math
import random
from collections.abc import Sequence

from benchcheck.engines.base import Failure, ImageRef
from benchcheck.engines.options import EngineOptions
from benchcheck.engines.rules.reference import LETTER_MASS, MAX_MARGIN, ReferenceEngine, decide, parse_prompt
from benchcheck.protocol import LETTERS

PRIOR_VERSION = "planted-prior-v1"
DEFAULT_NAME = f"reference:{PRIOR_VERSION}"
PRIOR = 1.2  # nats added to position A: P(A) = 0.52 with four flat options
GUESS_MAX = 3.0  # a guess's strength is uniform in [0, GUESS_MAX] nats over items
NOISE_SD = 0.3  # nats per position per forward


def planted_prior(k: int) -> tuple[float, ...]:
    """The prior's addition to each of ``k`` positions' scores (A gets :data:`PRIOR`)."""
    return (PRIOR,) + (0.0,) * (k - 1)


def _unit(text: str) -> float:
    """A uniform number in [0, 1) from ``text`` (stable across runs and machines)."""
    return int.from_bytes(hashlib.sha256(text.encode()).digest()[:8], "big") / 2.0 ** 64


def _images_key(images: Sequence[ImageRef]) -> str:
    """What the images are (their bytes, or their paths), so two videos asked the same question draw
    different noise."""
    h = hashlib.sha1()
    for im in images:
        h.update(im if isinstance(im, bytes) else str(im).encode())
        h.update(b"\0")
    return h.hexdigest()


def content_scores(prompt: str, images: Sequence[ImageRef]) -> tuple[list[float], str]:
    """Per shown position, the score without the prior (evidence or a guess, plus noise), and
    which it was ("evidence:<rule>" or "guess")."""
    d = decide(prompt, images)
    parsed = parse_prompt(prompt)
    k = len(parsed.options)
    scores = [0.0] * k
    if d.pick is not None:
        scores[d.pick] = MAX_MARGIN * d.confidence
        source = f"evidence:{d.rule}"
    else:
        q = parsed.question or ""
        pick = max(range(k), key=lambda i: (_unit(f"guess-option|{q}|{parsed.options[i]}"), -i))
        scores[pick] = GUESS_MAX * _unit(f"guess-strength|{q}|{'|'.join(sorted(parsed.options))}")
        source = "guess"
    rng = random.Random(f"noise|{prompt}|{_images_key(images)}")
    return [s + rng.gauss(0.0, NOISE_SD) for s in scores], source


def letter_logprobs(scores: Sequence[float]) -> dict[str, float]:
    """The letters' log-probs: log-softmax of scores + planted prior, scaled to LETTER_MASS."""
    total = [s + p for s, p in zip(scores, planted_prior(len(scores)), strict=True)]
    top = max(total)
    log_z = top + math.log(sum(math.exp(v - top) for v in total))
    return {LETTERS[i]: v - log_z + math.log(LETTER_MASS) for i, v in enumerate(total)}


class PriorReferenceEngine(ReferenceEngine):
    """The reference engine with a planted letter prior (see the module docstring)."""

    name = "reference-prior"

    def __init__(self, name: str = DEFAULT_NAME) -> None:
        super().__init__(name)
        self.revision = PRIOR_VERSION

    @classmethod
    def from_options(cls, o: EngineOptions) -> PriorReferenceEngine:
        return cls(o.served_name or DEFAULT_NAME)

    def _letters(self, request_id: str, prompt: str, images: Sequence[ImageRef]) -> dict[str, float] | Failure:
        try:
            scores, _ = content_scores(prompt, images)
        except ValueError as e:
            return Failure(request_id, "bad_request", f"reference-prior engine: {e}", status=400)
        return letter_logprobs(scores)

    def _answer(self, request_id: str, prompt: str, images: Sequence[ImageRef]
                ) -> tuple[dict[str, float], str] | Failure:
        lp = self._letters(request_id, prompt, images)
        if isinstance(lp, Failure):
            return lp
        return lp, max(lp, key=lambda x: (lp[x], -ord(x)))
