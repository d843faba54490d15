"""What a screening step said about each option of an item, from its recorded rows (read through
``audit.source``, the one reader of result rows): the pick and its margin in nats."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from benchcheck.stats.source import Forwards, read_forwards
from benchcheck.verdicts import ItemHashes

FLAG_STEPS = (3, 5, 6)  # the steps that see the most: 32 frames with the question (in order or shuffled)


@dataclass(frozen=True, slots=True)
class Pick:
    """One source's answer to one item: the option it favours and by how much (nats over the
    runner-up), and the probability-like score it gives the gold."""

    source: str
    option: int
    margin: float


def option_scores(f: Forwards) -> np.ndarray:
    """Each original option's log-prob averaged over the forwards (positions mapped back)."""
    k = f.k
    total = np.zeros(k)
    for perm, lp in zip(f.perms, f.lps, strict=True):
        for pos, opt in enumerate(perm):
            total[opt] += lp[pos]
    return total / len(f.perms)


def pick_of(source: str, scores: Sequence[float] | np.ndarray) -> Pick:
    s = np.asarray(scores, dtype=np.float64)
    order = np.argsort(-s, kind="stable")
    margin = float(s[order[0]] - s[order[1]]) if len(s) > 1 else 0.0
    return Pick(source, int(order[0]), margin)


def step_picks(results: str | Path, item_ids: Iterable[str] | None = None,
               steps: Sequence[int] | None = None, current: ItemHashes | None = None) -> dict[int, dict[str, Pick]]:
    """Per step, item id -> the step's pick (steps without rows are absent); ``current``: the
    items' fingerprints (a row of an item edited since is no evidence)."""
    by_step = read_forwards(results, item_ids, steps, current=current)
    return {s: {f.item_id: pick_of(f"step {s}", option_scores(f)) for f in rows} for s, rows in by_step.items()}
