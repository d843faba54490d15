"""The screening protocol (docs/PROTOCOL.md) as pure functions.

The public names and their behaviour match the reference library of the original runs (its first copy) so that
code written against it ports unchanged: same permutations for an item id, same letter parsing
and log-sum-exp merging, same margins and tie-breaks.
"""

from __future__ import annotations

import math
import random
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

SEED = 42
N_PERM = 4
LOG2 = math.log(2.0)
LP_FLOOR = math.log(1e-6)  # a presented letter absent from the top-20 log-probs
TOP_LOGPROBS = 20
MAX_OPTIONS = 26
LETTERS = tuple(chr(65 + i) for i in range(MAX_OPTIONS))
MIN_PERM_HITS = 3  # step 1: at least 3 of the 4 permutations must pick the gold letter
ASSISTANT_PREFIX = "Answer:"
# The JPEG quality of every frame shown to a model (steps and sweep conditions): a protocol number,
# here so the run spec (``spec.FrameSpec``) and the frame extractors (``video``) read one value.
JPEG_QUALITY = 85

PROMPT = "{intro}\n\nQuestion: {q}\nOptions:\n{opts}\nAnswer with the option letter only."
PROMPT_OPT_ONLY = "{intro}\n\nOptions:\n{opts}\nAnswer with the option letter only."

_TOKEN_LETTER = re.compile(r"^\s*[\(\[]?([A-Z])[\)\]\.:]?\s*$")
_SEQ_PREFIX = re.compile(r"^\s*[\(\[]?([A-Za-z])[\)\]\.:]\s*(.*)$", re.S)


def strip_sequential_prefix(opts: Sequence[object]) -> tuple[list[str], bool]:
    """Strip position letters when every option carries the letter of its position.

    >>> strip_sequential_prefix(["A. red", "(B) blue", "c: green"])
    (['red', 'blue', 'green'], True)
    >>> strip_sequential_prefix(["A. red", "C. blue"])
    (['A. red', 'C. blue'], False)
    """
    texts = []
    for i, o in enumerate(opts):
        m = _SEQ_PREFIX.match(str(o))
        if not m or m.group(1).upper() != chr(65 + i):
            return [str(o) for o in opts], False
        texts.append(m.group(2).strip())
    return texts, True


def render_options(texts: Sequence[str]) -> str:
    """One option per line as ``"A. text"``.

    >>> print(render_options(["red", "blue"]))
    A. red
    B. blue
    """
    return "\n".join(f"{LETTERS[i]}. {t}" for i, t in enumerate(texts))


def item_text(question: object, options: object) -> str:
    """Text compared by the step-0 duplicate check: question (whitespace collapsed) then options."""
    q = " ".join(str(question or "").split())
    if isinstance(options, list) and options:  # as the reference: only a list adds the options
        return q + "\n" + "\n".join(str(o) for o in options)
    return q


def permutations_for(item_id: str, k: int, n_perm: int = N_PERM, seed: int = SEED) -> list[list[int]]:
    """Step-1 option shuffles: ``perm[j]`` is the original option index shown at position j."""
    rng = random.Random(f"{seed}|{item_id}")
    return [rng.sample(range(k), k) for _ in range(n_perm)]


def shuffle_seed(item_id: str, seed: int = SEED) -> str:
    """The seed string of step 5's per-item frame shuffle."""
    return f"{seed}|shuffle|{item_id}"


def shuffled_order(item_id: str, n: int, seed: int = SEED) -> list[int]:
    """Step 5: the order in which the n grid frames are shown (a seeded permutation of range(n))."""
    return random.Random(shuffle_seed(item_id, seed)).sample(range(n), n)


