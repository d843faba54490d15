"""Removal rate against the threshold (0 to 3 nats), per benchmark x step."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence

from benchcheck.audit.rule import decision_stats
from benchcheck.audit.source import Forwards
from benchcheck.protocol import LOG2, MIN_PERM_HITS

THRESHOLDS = tuple(sorted({round(0.1 * i, 1) for i in range(31)} | {LOG2}))  # the protocol's own included


def threshold_curves(by_step: dict[int, list[Forwards]],
                     thresholds: Sequence[float] = THRESHOLDS) -> list[dict[str, object]]:
    """One row per benchmark x step x threshold: items, removed, rate."""
    out: list[dict[str, object]] = []
    for step in sorted(by_step):
        groups: dict[str, list[tuple[bool, float]]] = defaultdict(list)
        for f in by_step[step]:
            hits, mean_margin = decision_stats(f.perms, f.lps, f.answer)
            groups[f.bench].append((hits >= (MIN_PERM_HITS if f.multi else 1), mean_margin))
        for bench in sorted(groups):
            g = groups[bench]
            for t in thresholds:
                n_rm = sum(ok and m > t for ok, m in g)
                out.append({"bench": bench, "step": step, "threshold": round(t, 4), "items": len(g), "removed": n_rm,
                            "rate": round(n_rm / len(g), 4)})
    return out
