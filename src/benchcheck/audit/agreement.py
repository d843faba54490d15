"""Agreement between two models' removals at one step: Cohen's kappa with an interval that can
never claim certainty from a handful of items.

- ``kappa``: Cohen's kappa of the two runs' removals over the items both decided (None when chance
  agreement is total: both runs remove all or nothing).
- ``kappa_lo`` / ``kappa_hi``: the 2.5 / 97.5 % points of kappa over the posterior of the 2 x 2
  table's cell probabilities, Dirichlet(counts + 1/2) (Jeffreys). Kappa of a probability table is
  defined whenever no cell is certain, which the posterior never is: one shared removal among
  5 items gives a wide interval, not [1, 1]. Items of one video are not independent: the counts
  are divided by the design effect of the agreement rate clustered by video (at least 1). The
  posterior shrinks kappa towards 0, so near-perfect agreement on few items put the sample kappa
  above the posterior's 97.5 % point (kappa 1 on 5 items: [0.01, 0.99]; at population kappa 0.9,
  in 64 % of 20-item and 41 % of 50-item tables); the interval is widened to hold the estimate it
  stands beside (``hull``), which can only raise its coverage.
- ``boot_lo`` / ``boot_hi``: the former percentile bootstrap over items, over the resamples where
  kappa is defined; ``boot_undefined`` counts the resamples where it is not (of ``boot``).
- ``pabak``: prevalence-adjusted bias-adjusted kappa, ``2 * agreement - 1``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from benchcheck.stats.cells import cell
from benchcheck.stats.cluster import design_effect
from benchcheck.stats.source import Forwards

POSTERIOR_DRAWS = 4000


def cohen_kappa(a: np.ndarray, b: np.ndarray) -> float | None:
    """Kappa of two boolean vectors; None when chance agreement is total (nothing to measure)."""
    if len(a) == 0:
        return None
    po = float(np.mean(a == b))
    pa, pb = float(np.mean(a)), float(np.mean(b))
    pe = pa * pb + (1 - pa) * (1 - pb)
    return None if pe >= 1.0 else (po - pe) / (1 - pe)


def table_kappa(p11: np.ndarray, p10: np.ndarray, p01: np.ndarray, p00: np.ndarray) -> np.ndarray:
    """Kappa of 2 x 2 probability tables (vectorised); nan where chance agreement is total."""
    pa, pb = p11 + p10, p11 + p01
    pe = pa * pb + (1 - pa) * (1 - pb)
    with np.errstate(divide="ignore", invalid="ignore"):
        out: np.ndarray = np.where(pe < 1.0, (p11 + p00 - pe) / (1 - pe), np.nan)
    return out


def posterior_interval(a: np.ndarray, b: np.ndarray, deff: float = 1.0, draws: int = POSTERIOR_DRAWS,
                       seed: int = 0) -> tuple[float, float] | None:
    """(lo, hi) of kappa under the Dirichlet(counts / deff + 1/2) posterior of the table."""
    if len(a) == 0:
        return None
    counts = np.array([np.sum(a & b), np.sum(a & ~b), np.sum(~a & b), np.sum(~a & ~b)], dtype=np.float64)
    p = np.random.default_rng(seed).dirichlet(counts / max(deff, 1.0) + 0.5, draws)
    k = table_kappa(p[:, 0], p[:, 1], p[:, 2], p[:, 3])
    k = k[np.isfinite(k)]
    return (float(np.quantile(k, 0.025)), float(np.quantile(k, 0.975))) if len(k) else None


def hull(interval: tuple[float, float] | None, estimate: float | None) -> tuple[float | None, float | None]:
    """The interval widened to hold the point estimate (module docstring); (None, None) without one."""
    if interval is None:
        return None, None
    lo, hi = interval
    if estimate is None:
        return lo, hi
    return min(lo, estimate), max(hi, estimate)


def bootstrap(a: np.ndarray, b: np.ndarray, boot: int, seed: int) -> tuple[float | None, float | None, int]:
    """Percentile interval over the resamples where kappa is defined, and how many were not."""
    if len(a) == 0:
        return None, None, 0
    idx = np.random.default_rng(seed).integers(0, len(a), (boot, len(a)))
    x, y = a[idx], b[idx]
    k = table_kappa((x & y).mean(axis=1), (x & ~y).mean(axis=1), (~x & y).mean(axis=1), (~x & ~y).mean(axis=1))
    ok = k[np.isfinite(k)]
    undefined = int(boot - len(ok))
    if not len(ok):
        return None, None, undefined
    return float(np.quantile(ok, 0.025)), float(np.quantile(ok, 0.975)), undefined


@dataclass(frozen=True, slots=True)
class Agreement:
    step: int
    bench: str
    model_a: str
    model_b: str
    items: int
    removed_a: int
    removed_b: int
    both: tuple[str, ...]
    kappa: float | None
    lo: float | None
    hi: float | None
    boot_lo: float | None = None
    boot_hi: float | None = None
    boot: int = 0
    boot_undefined: int = 0
    pabak: float | None = None
    videos: int = 0
    deff: float = 1.0

    def record(self) -> dict[str, object]:
        return {"step": self.step, "bench": self.bench, "model_a": self.model_a, "model_b": self.model_b,
                "items": self.items, "removed_a": self.removed_a, "removed_b": self.removed_b,
                "removed_both": len(self.both), "kappa": cell(self.kappa), "kappa_lo": cell(self.lo),
                "kappa_hi": cell(self.hi), "interval": "Jeffreys-Dirichlet posterior, clustered by video",
                "videos": self.videos, "design_effect": cell(self.deff), "pabak": cell(self.pabak),
                "boot_lo": cell(self.boot_lo), "boot_hi": cell(self.boot_hi), "boot": self.boot,
                "boot_undefined": self.boot_undefined}


def agreement(step: int, bench: str, rows_a: Sequence[Forwards], rows_b: Sequence[Forwards],
              boot: int = 1000, seed: int = 0) -> Agreement:
    """Over the items both runs decided."""
    b_by = {f.item_id: f for f in rows_b}
    common = sorted(f.item_id for f in rows_a if f.item_id in b_by)
    a_by = {f.item_id: f for f in rows_a}
    va = np.array([a_by[i].removed for i in common], dtype=bool)
    vb = np.array([b_by[i].removed for i in common], dtype=bool)
    videos = [a_by[i].video or a_by[i].item_id for i in common]
    k = cohen_kappa(va, vb)
    deff = design_effect((va == vb).astype(float), videos) if common else 1.0
    lo, hi = hull(posterior_interval(va, vb, deff, seed=seed), k)
    b_lo, b_hi, undefined = bootstrap(va, vb, boot, seed)
    model_a = rows_a[0].model if rows_a else ""
    model_b = rows_b[0].model if rows_b else ""
    both = tuple(i for i, x, y in zip(common, va, vb, strict=True) if x and y)
    pabak = 2.0 * float(np.mean(va == vb)) - 1.0 if common else None
    return Agreement(step, bench, model_a, model_b, len(common), int(va.sum()), int(vb.sum()), both, k, lo, hi,
                     b_lo, b_hi, boot if common else 0, undefined, pabak, len(set(videos)), deff)


def agreements(a: dict[int, list[Forwards]], b: dict[int, list[Forwards]], boot: int = 1000,
               seed: int = 0) -> list[Agreement]:
    """Per step present in both runs and per benchmark, plus every benchmark pooled ("*")."""
    out = []
    for step in sorted(set(a) & set(b)):
        benches = sorted({f.bench for f in a[step]})
        for bench in [*benches, "*"]:
            ra = [f for f in a[step] if bench in ("*", f.bench)]
            rb = [f for f in b[step] if bench in ("*", f.bench)]
            out.append(agreement(step, bench, ra, rb, boot, seed))
    return out
