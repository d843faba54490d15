"""Numbers the report shows (pure): intervals, histograms, answer positions, funnel totals."""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from benchcheck.report.source import BenchEvidence, ItemEvidence
from benchcheck.screen.fates import FAILED, KEPT, NOT_SCREENED, PENDING, REMOVED, kept_unscreened

Z95 = 1.959963984540054
# not_deduplicated: step 0 only, the items of benchmarks its dedup run never read (none decided)
FUNNEL_KEYS = ("screened", "removed", "kept", "failed", "pending", "not_screened", "not_deduplicated")


@dataclass(frozen=True, slots=True)
class Rate:
    k: int
    n: int
    lo: float | None
    hi: float | None

    @property
    def value(self) -> float | None:
        return self.k / self.n if self.n else None


def wilson(k: int, n: int, z: float = Z95) -> Rate:
    """Wilson score interval: honest at 0 % and 100 % and for small n, unlike the Wald interval."""
    if n <= 0:
        return Rate(k, n, None, None)
    p = k / n
    den = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / den
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / den
    return Rate(k, n, max(0.0, centre - half), min(1.0, centre + half))


def diff_interval(a: Rate, b: Rate, z: float = Z95) -> tuple[float, float, float] | None:
    """a - b with Newcombe's hybrid score interval (method 10) built from the two Wilson intervals."""
    if a.value is None or b.value is None or a.lo is None or a.hi is None or b.lo is None or b.hi is None:
        return None
    d = a.value - b.value
    lo = d - math.sqrt((a.value - a.lo) ** 2 + (b.hi - b.value) ** 2)
    hi = d + math.sqrt((a.hi - a.value) ** 2 + (b.value - b.lo) ** 2)
    return d, lo, hi


def not_deduplicated(summary: Iterable[Mapping[str, Any]]) -> dict[str, int]:
    """Benchmark -> its items, for each benchmark the step-0 dedup run never read."""
    return {str(r["bench"]): int(r["not_deduplicated"]) for r in summary
            if int(r["step"]) == 0 and r.get("not_deduplicated")}


def removal_rates(bench: BenchEvidence) -> dict[int, Rate]:
    """Per step: removed among the items that step decided (kept + removed)."""
    return {int(r["step"]): wilson(int(r["removed"]), int(r["done"])) for r in bench.summary}


def funnel(summary: Iterable[Mapping[str, Any]]) -> dict[int, dict[str, int]]:
    """Per step totals over benchmarks: screened (decided), removed, kept, failed, pending, not screened,
    and at step 0 the items it never looked at (not deduplicated)."""
    out: dict[int, dict[str, int]] = {}
    for r in summary:
        t = out.setdefault(int(r["step"]), dict.fromkeys(FUNNEL_KEYS, 0))
        t["screened"] += int(r["done"])
        t["removed"] += int(r["removed"])
        t["kept"] += int(r["done"]) - int(r["removed"])
        t["failed"] += int(r["failed"])
        t["pending"] += int(r["pending"])
        t["not_screened"] += int(r["not_screened"])
        t["not_deduplicated"] += int(r.get("not_deduplicated") or 0)
    return out


def step_margins(items: Sequence[ItemEvidence], step: int) -> list[float]:
    return [m for it in items if (m := it.margins.get(step)) is not None and math.isfinite(m)]


def histogram(values: Sequence[float], bins: int = 40, lo: float | None = None,
              hi: float | None = None) -> tuple[list[int], list[float]]:
    """Counts and bin edges (numpy's convention: the last bin includes its right edge)."""
    import numpy as np

    if not values:
        return [], []
    rng = (lo if lo is not None else min(values), hi if hi is not None else max(values))
    if rng[0] == rng[1]:
        rng = (rng[0] - 0.5, rng[1] + 0.5)
    counts, edges = np.histogram(np.asarray(values, dtype=float), bins=bins, range=rng)
    return [int(c) for c in counts], [float(e) for e in edges]


def positions(items: Sequence[ItemEvidence], step: int) -> tuple[Counter[int], Counter[int]]:
    """Where the gold sat and what the model picked, as presented positions (0 = A) at one step.

    Step 1 counts each of its permutations; a strong letter prior shows as picks piling on one
    position while the gold spreads evenly.
    """
    gold: Counter[int] = Counter()
    picks: Counter[int] = Counter()
    for it in items:
        row = it.rows.get(step)
        if row is None or row.get("status", "ok") != "ok":
            continue
        g, p = row.get("gold_pos"), row.get("picks", row.get("pick"))
        gl = g if isinstance(g, list) else [g]
        pl = p if isinstance(p, list) else [p]
        gold.update(x for x in gl if isinstance(x, int))
        picks.update(x for x in pl if isinstance(x, int))
    return gold, picks


def final_counts(items: Iterable[ItemEvidence]) -> Counter[str]:
    """Items per final fate, and under ``not_screened`` how many of the kept skipped a visual step
    (no frames). The protocol keeps such an item (it passed every step it was eligible for), so no
    final is "not screened": without this count a kept item with no video read as one that passed
    the visual checks."""
    out: Counter[str] = Counter()
    for it in items:
        out[it.final] += 1
        if kept_unscreened(it.final, it.fates):
            out[NOT_SCREENED] += 1
    return out


FINAL_ORDER = (KEPT, REMOVED, FAILED, PENDING, NOT_SCREENED, "open_format")
# How the final counts are named on the pages: ``not_screened`` is a part of ``kept``, not a fate of its own.
FINAL_LABELS = {NOT_SCREENED: "kept without a visual step", "open_format": "open format"}
