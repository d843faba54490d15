"""A shortcut profile per benchmark: what each condition adds, each with an interval clustered by video.

Accuracy of an item at a step is the share of its forwards whose pick is the gold letter (step 1:
of its four permutations). Steps run on the survivors of earlier steps, so paired gains are over
the items that have both rows, and every figure says how many items (and videos) it rests on.

| figure | definition |
|---|---|
| blind gap | step 1 (question + options, no video) accuracy - chance baseline |
| options-only gap | step 4 (options only) accuracy - chance baseline |
| visual gain 1 frame | step 2 (middle frame) - step 1, paired |
| visual gain 32 frames | step 6 (8B, 32 frames) - step 1, paired |
| order gain | step 3 (2B, 32 ordered) - step 5 (2B, 32 shuffled), paired |

**Chance baseline.** Not 1/k: a model that knows nothing still picks by its letter prior, and a
benchmark whose golds sit mostly at its favourite letter is "above 1/k" by chance. The baseline of
a forward is the probability that a content-free model picks the gold's position,
``q[gold position]``, with ``q_j = P(argmax_l (pi_l + s z_l) = j)``: ``pi`` the model x step
letter prior (``audit.prior``, fitted on non-gold letters), ``s`` its residual sd, ``z`` standard
normal (seeded Monte Carlo). An item's baseline is the mean over its forwards. Without a fitted
prior it is 1/k.

**Intervals**: mean +- t(df) x the CR2 standard error clustered by video (df: Bell-McCaffrey)
(``stats.cluster.mean_interval``), floored at the binomial standard error of the forwards' hits,
with the baseline's own variance added (the mean baseline over draws of the prior from its
uncertainty, ``LetterPrior.draws``), clipped to [-1, 1] (``FIGURE_RANGE``: every figure is a
difference of two shares); none with fewer than two videos.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from benchcheck.audit.prior import LetterPrior, PriorKey, estimate_priors
from benchcheck.protocol import argmax_pos, gold_position
from benchcheck.stats.cells import cell
from benchcheck.stats.cluster import mean_interval
from benchcheck.stats.source import Forwards

FIGURE_RANGE = (-1.0, 1.0)  # a difference of two shares (accuracy - accuracy or - baseline)
CHANCE_DRAWS = 20000
BASELINE_DRAWS = 40  # the fitted prior and draws of it, for the baseline's own variance

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


def chance_picks(prior: LetterPrior | None, k: int, seed: int = 0, draws: int = BASELINE_DRAWS) -> np.ndarray:
    """``q_j`` (docstring) at the fitted prior (row 0) and at ``draws - 1`` draws of it from its
    uncertainty (rows 1..): how often a model with the prior and no knowledge picks position j."""
    if prior is None or prior.noise_sd is None or not any(prior.identified):
        return np.full((1, k), 1.0 / k)
    z = np.random.default_rng(seed).standard_normal((CHANCE_DRAWS, k))
    out = np.zeros((draws, k))
    for i, pi in enumerate(prior.draws(draws, seed)):
        picks = (pi[None, :] + prior.noise_sd * z).argmax(axis=1)
        out[i] = np.bincount(picks, minlength=k) / CHANCE_DRAWS
    return out


def baseline(f: Forwards, q: np.ndarray) -> np.ndarray:
    """The item's baseline under each row of ``q`` (``chance_picks``)."""
    out: np.ndarray = q[:, [gold_position(p, f.answer) for p in f.perms]].mean(axis=1)
    return out


@dataclass(frozen=True, slots=True)
class Figure:
    bench: str
    name: str
    items: int
    value: float | None
    lo: float | None
    hi: float | None
    baseline: float | None = None  # the mean chance baseline (gaps only)
    videos: int = 0

    def record(self) -> dict[str, object]:
        return {"bench": self.bench, "figure": self.name, "items": self.items, "value": cell(self.value),
                "lo": cell(self.lo), "hi": cell(self.hi), "baseline": cell(self.baseline), "videos": self.videos,
                "interval": "t over videos (CR2)"}


def _floor(rows: Sequence[Forwards]) -> float:
    """The binomial standard error of the forwards' hits (Agresti-Coull centre)."""
    n = sum(len(f.lps) for f in rows)
    hits = sum(accuracy(f) * len(f.lps) for f in rows)
    p = (hits + 2) / (n + 4)
    return float(np.sqrt(p * (1 - p) / (n + 4)))


def profile(by_step: dict[int, list[Forwards]], boot: int = 1000, seed: int = 0,
            priors: dict[PriorKey, LetterPrior] | None = None) -> list[Figure]:
    """``boot`` is kept for callers; the intervals are analytic (module docstring)."""
    if priors is None:
        priors = estimate_priors([f for rows in by_step.values() for f in rows])
    chance: dict[PriorKey, np.ndarray] = {}
    index = {s: {f.item_id: f for f in rows} for s, rows in by_step.items()}
    benches = sorted({f.bench for rows in by_step.values() for f in rows})
    out = []
    for bench in benches:
        for name, step, base in FIGURES:
            rows = [f for f in index.get(step, {}).values() if f.bench == bench]
            diffs: list[float] = []
            videos: list[str] = []
            bases: list[np.ndarray] = []
            used: list[Forwards] = []
            for f in rows:
                if base is None:
                    key = (f.model, f.step, f.k)
                    if key not in chance:
                        chance[key] = chance_picks(priors.get(key), f.k, seed)
                    b = baseline(f, chance[key])
                    bases.append(b)
                    diffs.append(accuracy(f) - float(b[0]))
                elif f.item_id in index.get(base, {}):
                    diffs.append(accuracy(f) - accuracy(index[base][f.item_id]))
                    used.append(index[base][f.item_id])
                else:
                    continue
                videos.append(f.video or f.item_id)
                used.append(f)
            # the baseline's own variance: of the mean baseline over draws of the prior (one
            # model x step per figure; rows of different k are averaged over the draws they share)
            extra = 0.0
            if bases and min(len(b) for b in bases) > 1:
                depth = min(len(b) for b in bases)
                extra = float(np.var(np.mean([b[1:depth] for b in bases], axis=0), ddof=1))
            v, lo, hi = mean_interval(np.array(diffs, dtype=float), videos, _floor(used) if used else 0.0, extra,
                                      FIGURE_RANGE)
            out.append(Figure(bench, name, len(diffs), v, lo, hi,
                              float(np.mean([b[0] for b in bases])) if bases else None, len(set(videos))))
    return out
