"""Agreement between two models' removals at one step (Cohen's kappa with a bootstrap interval)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from benchcheck.audit.cells import cell
from benchcheck.audit.source import Forwards


def cohen_kappa(a: np.ndarray, b: np.ndarray) -> float | None:
    """Kappa of two boolean vectors; None when chance agreement is total (nothing to measure)."""
    if len(a) == 0:
        return None
    po = float(np.mean(a == b))
    pa, pb = float(np.mean(a)), float(np.mean(b))
    pe = pa * pb + (1 - pa) * (1 - pb)
    return None if pe >= 1.0 else (po - pe) / (1 - pe)


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

    def record(self) -> dict[str, object]:
        return {"step": self.step, "bench": self.bench, "model_a": self.model_a, "model_b": self.model_b,
                "items": self.items, "removed_a": self.removed_a, "removed_b": self.removed_b,
                "removed_both": len(self.both), "kappa": cell(self.kappa), "kappa_lo": cell(self.lo),
                "kappa_hi": cell(self.hi)}


def agreement(step: int, bench: str, rows_a: Sequence[Forwards], rows_b: Sequence[Forwards],
              boot: int = 1000, seed: int = 0) -> Agreement:
    """Over the items both runs decided."""
    b_by = {f.item_id: f for f in rows_b}
    common = sorted(f.item_id for f in rows_a if f.item_id in b_by)
    a_by = {f.item_id: f for f in rows_a}
    va = np.array([a_by[i].removed for i in common], dtype=bool)
    vb = np.array([b_by[i].removed for i in common], dtype=bool)
    k = cohen_kappa(va, vb)
    lo = hi = None
    if k is not None:
        rng = np.random.default_rng(seed)
        ks = [x for _ in range(boot) if (x := cohen_kappa(va[(s := rng.integers(0, len(va), len(va)))], vb[s]))
              is not None]
        if ks:
            lo, hi = float(np.quantile(ks, 0.025)), float(np.quantile(ks, 0.975))
    model_a = rows_a[0].model if rows_a else ""
    model_b = rows_b[0].model if rows_b else ""
    both = tuple(i for i, x, y in zip(common, va, vb, strict=True) if x and y)
    return Agreement(step, bench, model_a, model_b, len(common), int(va.sum()), int(vb.sum()), both, k, lo, hi)


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
