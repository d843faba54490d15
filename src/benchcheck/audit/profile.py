"""A shortcut profile per benchmark: what each condition adds, each with a bootstrap interval.

Accuracy of an item at a step is the share of its forwards whose pick is the gold letter (step 1:
of its four permutations). Steps run on the survivors of earlier steps, so paired gains are over
the items that have both rows, and every figure says how many items it rests on.

| figure | definition |
|---|---|
| blind gap | step 1 (question + options, no video) accuracy - chance (1/k) |
| options-only gap | step 4 (options only) accuracy - chance |
| visual gain 1 frame | step 2 (middle frame) - step 1, paired |
| visual gain 32 frames | step 6 (8B, 32 frames) - step 1, paired |
| order gain | step 3 (2B, 32 ordered) - step 5 (2B, 32 shuffled), paired |
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from benchcheck.audit.cells import cell
from benchcheck.audit.source import Forwards
from benchcheck.protocol import argmax_pos, gold_position

FIGURES: tuple[tuple[str, int, int | None], ...] = (
    ("blind_gap", 1, None),
    ("options_only_gap", 4, None),
    ("visual_gain_1", 2, 1),
    ("visual_gain_32", 6, 1),
    ("order_gain_32", 3, 5),
)


def accuracy(f: Forwards) -> float:
    return sum(argmax_pos(lp) == gold_position(p, f.answer) for p, lp in zip(f.perms, f.lps, strict=True)) / len(
        f.lps)


@dataclass(frozen=True, slots=True)
class Figure:
    bench: str
    name: str
    items: int
    value: float | None
    lo: float | None
    hi: float | None

    def record(self) -> dict[str, object]:
        return {"bench": self.bench, "figure": self.name, "items": self.items, "value": cell(self.value),
                "lo": cell(self.lo), "hi": cell(self.hi)}


def mean_interval(x: np.ndarray, boot: int, seed: int) -> tuple[float | None, float | None, float | None]:
    if len(x) == 0:
        return None, None, None
    rng = np.random.default_rng(seed)
    means = x[rng.integers(0, len(x), (boot, len(x)))].mean(axis=1)
    return float(x.mean()), float(np.quantile(means, 0.025)), float(np.quantile(means, 0.975))


def profile(by_step: dict[int, list[Forwards]], boot: int = 1000, seed: int = 0) -> list[Figure]:
    index = {s: {f.item_id: f for f in rows} for s, rows in by_step.items()}
    benches = sorted({f.bench for rows in by_step.values() for f in rows})
    out = []
    for bench in benches:
        for name, step, base in FIGURES:
            rows = [f for f in index.get(step, {}).values() if f.bench == bench]
            diffs: Sequence[float]
            if base is None:
                diffs = [accuracy(f) - 1.0 / f.k for f in rows]
            else:
                other = index.get(base, {})
                diffs = [accuracy(f) - accuracy(other[f.item_id]) for f in rows if f.item_id in other]
            v, lo, hi = mean_interval(np.array(diffs, dtype=float), boot, seed)
            out.append(Figure(bench, name, len(diffs), v, lo, hi))
    return out
