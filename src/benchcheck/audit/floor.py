"""Decisions that depend on the top-20 floor: the rule on ``lp`` against the rule on ``lp_exact``."""

from __future__ import annotations

from collections import defaultdict

from benchcheck.audit.rule import decision_stats, removes
from benchcheck.protocol import LP_FLOOR
from benchcheck.stats.source import Forwards


def floor_dependence(by_step: dict[int, list[Forwards]]) -> list[dict[str, object]]:
    """Per benchmark x step: rows with exact scores, rows with a floored letter, decisions that
    differ between the two (removed with lp only / with lp_exact only), and how far the floor
    moves the (mean) margin: margin on lp minus margin on lp_exact, mean and largest."""
    out: list[dict[str, object]] = []
    for step in sorted(by_step):
        acc: dict[str, dict[str, int]] = defaultdict(lambda: {"rows": 0, "with_exact": 0, "floored": 0,
                                                               "removed_lp_only": 0, "removed_exact_only": 0})
        shift: dict[str, list[float]] = defaultdict(list)
        for f in by_step[step]:
            a = acc[f.bench]
            a["rows"] += 1
            a["floored"] += any(v == LP_FLOOR for lp in f.lps for v in lp)
            if f.lps_exact is None:
                continue
            a["with_exact"] += 1
            exact = removes(f.perms, f.lps_exact, f.answer)
            shift[f.bench].append(decision_stats(f.perms, f.lps, f.answer)[1]
                                  - decision_stats(f.perms, f.lps_exact, f.answer)[1])
            a["removed_lp_only"] += f.removed and not exact
            a["removed_exact_only"] += exact and not f.removed
        for bench in sorted(acc):
            a = acc[bench]
            sh: list[float] = shift.get(bench, [])
            largest = max(sh, key=abs) if sh else None
            out.append({"bench": bench, "step": step, **a,
                        "decisions_differ": a["removed_lp_only"] + a["removed_exact_only"],
                        "mean_margin_shift": round(sum(sh) / len(sh), 4) if sh else None,
                        "max_margin_shift": None if largest is None else round(largest, 4)})
    return out