def letter_logprobs(
    top_logprobs: Iterable[Mapping[str, object]] | None, k: int
) -> tuple[list[float], list[str], dict[str, list[str | None]]]:
    """Log-probs of the k presented letters from one position's top log-probs.

    ``top_logprobs`` is a list of ``{"token", "logprob"}`` dicts (the OpenAI / vLLM shape).
    Variants of a letter (``"A"``, ``" A"``, ``"(A"``, ``"A."``) are merged by log-sum-exp;
    a letter absent from the list gets ``log(1e-6)``.
    Returns ``(lp, missing_letters, variants_by_letter)``.
    """
    acc: dict[str, float] = {}
    variants: dict[str, list[str | None]] = {}
    for e in top_logprobs or []:
        tok = e.get("token")
        m = _TOKEN_LETTER.match(tok if isinstance(tok, str) else "")
        if not m:
            continue
        letter = m.group(1)
        lp_e = float(e["logprob"])  # type: ignore[arg-type]
        if letter not in acc:
            acc[letter] = lp_e
        else:
            a, b = acc[letter], lp_e
            acc[letter] = max(a, b) + math.log1p(math.exp(-abs(a - b)))
        variants.setdefault(letter, []).append(tok if isinstance(tok, str) else None)
    lp: list[float] = []
    missing: list[str] = []
    for i in range(k):
        letter = LETTERS[i]
        if letter in acc:
            lp.append(float(acc[letter]))
        else:
            lp.append(LP_FLOOR)
            missing.append(letter)
    return lp, missing, variants


def token_letter(token: str) -> str | None:
    """The letter a token counts for under the protocol's regex (``" A"``, ``"(B"``, ``"C."``), or None."""
    m = _TOKEN_LETTER.match(token)
    return m.group(1) if m else None


def margin_of(lp: Sequence[float], correct_pos: int) -> float:
    """``lp[gold] - mean(lp[others])`` (0 is subtracted when there are no others)."""
    others = [v for i, v in enumerate(lp) if i != correct_pos]
    return lp[correct_pos] - (sum(others) / len(others) if others else 0.0)


def argmax_pos(lp: Sequence[float]) -> int:
    """First index of the maximum."""
    return list(lp).index(max(lp))


def build_prompt(intro: str, question: str, options: Sequence[str]) -> str:
    """The question prompt of steps 1, 2, 3, 5, 6 and of the sweep."""
    return PROMPT.format(intro=intro, q=question, opts=render_options(options))


def build_prompt_options_only(intro: str, options: Sequence[str]) -> str:
    """Step 4's prompt: the options without the question."""
    return PROMPT_OPT_ONLY.format(intro=intro, opts=render_options(options))


@dataclass(frozen=True, slots=True)
class ForwardDecision:
    """The decision of one forward: the pick, the gold margin, and whether it removes the item."""

    pick: int
    margin: float
    correct: bool
    removed: bool


def decide_single(lp: Sequence[float], gold_pos: int) -> ForwardDecision:
    """Single-forward steps: removed when ``argmax == gold and margin > log 2``."""
    pick = argmax_pos(lp)
    margin = margin_of(lp, gold_pos)
    correct = pick == gold_pos
    return ForwardDecision(pick, margin, correct, correct and margin > LOG2)


@dataclass(frozen=True, slots=True)
class PermutationDecision:
    """Step 1 over its permutations: picks and margins per permutation, hits, mean margin."""

    picks: list[int]
    margins: list[float]
    hits: int
    mean_margin: float
    removed: bool


def gold_position(perm: Sequence[int], answer: int) -> int:
    """Where the gold option stands in a permutation's presented order."""
    return list(perm).index(answer)


def decide_permutations(lps: Sequence[Sequence[float]], gold_positions: Sequence[int]) -> PermutationDecision:
    """Step 1: removed when >= 3 permutations pick the gold letter and the mean margin > log 2."""
    picks = [argmax_pos(lp) for lp in lps]
    margins = [margin_of(lp, g) for lp, g in zip(lps, gold_positions, strict=True)]
    hits = sum(p == g for p, g in zip(picks, gold_positions, strict=True))
    mean_margin = sum(margins) / len(margins)
    return PermutationDecision(picks, margins, hits, mean_margin, hits >= MIN_PERM_HITS and mean_margin > LOG2)
