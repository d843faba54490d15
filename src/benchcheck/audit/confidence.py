"""How firmly each item's recorded decision stands (evidence beside it, never a new decision).

- Permutation steps (step 1): hits, the spread of the margins, and the probability that a fresh
  set of four permutations would give the other decision, by resampling the recorded forwards
  (the protocol's four and any extra ones) with replacement: all 4^4 draws of four when there
  are four, a seeded Monte Carlo beyond. ``confidence = 1 - flip_prob``.
- Single-forward steps: the decision's distance from flipping (for a removal the smaller of the
  margin's excess over log 2 and the gold letter's lead over the next letter; for a kept item the
  larger of the two deficits) against the noise of re-asking with the options permuted: the
  pooled within-item spread of the margins over permutations (the item's own extra permutations
  when recorded, else the same model's step-1 permutations). ``confidence = Phi(distance / sd)``.
"""

from __future__ import annotations

import functools
import itertools
import math
import random
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from benchcheck.audit.cells import cell
from benchcheck.audit.source import Forwards
from benchcheck.protocol import LOG2, MIN_PERM_HITS, N_PERM, argmax_pos, gold_position, margin_of

MC_DRAWS = 2000
EXACT_UP_TO = 6  # pools of at most this many forwards are resampled exhaustively (6^4 = 1296)


@dataclass(frozen=True, slots=True)
class Confidence:
    item_id: str
    bench: str
    step: int
    removed: bool
    confidence: float | None
    flip_prob: float | None
    hits: int | None
    margin: float
    margin_sd: float | None
    distance: float | None
    noise_sd: float | None
    method: str

    def record(self) -> dict[str, object]:
        return {"item_id": self.item_id, "bench": self.bench, "step": self.step, "removed": self.removed,
                "confidence": cell(self.confidence), "flip_prob": cell(self.flip_prob), "hits": self.hits,
                "margin": cell(self.margin), "margin_sd": cell(self.margin_sd), "distance": cell(self.distance),
                "noise_sd": cell(self.noise_sd), "method": self.method}


def _mean(xs: Sequence[float]) -> float:
    return sum(xs) / len(xs)


def _var(xs: Sequence[float], ddof: int = 0) -> float:
    """Plain float variance (the statistics module's exact fractions cost 10x the whole audit)."""
    m = _mean(xs)
    return sum((x - m) ** 2 for x in xs) / (len(xs) - ddof)


def _margins(f: Forwards, extra: bool) -> list[float]:
    perms = f.perms + (f.extra_perms if extra else ())
    lps = f.lps + (f.extra_lps if extra else ())
    return [margin_of(lp, gold_position(p, f.answer)) for p, lp in zip(perms, lps, strict=True)]


@functools.lru_cache(maxsize=EXACT_UP_TO)
def _all_draws(pool: int) -> np.ndarray:
    return np.array(list(itertools.product(range(pool), repeat=N_PERM)), dtype=np.int64)


def _draws(pool: int, item_id: str, seed: int) -> np.ndarray:
    """Index draws of N_PERM forwards from a pool: every draw when small, else seeded Monte Carlo."""
    if pool <= EXACT_UP_TO:
        return _all_draws(pool)
    rng = np.random.default_rng(random.Random(f"{seed}|{item_id}").getrandbits(64))
    return rng.integers(0, pool, (MC_DRAWS, N_PERM))


def flip_probability(f: Forwards, seed: int = 0) -> float:
    """P(a fresh draw of N_PERM forwards from the recorded ones gives the other decision).

    A draw removes the item when >= MIN_PERM_HITS of its forwards pick the gold letter and its
    mean margin exceeds log 2 (``rule.removes``, evaluated on per-forward hits and margins)."""
    perms, lps = f.perms + f.extra_perms, f.lps + f.extra_lps
    hit = np.array([argmax_pos(lp) == gold_position(p, f.answer) for p, lp in zip(perms, lps, strict=True)])
    margin = np.array(_margins(f, extra=True))
    idx = _draws(len(hit), f.item_id, seed)
    removed = (hit[idx].sum(axis=1) >= MIN_PERM_HITS) & (margin[idx].mean(axis=1) > LOG2)
    return float(np.mean(removed != f.removed))


