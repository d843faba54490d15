"""Exact letter scores: every letter variant's log-prob from the full softmax, not the top 20.

The protocol reads letters from the top-20 log-probs and floors a missing one at log(1e-6); a
margin built on the floor says nothing about the model. An engine that holds the whole softmax
row gathers the log-probs of every vocabulary token the protocol's regex accepts as a letter
(``"A"``, ``" A"``, ``"(A"``, ``"A."``, ...), and ``protocol.letter_logprobs`` merges them exactly
as it merges the top-20 variants (log-sum-exp per letter): that is ``lp_exact``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from benchcheck.protocol import token_letter


@dataclass(frozen=True, slots=True)
class LetterVariants:
    """The vocabulary ids that count as a letter, and each one's text as vLLM reports it."""

    ids: tuple[int, ...]
    texts: tuple[str, ...]


def letter_variants(tokenizer: Any, vocab_size: int | None = None) -> LetterVariants:
    """Every token id whose text, decoded on its own, matches the protocol's letter regex."""
    n = int(vocab_size if vocab_size is not None else len(tokenizer))
    texts = tokenizer.batch_decode([[i] for i in range(n)])
    keep = [(i, t) for i, t in enumerate(texts) if isinstance(t, str) and token_letter(t) is not None]
    return LetterVariants(tuple(i for i, _ in keep), tuple(t for _, t in keep))


def exact_entries(ids: Sequence[int], texts: Sequence[str],
                  logprobs: Sequence[float]) -> list[dict[str, float | str | int]]:
    """OpenAI-shaped entries of gathered log-probs (the shape ``protocol.letter_logprobs`` reads)."""
    return [{"token": t, "logprob": float(v), "token_id": int(i)}
            for i, t, v in zip(ids, texts, logprobs, strict=True)]
