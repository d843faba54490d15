"""Iterative Bias Pruning (TsT, arXiv 2511.04655): drop the items the probe finds easiest, in
rounds, until what is left is at chance for the probe; how many remain says how much of the
benchmark carries no learnable text pattern.

Each round refits the k-fold probe on the items left and removes the ``step`` share of them
with the highest out-of-fold gold probability (at least one). It stops when the out-of-fold
accuracy is no longer above chance (one-sided Poisson-binomial p > ``alpha``), when fewer than
``min_items`` would remain, or after ``max_rounds``.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
from numpy.typing import NDArray

from benchcheck.audit.poisson_binomial import EXACT_MAX, p_value
from benchcheck.probe.folds import group_folds
from benchcheck.probe.model import Design, accuracy, oof_probs
from benchcheck.stats.normal import norm_sf

IBP_STEP = 0.05
IBP_ALPHA = 0.05
IBP_MAX_ROUNDS = 40


@dataclass(frozen=True, slots=True)
class IbpRound:
    round: int
    items: int
    accuracy: float
    chance: float
    p_above_chance: float
    removed: int  # items removed after this round (0 on the last)


@dataclass(slots=True)
class IbpResult:
    rounds: list[IbpRound] = field(default_factory=list)
    removed_round: dict[int, int] = field(default_factory=dict)  # item index -> round it was pruned at

    @property
    def remaining(self) -> int:
        return self.rounds[-1].items if self.rounds else 0

    @property
    def at_chance(self) -> bool:
        return bool(self.rounds) and self.rounds[-1].p_above_chance > IBP_ALPHA


def above_chance_p(correct: int, k: NDArray[np.int64]) -> float:
    """P(at least ``correct`` right) when each item is a uniform guess among its options."""
    p = 1.0 / k
    if len(p) <= EXACT_MAX:
        return p_value(p, correct)
    mean, var = float(p.sum()), float((p * (1 - p)).sum())
    return float(norm_sf((correct - 0.5 - mean) / np.sqrt(max(var, 1e-12))))


def prune(design: Design, gold: NDArray[np.int64], groups: list[str], k_folds: int, seed: int = 0,
          step: float = IBP_STEP, alpha: float = IBP_ALPHA, min_items: int = 10,
          max_rounds: int = IBP_MAX_ROUNDS, first: NDArray[np.float64] | None = None) -> IbpResult:
    """Rounds of pruning; ``first`` reuses the full benchmark's out-of-fold probabilities."""
    res = IbpResult()
    alive = np.arange(design.n)
    for r in range(max_rounds + 1):
        sub = design.subset(alive)
        g = gold[alive]
        if r == 0 and first is not None:
            probs = first
        else:
            probs = oof_probs(sub, g, group_folds([groups[i] for i in alive], k_folds, seed), seed=seed)
        acc = accuracy(probs, g)
        correct = round(acc * len(g))
        p = above_chance_p(correct, sub.k)
        drop = max(1, round(step * len(alive)))
        stop = p > alpha or len(alive) - drop < min_items or r == max_rounds
        res.rounds.append(IbpRound(r, len(alive), acc, float((1.0 / sub.k).mean()), p, 0 if stop else drop))
        if stop:
            break
        easiest = np.argsort(-probs[np.arange(len(g)), g], kind="stable")[:drop]
        for i in alive[easiest]:
            res.removed_round[int(i)] = r
        alive = np.delete(alive, easiest)
    return res
