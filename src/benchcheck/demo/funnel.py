"""The funnel per kind: which step removed how many items of each kind, observed (from the
rows, through the same fates ``assemble`` reads) next to predicted (from the construction)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from benchcheck.demo.kinds import KINDS, predicted_step
from benchcheck.items import Item
from benchcheck.screen.context import ScreenContext
from benchcheck.screen.fates import item_fates

Funnel = dict[str, dict[str, int]]  # kind -> column ("0".."6", "kept", "other") -> count


def columns(chain: Sequence[int], dedup: bool) -> list[str]:
    return (["0"] if dedup else []) + [str(s) for s in chain] + ["kept"]


def observed_fates(ctx: ScreenContext, step0_kept: set[str] | None) -> dict[str, str]:
    """item_id -> the column of its fate: "0" (step-0 duplicate), the removing step, "kept",
    or "other" (failed, pending: never expected in the demo)."""
    chain = ctx.chain
    states = ctx.states(chain[-1])
    out: dict[str, str] = {}
    for f in item_fates(ctx.items, chain, states, ctx.has_frames):
        iid = f.item.item_id
        if step0_kept is not None and iid not in step0_kept:
            out[iid] = "0"
        elif f.removed_at is not None:
            out[iid] = str(f.removed_at)
        else:
            out[iid] = "kept" if f.final == "kept" else "other"
    return out


def tabulate(fates: Mapping[str, str], kind_of: Mapping[str, str]) -> Funnel:
    table: Funnel = {}
    for iid, col in fates.items():
        row = table.setdefault(kind_of[iid], {})
        row[col] = row.get(col, 0) + 1
    return table


def predicted(items: Sequence[Item], kind_of: Mapping[str, str], chain: Sequence[int], dedup: bool) -> Funnel:
    fates = {}
    for it in items:
        step = predicted_step(kind_of[it.item_id], chain, dedup)
        fates[it.item_id] = "kept" if step is None else str(step)
    return tabulate(fates, kind_of)


def render(observed: Funnel, expected: Funnel, cols: Sequence[str]) -> str:
    """A text table: one row per kind, ``observed/predicted`` per column; a ``!`` marks a cell
    where they differ."""
    head = ["kind".ljust(13)] + [("step " + c if c != "kept" else c).rjust(8) for c in cols]
    lines = ["  ".join(head)]
    for kind in [k for k in KINDS if k in observed or k in expected]:
        o, e = observed.get(kind, {}), expected.get(kind, {})
        cells = []
        for c in cols:
            a, b = o.get(c, 0), e.get(c, 0)
            cells.append(f"{'!' if a != b else ''}{a}/{b}".rjust(8))
        extra = o.get("other", 0)
        lines.append("  ".join([kind.ljust(13), *cells]) + (f"   ({extra} failed or pending)" if extra else ""))
    return "\n".join(lines)


def funnel_record(observed: Funnel, expected: Funnel, cols: Sequence[str], chain: Sequence[int],
                  engine: str) -> dict[str, Any]:
    return {"engine": engine, "chain": list(chain), "columns": list(cols), "observed": observed,
            "predicted": expected, "match": observed == expected}
