"""Multiplicity and false discoveries: Benjamini-Hochberg over the cells, and the false-discovery curve
of the removals against a stricter margin threshold.

The curve: raising the threshold t above log 2 keeps the removals whose margin clears t (at step 1
with the hits condition too). The chance removals among them are estimated as the main estimate is
(``null.chance_estimate``), with each item's null gold distribution fixed at the protocol's
threshold: an item kept at log 2 adds ``(1 - h) p_i(t) / (1 - p_i)``, one removed at t adds ``h``
(``h = chance.blend(p_i)``), which a non-shortcut item does on average exactly ``p_i(t)``. The upper
bound is exact (``poisson_binomial.count_bounds``) with every item not removed at t counted as a
possible non-shortcut (a shortcut between log 2 and t included), so it only errs upwards. The share
of chance removals among the kept removals is their false-discovery proportion; ``target`` picks the
smallest threshold whose upper bound is at most the target.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np

from benchcheck.audit.chance import BLEND_FROM
from benchcheck.audit.poisson_binomial import CERTAIN, count_bounds
from benchcheck.audit.rule import group_decisions
from benchcheck.protocol import LOG2
from benchcheck.stats.source import Forwards

FDR_THRESHOLDS = (LOG2, *(round(0.1 * i, 1) for i in range(7, 41)))  # log 2 .. 4 nats
ALL = "*"


def bh_adjust(p: Sequence[float]) -> list[float]:
    """Benjamini-Hochberg adjusted p-values (a cell is called at level a when its value <= a)."""
    m = len(p)
    if m == 0:
        return []
    order = np.argsort(p)
    ranked = np.asarray(p, dtype=np.float64)[order] * m / np.arange(1, m + 1)
    adj = np.minimum.accumulate(ranked[::-1])[::-1]
    out = np.empty(m)
    out[order] = np.minimum(adj, 1.0)
    return [float(v) for v in out]


@dataclass(frozen=True, slots=True)
class CurveItem:
    """One item-step as the curve needs it: its null gold distribution, whether it was removed at
    log 2, its gold, and the rows to redo the rule at another threshold."""

    forwards: Forwards
    gold_dist: np.ndarray
    p: float  # chance removal probability at log 2


@dataclass(frozen=True, slots=True)
class CurvePoint:
    bench: str  # ALL for every benchmark
    step: int | None  # None for every step
    threshold: float
    removed: int
    est_false: float
    est_false_hi: float

    @property
    def fdr(self) -> float | None:
        return min(1.0, self.est_false / self.removed) if self.removed else None

    @property
    def fdr_hi(self) -> float | None:
        return min(1.0, self.est_false_hi / self.removed) if self.removed else None

    def record(self) -> dict[str, object]:
        return {"bench": self.bench, "step": ALL if self.step is None else self.step,
                "threshold": round(self.threshold, 4), "removed": self.removed,
                "est_false": round(self.est_false, 2), "est_false_hi": round(self.est_false_hi, 2),
                "fdr": None if self.fdr is None else round(self.fdr, 4),
                "fdr_hi": None if self.fdr_hi is None else round(self.fdr_hi, 4)}


@dataclass(frozen=True, slots=True)
class _Batch:
    """The arrays every threshold of the curve needs (k padded to the largest with options that
    never remove)."""

    ok: np.ndarray  # (n, k) hits condition per possible gold
    mean: np.ndarray  # (n, k) mean margin per possible gold
    gold_dist: np.ndarray  # (n, k)
    p: np.ndarray  # chance removal probability at log 2
    removed: np.ndarray
    answer: np.ndarray


def _batch(items: Sequence[CurveItem]) -> _Batch:
    k = max((c.forwards.k for c in items), default=2)
    n = len(items)
    ok = np.zeros((n, k), dtype=bool)
    mean = np.full((n, k), -np.inf)
    dist = np.zeros((n, k))
    by_k: dict[int, list[int]] = defaultdict(list)
    for i, c in enumerate(items):
        by_k[c.forwards.k].append(i)
        dist[i, :c.forwards.k] = c.gold_dist
    for kk, idx in by_k.items():
        ok[idx, :kk], mean[idx, :kk] = group_decisions([items[i].forwards for i in idx])
    return _Batch(ok, mean, dist, np.array([c.p for c in items]), np.array([c.forwards.removed for c in items]),
                  np.array([c.forwards.answer for c in items], dtype=np.int64))


def _point(b: _Batch, threshold: float, bench: str, step: int | None, alpha: float) -> CurvePoint:
    n = len(b.p)
    if n == 0:
        return CurvePoint(bench, step, threshold, 0, 0.0, 0.0)
    table = b.ok & (b.mean > threshold)
    pt = np.clip((b.gold_dist * table).sum(axis=1), 0.0, 1.0)
    rt = table[np.arange(n), b.answer]
    h = np.clip((b.p - BLEND_FROM) / (1.0 - BLEND_FROM), 0.0, 1.0)
    kept = ~b.removed & (b.p < CERTAIN)
    est = float(((1.0 - h[kept]) * pt[kept] / (1.0 - b.p[kept])).sum() + h[rt].sum())
    _, hi = count_bounds(pt[~rt], pt[rt], alpha)
    return CurvePoint(bench, step, threshold, int(rt.sum()), min(est, float(hi)), float(hi))


def point(items: Sequence[CurveItem], threshold: float, bench: str = ALL, step: int | None = None,
          alpha: float = 0.025) -> CurvePoint:
    """The chance removals among the removals at ``threshold`` (module docstring)."""
    return _point(_batch(items), threshold, bench, step, alpha)


def curves(items: Iterable[tuple[str, int, CurveItem]], thresholds: Sequence[float] = FDR_THRESHOLDS
           ) -> list[CurvePoint]:
    """The curve per benchmark x step and over everything (bench ``*``, step None)."""
    cells: dict[tuple[str, int], list[CurveItem]] = defaultdict(list)
    for bench, step, c in items:
        cells[(bench, step)].append(c)
    everything = [c for rows in cells.values() for c in rows]
    whole = _batch(everything)
    out = [_point(whole, t, ALL, None, 0.025) for t in thresholds]
    for (bench, step), rows in sorted(cells.items()):
        b = _batch(rows)
        out += [_point(b, t, bench, step, 0.025) for t in thresholds]
    return out


@dataclass(frozen=True, slots=True)
class Target:
    bench: str
    step: int | None
    target: float
    threshold: float | None  # None: no threshold reaches the target
    removed_at_log2: int
    kept: int  # removals the threshold keeps
    est_false: float | None
    fdr_hi: float | None

    def record(self) -> dict[str, object]:
        return {"bench": self.bench, "step": ALL if self.step is None else self.step, "target_fdr": self.target,
                "threshold": None if self.threshold is None else round(self.threshold, 4),
                "removed_at_log2": self.removed_at_log2, "kept_removals": self.kept,
                "kept_share": round(self.kept / self.removed_at_log2, 4) if self.removed_at_log2 else None,
                "est_false": None if self.est_false is None else round(self.est_false, 2),
                "fdr_hi": None if self.fdr_hi is None else round(self.fdr_hi, 4)}

    def sentence(self) -> str:
        scope = "all benchmarks and steps" if self.bench == ALL else f"{self.bench} step {self.step}"
        if self.threshold is None:
            return (f"--target-fdr {self.target:g} ({scope}): no margin threshold up to "
                    f"{FDR_THRESHOLDS[-1]:g} nats has an upper bound <= {self.target:g}; nothing can be kept "
                    f"at that false-discovery rate.")
        return (f"--target-fdr {self.target:g} ({scope}): margin > {self.threshold:.3g} nats keeps {self.kept} of "
                f"the {self.removed_at_log2} removals, an estimated {self.est_false or 0.0:.1f} of them chance "
                f"(false-discovery upper bound {self.fdr_hi or 0.0:.3f}).")


def target(curve: Sequence[CurvePoint], goal: float) -> list[Target]:
    """Per scope of ``curve``, the smallest threshold whose upper bound is at most ``goal``."""
    scopes: dict[tuple[str, int | None], list[CurvePoint]] = defaultdict(list)
    for c in curve:
        scopes[(c.bench, c.step)].append(c)
    out = []
    for (bench, step), pts in scopes.items():
        pts = sorted(pts, key=lambda c: c.threshold)
        base = next((c.removed for c in pts if abs(c.threshold - LOG2) < 1e-9), pts[0].removed)
        hit = next((c for c in pts if c.fdr_hi is not None and c.fdr_hi <= goal), None)
        out.append(Target(bench, step, goal, None if hit is None else hit.threshold, base,
                          0 if hit is None else hit.removed, None if hit is None else hit.est_false,
                          None if hit is None else hit.fdr_hi))
    return out
