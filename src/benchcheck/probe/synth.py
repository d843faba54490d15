"""Constructions with a known truth, for the tests and ``benchmarks/probe_scale.py``.

* :func:`pattern_items`: a benchmark whose gold follows a planted text pattern (``longest``: the
  gold is the longest option; ``shared_word``: the gold shares a word with the question;
  ``position``: the gold sits at one position most of the time; ``none``: nothing, the gold drawn
  uniformly), several questions per video.
* :func:`flag_sources`: picks of several sources on items of which some have a wrong gold, each
  source seeing the true answer with a probability and guessing otherwise (with a letter prior).
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from benchcheck.items import Item
from benchcheck.probe.evidence import Pick, pick_of

NOUNS = ("cat", "dog", "car", "tree", "cup", "ball", "door", "lamp", "book", "chair", "bird", "boat", "kite", "hat",
         "shoe", "clock", "phone", "bike", "plate", "bottle", "table", "window", "bag", "horse", "train")
VERBS = ("holds", "moves", "opens", "drops", "lifts", "throws", "paints", "cleans", "watches", "turns")
COLOURS = ("red", "blue", "green", "yellow", "black", "white", "orange", "purple", "pink", "brown")
PLACES = ("on the table", "near the door", "by the window", "under the chair", "in the box", "behind the tree")
PATTERNS = ("longest", "shared_word", "position", "none")


def _option(rng: random.Random) -> str:
    n = rng.randint(1, 4)
    parts = [rng.choice(COLOURS), rng.choice(NOUNS)] + ([rng.choice(PLACES)] if n > 2 else [])
    return " ".join(parts[:max(1, min(n, 3))])


def pattern_items(pattern: str, n: int, seed: int = 0, bench: str = "Synth", per_video: int = 4,
                  k: int = 4, strength: float = 1.0) -> list[Item]:
    """``n`` items of ``k`` options; the pattern holds on a ``strength`` share of them."""
    if pattern not in PATTERNS:
        raise ValueError(f"unknown pattern {pattern!r}")
    rng = random.Random(f"{pattern}|{seed}|{bench}")
    items = []
    for i in range(n):
        subject = rng.choice(NOUNS)
        q = f"What does the person near the {subject} {rng.choice(VERBS)} {rng.choice(PLACES)}?"
        opts = list(dict.fromkeys(_option(rng) for _ in range(3 * k)))[:k]
        while len(opts) < k:
            opts.append(f"{rng.choice(COLOURS)} {rng.choice(NOUNS)} {len(opts)}")
        gold = rng.randrange(k)
        holds = rng.random() < strength
        if pattern == "longest" and holds:
            opts.sort(key=len)
            opts[-1] = opts[-1] + " " + rng.choice(PLACES)
            tail = opts.pop()
            opts.insert(gold, tail)
        elif pattern == "shared_word" and holds:
            opts = [o for o in opts if subject not in o.split()] or opts
            while len(opts) < k:
                opts.append(f"{rng.choice(COLOURS)} {rng.choice(NOUNS)} {len(opts)}x")
            opts[gold] = f"{rng.choice(COLOURS)} {subject}"
        elif pattern == "position" and holds:
            gold = 1
        if len(set(opts)) < k:
            opts = [f"{o} ({j})" for j, o in enumerate(opts)]
        items.append(Item(f"{bench}_{i}", bench, q, tuple(opts), gold, video_id=f"{bench}_v{i // per_video}"))
    return items


@dataclass(frozen=True, slots=True)
class FlagWorld:
    golds: dict[str, tuple[str, int]]
    truth: dict[str, int]
    wrong: set[str]
    sources: list[dict[str, Pick]]


def flag_sources(n: int, seed: int = 0, wrong_share: float = 0.05, see: Sequence[float] = (0.7, 0.6, 0.7, 0.3),
                 k: int = 4, boost: float = 3.0, noise: float = 0.5, prior: float = 0.8,
                 reach: float = 0.8) -> FlagWorld:
    """Items with a true answer; a ``wrong_share`` of them carry another option as gold. Source s
    sees the true answer with probability ``see[s]`` (its true option's score gets ``boost`` nats)
    and guesses otherwise; every score has normal noise and position A a ``prior``. A source has
    evidence on an item with probability ``reach`` (steps run on the survivors of earlier steps)."""
    rng = np.random.default_rng(seed)
    golds: dict[str, tuple[str, int]] = {}
    truth: dict[str, int] = {}
    wrong: set[str] = set()
    sources: list[dict[str, Pick]] = [{} for _ in see]
    for i in range(n):
        iid = f"f_{i}"
        t = int(rng.integers(k))
        g = t
        if rng.random() < wrong_share:
            g = int((t + rng.integers(1, k)) % k)
            wrong.add(iid)
        golds[iid] = ("Flags", g)
        truth[iid] = t
        for s, p_see in enumerate(see):
            if rng.random() > reach:
                continue
            scores = rng.normal(0.0, noise, k)
            scores[0] += prior
            if rng.random() < p_see:
                scores[t] += boost
            sources[s][iid] = pick_of(f"source {s}", scores)
    return FlagWorld(golds, truth, wrong, sources)
