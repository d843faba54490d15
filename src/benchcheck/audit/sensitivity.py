"""Removal rate against the threshold (0 to 3 nats), per benchmark x step, with a 95 % interval
clustered by video (``stats.cluster.rate_interval``)."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence

from benchcheck.audit.rule import decision_stats
from benchcheck.protocol import LOG2, MIN_PERM_HITS
from benchcheck.stats.cluster import rate_interval
from benchcheck.stats.source import Forwards

THRESHOLDS = tuple(sorted({round(0.1 * i, 1) for i in range(31)} | {LOG2}))  # the protocol's own included


def threshold_curves(by_step: dict[int, list[Forwards]],
                     thresholds: Sequence[float] = THRESHOLDS) -> list[dict[str, object]]:
    """One row per benchmark x step x threshold: items, removed, rate."""
    out: list[dict[str, object]] = []
    for step in sorted(by_step):
        groups: dict[str, list[tuple[bool, float, str]]] = defaultdict(list)
        for f in by_step[step]:
            hits, mean_margin = decision_stats(f.perms, f.lps, f.answer)
            groups[f.bench].append((hits >= (MIN_PERM_HITS if f.multi else 1), mean_margin, f.video or f.item_id))
        for bench in sorted(groups):
            g = groups[bench]
            videos = [v for _, _, v in g]
            for t in thresholds:
                rm = [ok and m > t for ok, m, _ in g]
                lo, hi = rate_interval(rm, videos)
                out.append({"bench": bench, "step": step, "threshold": round(t, 4), "items": len(g),
                            "removed": sum(rm), "rate": round(sum(rm) / len(g), 4),
                            "rate_lo": None if lo is None else round(lo, 4),
                            "rate_hi": None if hi is None else round(hi, 4)})
    return out
