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
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from benchcheck.audit.rule import removal_tables, rule_text
from benchcheck.audit.source import Forwards
from benchcheck.screen.steps import DEFAULT_CHAIN

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


def item_tables(rows: Sequence[Forwards]) -> dict[str, np.ndarray]:
    """item_id -> which gold options the rule would remove it for (``rule.removal_tables``)."""
    by_k: dict[int, list[Forwards]] = defaultdict(list)
    for f in rows:
        by_k[f.k].append(f)
    out: dict[str, np.ndarray] = {}
    for group in by_k.values():
        for f, t in zip(group, _tables(group), strict=True):
            out[f.item_id] = t
    return out


def null_for(bench: str, step: int, rows: Sequence[Forwards], rounds: int = 1000, seed: int = 0,
             survived: Mapping[str, np.ndarray] | None = None,
             base_freq: Mapping[int, np.ndarray] | None = None) -> NullResult:
    """The permutation null of one benchmark x step.

    ``survived[item]`` marks the gold options for which the item would have passed every
    earlier step of the chain (it did pass them), ``base_freq[k]`` the benchmark's gold
    frequencies before any step. With them, an item's chance removal probability is conditioned
    on its survival: a model whose guesses repeat across steps has already had its lucky
    guesses removed, so a survivor's guess is less likely to be the gold than the benchmark's
    frequencies say (without it the estimate overstates the chance removals at later steps)."""
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
        base = base_freq.get(k, freq) if base_freq is not None else freq
        for f, t in zip(group, table.astype(float), strict=True):
            w = base * survived[f.item_id] if survived is not None and f.item_id in survived else freq
            item_p[f.item_id] = float(t @ w / w.sum()) if w.sum() > 0 else float(t @ freq)
        idx = np.arange(len(group))
        for r in range(rounds):
            counts[r] += int(table[idx, golds[rng.permutation(len(group))]].sum())
    n = len(rows)
    rates = counts / n if n else counts.astype(float)
    lo, hi = (float(np.quantile(rates, 0.025)), float(np.quantile(rates, 0.975))) if n else (0.0, 0.0)
    est, est_lo, est_hi = chance_removals([(item_p[f.item_id], f.removed) for f in rows])
    return NullResult(bench, step, n, sum(f.removed for f in rows), float(rates.mean()) if n else 0.0, lo, hi,
                      est, est_lo, est_hi, rounds, item_p)


def chance_removals(items: Sequence[tuple[float, bool]]) -> tuple[float, float, float]:
    """(estimate, lo, hi) of the chance removals among items given as (chance removal probability
    ``p_i``, removed): the Horvitz-Thompson sum over kept items of ``p_i / (1 - p_i)`` and its 95 %
    prediction interval (module docstring). Pooling benchmarks is passing all their items."""
    est, var = 0.0, 0.0
    for p_raw, removed in items:
        if not removed:
            p = min(p_raw, P_CAP)
            est += p / (1 - p)
            var += p / (1 - p) ** 2
    half = 1.96 * math.sqrt(var)
    return est, max(0.0, est - half), est + half


def nulls(by_step: dict[int, list[Forwards]], rounds: int = 1000, seed: int = 0,
          chain: Sequence[int] = DEFAULT_CHAIN) -> list[NullResult]:
    """Every benchmark x step's null; steps are taken in ``chain`` order (steps not in it after,
    by number), each item's chance removal probability conditioned on the earlier steps it passed."""
    order = sorted(by_step, key=lambda s: (chain.index(s) if s in chain else len(chain), s))
    survived: dict[tuple[str, str], np.ndarray] = {}  # (bench, item) -> gold options it would have passed
    base: dict[str, dict[int, np.ndarray]] = {}  # bench -> k -> gold frequencies at its first step
    out: dict[tuple[int, str], NullResult] = {}
    for step in order:
        groups: dict[str, list[Forwards]] = defaultdict(list)
        for f in by_step[step]:
            groups[f.bench].append(f)
        for bench in sorted(groups):
            rows = groups[bench]
            freq = base.setdefault(bench, {})
            for k in {f.k for f in rows} - set(freq):
                golds = [f.answer for f in rows if f.k == k]
                freq[k] = np.bincount(golds, minlength=k) / len(golds)
            alive = {f.item_id: survived[(bench, f.item_id)] for f in rows if (bench, f.item_id) in survived}
            out[(step, bench)] = null_for(bench, step, rows, rounds, seed, alive, freq)
            for iid, t in item_tables(rows).items():
                prev = survived.get((bench, iid))
                survived[(bench, iid)] = ~t if prev is None or prev.shape != t.shape else prev & ~t
    return [out[key] for key in sorted(out)]


def verdict(r: NullResult) -> str:
    """One sentence: how much of the observed removal chance explains."""
    if r.observed == 0:
        return "no removals"
    share = min(1.0, r.null_mean / r.observed_rate) if r.observed_rate else 1.0
    if r.observed_rate <= r.null_hi:
        return f"the null explains the removals (observed {r.observed_rate:.1%} within the null's {r.null_hi:.1%})"
    return f"{share:.0%} of the removal rate is what chance and letter preference give; excess {r.excess:+.1%}"

