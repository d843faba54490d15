"""The answer letter from a generated reply: documented rules, an explicit ``unparsed``, no guess.

Rule set ``mc-text-v1``, tried in this order on the reply after cleaning (``<think>...</think>``
blocks, Markdown ``*``/`` ` `` emphasis and surrounding whitespace removed); the first rule that
finds exactly one letter decides:

1. ``bare_letter``: the whole reply is one letter, optionally bracketed or followed by ``.``
   ``:`` ``)``: ``B``, ``(C)``, ``D.``, ``[a]`` (a lower-case letter is accepted only here).
2. ``answer_phrase``: "answer"/"option"/"choice" then an upper-case letter: ``Answer: B``,
   ``The answer is D.``, ``The correct option is (C)``, ``Answer: (B) red``. Every such phrase
   in the reply must name the same letter.
3. ``leading_letter``: the reply starts with a delimited upper-case letter: ``B. red``,
   ``(C) the dog``, ``A) yes``, ``D: because...``.
4. ``paren_letter``: every bracketed capital ``(X)`` in the reply is the same letter.
5. ``option_text``: the reply names exactly one option's text (case-insensitive, on word
   boundaries; an option whose text lies inside another named option's text does not count).

A letter outside the presented options (``E`` of four) is ``unparsed`` (reason
``letter_out_of_range``); so is a reply where no rule finds exactly one letter
(``no_rule``) or where a rule finds two letters (``ambiguous``). ``unparsed`` counts as wrong and
is reported separately. Unlike VLMEvalKit, which picks a random option after three failed
extractions, nothing is ever guessed.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from benchcheck.protocol import LETTERS

RULESET = "mc-text-v1"
ParseStatus = Literal["ok", "unparsed"]

_THINK = re.compile(r"<think>.*?(</think>|$)", re.S | re.I)
_BARE = re.compile(r"^[\(\[]?([A-Za-z])[\)\]\.:]?$")
_PHRASE = re.compile(r"\b(?:answer|option|choice)\b(?:\s+is)?\s*[:\-]?\s*(?:option\s+)?[\(\[]?([A-Z])(?![A-Za-z])",
                     re.I)
_LEADING = re.compile(r"^[\(\[]?([A-Z])(?:[\)\]\.:]|\s*-)(?:\s|$)")
_PAREN = re.compile(r"[\(\[]([A-Z])[\)\]]")


@dataclass(frozen=True, slots=True)
class Parsed:
    """The parse of one reply: ``index`` of the chosen option (None when unparsed)."""

    status: ParseStatus
    index: int | None
    rule: str  # the rule that decided, or the reason it is unparsed

    @property
    def letter(self) -> str:
        return LETTERS[self.index] if self.index is not None else ""


def clean(text: str) -> str:
    return re.sub(r"[*`]", "", _THINK.sub("", text)).strip()


def _phrase_letters(text: str) -> set[str]:
    # The letter of a phrase must be upper case: "the answer is a dog" names no letter.
    out = set()
    for m in _PHRASE.finditer(text):
        start = m.start(1)
        if text[start].isupper():
            out.add(text[start])
    return out


def _words(s: str) -> str:
    return " ".join(re.findall(r"\w+", s.lower()))


def _option_text(text: str, options: Sequence[str]) -> list[int]:
    reply = f" {_words(text)} "
    named = [i for i, o in enumerate(options) if _words(o) and f" {_words(o)} " in reply]
    # "dark red" names "dark red", not also "red".
    return [i for i in named if not any(j != i and f" {_words(options[i])} " in f" {_words(options[j])} "
                                        for j in named)]


def _letter(letter: str, n: int, rule: str) -> Parsed:
    i = ord(letter.upper()) - 65
    return Parsed("ok", i, rule) if 0 <= i < n else Parsed("unparsed", None, "letter_out_of_range")


def parse_answer(reply: str, options: Sequence[str]) -> Parsed:
    """Apply the rule set (module doc) to a reply for an item with these option texts."""
    text = clean(reply)
    n = len(options)
    if not text:
        return Parsed("unparsed", None, "empty")
    m = _BARE.match(text)
    if m:
        return _letter(m.group(1), n, "bare_letter")
    phrase = _phrase_letters(text)
    if len(phrase) == 1:
        return _letter(phrase.pop(), n, "answer_phrase")
    if len(phrase) > 1:
        return Parsed("unparsed", None, "ambiguous")
    m = _LEADING.match(text)
    if m:
        return _letter(m.group(1), n, "leading_letter")
    parens = set(_PAREN.findall(text))
    if len(parens) == 1:
        return _letter(parens.pop(), n, "paren_letter")
    if len(parens) > 1:
        return Parsed("unparsed", None, "ambiguous")
    named = _option_text(text, options)
    if len(named) == 1:
        return Parsed("ok", named[0], "option_text")
    return Parsed("unparsed", None, "ambiguous" if named else "no_rule")