def perm_confidence(f: Forwards, seed: int = 0) -> Confidence:
    margins = _margins(f, extra=True)
    golds = [gold_position(p, f.answer) for p in f.perms]
    hits = sum(argmax_pos(lp) == g for lp, g in zip(f.lps, golds, strict=True))
    flip = flip_probability(f, seed)
    return Confidence(f.item_id, f.bench, f.step, f.removed, 1.0 - flip, flip, hits,
                      _mean(margins[: len(f.perms)]), math.sqrt(_var(margins)), None, None,
                      "resampled permutations" + (f" (+{len(f.extra_perms)} extra)" if f.extra_perms else ""))


def distance_to_flip(lp: Sequence[float], gold: int, threshold: float = LOG2) -> float:
    """How far the single-forward decision is from flipping, in nats (>= 0 on its own side)."""
    margin = margin_of(lp, gold)
    best_other = max(v for i, v in enumerate(lp) if i != gold)
    lead = lp[gold] - best_other  # > 0: the gold letter is the argmax
    removed = argmax_pos(lp) == gold and margin > threshold
    if removed:
        return min(margin - threshold, lead)
    return max(threshold - margin, -lead)


def pooled_sd(forwards: Sequence[Forwards]) -> float | None:
    """The root mean within-item variance of the margins over permutations (protocol + extra)."""
    vs = []
    for f in forwards:
        m = _margins(f, extra=True)
        if len(m) > 1:
            vs.append(_var(m, ddof=1))
    return math.sqrt(_mean(vs)) if vs else None


def single_confidence(f: Forwards, noise_sd: float | None, source: str) -> Confidence:
    lp, gold = f.lps[0], gold_position(f.perms[0], f.answer)
    own = pooled_sd([f]) if f.extra_perms else None
    sd = own if own is not None else noise_sd
    d = distance_to_flip(lp, gold)
    conf = None if sd is None else normal_cdf(d, sd)
    return Confidence(f.item_id, f.bench, f.step, f.removed, conf, None if conf is None else 1.0 - conf, None,
                      margin_of(lp, gold), None, d, sd, "own extra permutations" if own is not None else source)


def normal_cdf(d: float, sd: float) -> float:
    """Phi(d / sd); with no noise at all (a deterministic engine) re-asking never flips a decision
    that is off the threshold, and one on it is a coin."""
    if sd <= 0.0:
        return 1.0 if d > 0 else 0.5
    return 0.5 * (1.0 + math.erf(d / (sd * math.sqrt(2.0))))


def confidences(by_step: dict[int, list[Forwards]], seed: int = 0) -> list[Confidence]:
    """Every recorded decision's confidence. The noise of a single-forward step is the pooled
    margin spread of the same model's permutation rows (any model's when it has none)."""
    multi = [f for rows in by_step.values() for f in rows if f.multi]
    by_model: dict[str, float | None] = {}
    for m in {f.model for f in multi}:
        by_model[m] = pooled_sd([f for f in multi if f.model == m])
    anyone = pooled_sd(multi)
    out = []
    for step in sorted(by_step):
        for f in by_step[step]:
            if f.multi:
                out.append(perm_confidence(f, seed))
            elif by_model.get(f.model) is not None:
                out.append(single_confidence(f, by_model[f.model], "same model's step-1 permutations"))
            else:
                out.append(single_confidence(f, anyone, "another model's step-1 permutations"))
    return out


def auc(positives: Sequence[float], negatives: Sequence[float]) -> float | None:
    """P(a positive scores above a negative), ties counted half (Mann-Whitney)."""
    if not positives or not negatives:
        return None
    wins = sum((p > n) + 0.5 * (p == n) for p in positives for n in negatives)
    return wins / (len(positives) * len(negatives))
