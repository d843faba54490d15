"""A null for the removal rule, from the recorded log-probs alone (no new forwards).

The gold answers are permuted among the items of a benchmark (within items of the same number of
options, so every gold stays presentable) and the protocol's rule is applied again, many times.
Chance and the model's letter preference meet the benchmark's own gold distribution, and that is
all: the resulting removal rate is what the rule removes when nothing links the model's pick to
the item's answer.

From it, per benchmark x step:
- ``null_rate`` with a 95 % interval over the rounds, and the ``excess`` of the observed rate;
- ``est_false``: the expected number of chance removals among the items that are not shortcuts.
  Each item's chance removal probability ``p_i`` is exact (the marginal of the permutation:
  the benchmark's gold frequencies). A shortcut item is removed whatever its answer, so the
  kept items are non-shortcut items seen with probability ``1 - p_i``; the Horvitz-Thompson sum
  over kept items of ``p_i / (1 - p_i)`` estimates the non-shortcut items' removals, with the
  prediction variance ``sum p_i / (1 - p_i)^2`` of (estimate - realised count).
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from benchcheck.audit.rule import removal_tables, rule_text
from benchcheck.audit.source import Forwards

P_CAP = 0.95  # an item removed by chance almost whatever its answer carries no information


@dataclass(frozen=True, slots=True)
class NullResult:
    bench: str
    step: int
    n: int
    observed: int
    null_mean: float  # removal rate
    null_lo: float
    null_hi: float
    est_false: float  # expected chance removals among non-shortcut items (count)
    est_false_lo: float
    est_false_hi: float
    rounds: int
    item_p: dict[str, float]  # each item's chance removal probability

    @property
    def observed_rate(self) -> float:
        return self.observed / self.n if self.n else 0.0

    @property
    def excess(self) -> float:
        return self.observed_rate - self.null_mean

    def record(self) -> dict[str, object]:
        fdr = self.est_false / self.observed if self.observed else None
        return {"bench": self.bench, "step": self.step, "items": self.n, "removed": self.observed,
                "observed_rate": round(self.observed_rate, 4), "null_rate": round(self.null_mean, 4),
                "null_lo": round(self.null_lo, 4), "null_hi": round(self.null_hi, 4),
                "excess": round(self.excess, 4), "est_false_removals": round(self.est_false, 2),
                "est_false_lo": round(self.est_false_lo, 2), "est_false_hi": round(self.est_false_hi, 2),
                "est_false_share": round(fdr, 4) if fdr is not None else None,
                "rounds": self.rounds, "rule": rule_text()}


def _tables(group: Sequence[Forwards]) -> np.ndarray:
    """The removal table of items with the same k, batched by their number of forwards."""
    out = np.zeros((len(group), group[0].k), dtype=bool)
    by_n: dict[int, list[int]] = defaultdict(list)
    for i, f in enumerate(group):
        by_n[len(f.lps)].append(i)
    for idx in by_n.values():
        perms = np.array([group[i].perms for i in idx], dtype=np.int64)
        lps = np.array([group[i].lps for i in idx], dtype=np.float64)
        out[idx] = removal_tables(perms, lps)
    return out


def null_for(bench: str, step: int, rows: Sequence[Forwards], rounds: int = 1000, seed: int = 0) -> NullResult:
    """The permutation null of one benchmark x step."""
    rng = np.random.default_rng(seed)
    by_k: dict[int, list[Forwards]] = defaultdict(list)
    for f in rows:
        by_k[f.k].append(f)
    counts = np.zeros(rounds, dtype=np.int64)
    item_p: dict[str, float] = {}
    for k, group in by_k.items():
        table = _tables(group)  # (n, k)
        golds = np.array([f.answer for f in group], dtype=np.int64)
        freq = np.bincount(golds, minlength=k) / len(golds)
        for f, p in zip(group, table.astype(float) @ freq, strict=True):
            item_p[f.item_id] = float(p)
        idx = np.arange(len(group))
        for r in range(rounds):
            counts[r] += int(table[idx, golds[rng.permutation(len(group))]].sum())
    n = len(rows)
    rates = counts / n if n else counts.astype(float)
    lo, hi = (float(np.quantile(rates, 0.025)), float(np.quantile(rates, 0.975))) if n else (0.0, 0.0)
    est, var = 0.0, 0.0
    for f in rows:
        if not f.removed:
            p = min(item_p[f.item_id], P_CAP)
            est += p / (1 - p)
            var += p / (1 - p) ** 2
    half = 1.96 * math.sqrt(var)
    return NullResult(bench, step, n, sum(f.removed for f in rows), float(rates.mean()) if n else 0.0, lo, hi,
                      est, max(0.0, est - half), est + half, rounds, item_p)


def nulls(by_step: dict[int, list[Forwards]], rounds: int = 1000, seed: int = 0) -> list[NullResult]:
    out = []
    for step in sorted(by_step):
        groups: dict[str, list[Forwards]] = defaultdict(list)
        for f in by_step[step]:
            groups[f.bench].append(f)
        for bench in sorted(groups):
            out.append(null_for(bench, step, groups[bench], rounds, seed))
    return out


def verdict(r: NullResult) -> str:
    """One sentence: how much of the observed removal chance explains."""
    if r.observed == 0:
        return "no removals"
    share = min(1.0, r.null_mean / r.observed_rate) if r.observed_rate else 1.0
    if r.observed_rate <= r.null_hi:
        return f"the null explains the removals (observed {r.observed_rate:.1%} within the null's {r.null_hi:.1%})"
    return f"{share:.0%} of the removal rate is what chance and letter preference give; excess {r.excess:+.1%}"

