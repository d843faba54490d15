"""`benchcheck assemble`: the screened pool as Parquet + DuckDB, summaries, accounting, flags."""

from __future__ import annotations

import csv
from collections import Counter, defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from benchcheck.screen.context import ScreenContext
from benchcheck.screen.fates import ERROR, FAILED, KEPT, NOT_SCREENED, PENDING, REMOVED, ItemFate, item_fates
from benchcheck.store import StepState, read_rows

ERROR_RATE_FLAG = 1e-3  # permanent errors per forward above this deserve a look (SPEC, Sanity)
MIN_ITEMS_FOR_RATE_FLAG = 20


@dataclass(slots=True)
class Assembled:
    paths: dict[str, Path] = field(default_factory=dict)
    flags: list[str] = field(default_factory=list)
    summary: list[dict[str, Any]] = field(default_factory=list)


def summary_rows(fates: Sequence[ItemFate], chain: Sequence[int], states: dict[int, StepState]) -> list[dict[str, Any]]:
    """Per benchmark x step: done, removed, error rows, failed, removal rate, forwards."""
    out = []
    by_bench: dict[str, list[ItemFate]] = defaultdict(list)
    for f in fates:
        by_bench[f.item.bench].append(f)
    for bench in sorted(by_bench):
        ids = {f.item.item_id for f in by_bench[bench]}
        for s in chain:
            c = Counter(f.fates.get(s) for f in by_bench[bench])
            st = states[s]
            done = c[KEPT] + c[REMOVED]
            forwards = sum(len(st.ok[i].get("prompt_tokens") or [1]) for i in ids if i in st.ok)
            errors = sum(n for i, n in st.errors.items() if i in ids)
            out.append({"bench": bench, "step": s, "done": done, "removed": c[REMOVED], "error_rows": errors,
                        "failed": c[FAILED], "removal_rate": round(c[REMOVED] / done, 4) if done else None,
                        "pending": c[PENDING] + c[ERROR], "not_screened": c[NOT_SCREENED],
                        "forwards": forwards + errors})
    return out


def sanity_flags(summary: Sequence[dict[str, Any]]) -> list[str]:
    flags = []
    for r in summary:
        rate = r["removal_rate"]
        if rate is not None and r["done"] >= MIN_ITEMS_FOR_RATE_FLAG and (rate <= 0.01 or rate >= 0.99):
            flags.append(f"{r['bench']} step {r['step']}: removal {100 * rate:.0f}% of {r['done']} items")
        if r["forwards"] and r["failed"] / r["forwards"] > ERROR_RATE_FLAG:
            flags.append(f"{r['bench']} step {r['step']}: {r['failed']} permanent errors in {r['forwards']} forwards")
    return flags


def accounting_rows(results: Path) -> list[dict[str, Any]]:
    """Per step from run_log.jsonl: wall time (first start to last end), items/s, items/s per GPU."""
    by_step: dict[int, list[dict[str, Any]]] = defaultdict(list)
    for r in read_rows(results / "run_log.jsonl"):
        if isinstance(r.get("step"), int):
            by_step[r["step"]].append(r)
    out = []
    for s in sorted(by_step):
        runs = by_step[s]
        span = max(r.get("ended", 0) for r in runs) - min(r.get("started", 0) for r in runs)
        ok = sum(r.get("ok", 0) for r in runs)
        busy = sum(r.get("wall_s", 0.0) for r in runs)
        units = max(max((r.get("n_shards", 1) for r in runs), default=1), 1)
        out.append({"step": s, "runs": len(runs), "items_ok": ok, "error_rows": sum(r.get("errors", 0) for r in runs),
                    "wall_s": round(span, 2), "busy_s": round(busy, 2),
                    "items_per_s": round(ok / span, 3) if span > 0 else None,
                    "items_per_s_per_gpu": round(ok / busy, 3) if busy > 0 else None, "parallel_units": units})
    return out


def _write_csv(path: Path, rows: Sequence[dict[str, Any]]) -> None:
    with path.open("w", newline="", encoding="utf-8") as f:
        if not rows:
            return
        w = csv.DictWriter(f, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)


def _markdown(summary: Sequence[dict[str, Any]], fates: Sequence[ItemFate], flags: Sequence[str]) -> str:
    final = Counter(f.final for f in fates)
    lines = ["# Screened pool", "", f"Items: {len(fates)}; " + ", ".join(f"{k}: {v}" for k, v in sorted(final.items())),
             "", "| bench | step | done | removed | removal | error rows | failed | pending | not screened |",
             "|---|---|---|---|---|---|---|---|---|"]
    for r in summary:
        rate = "" if r["removal_rate"] is None else f"{100 * r['removal_rate']:.1f}%"
        lines.append(f"| {r['bench']} | {r['step']} | {r['done']} | {r['removed']} | {rate} | {r['error_rows']} "
                     f"| {r['failed']} | {r['pending']} | {r['not_screened']} |")
    lines += ["", "## Flags", ""] + ([f"- {f}" for f in flags] or ["none"])
    return "\n".join(lines) + "\n"


def _engines_markdown(results: Path) -> str:
    """Which engine and model answered each step (from run_log.jsonl), so a summary never hides
    that a step ran on a rule-based reference engine or a random-weight stand-in."""
    used: dict[int, set[str]] = defaultdict(set)
    for r in read_rows(results / "run_log.jsonl"):
        if isinstance(r.get("step"), int):
            used[r["step"]].add(f"{r.get('engine')} / {r.get('model')}")
    if not used:
        return ""
    lines = ["", "## Engines", ""] + [f"- step {s}: {', '.join(sorted(used[s]))}" for s in sorted(used)]
    return "\n".join(lines) + "\n"


def _step_table(state: StepState, step: int) -> list[dict[str, Any]]:
    return [{"item_id": i, "bench": r.get("bench"), "step": step, "removed": bool(r.get("removed")),
             "margin": r.get("mean_margin", r.get("margin")), "model": r.get("model"),
             "config_hash": r.get("config_hash"), "latency_s": r.get("latency_s"),
             "prompt_tokens": sum(r.get("prompt_tokens") or [])} for i, r in state.ok.items()]


def assemble(ctx: ScreenContext) -> Assembled:
    """Write pool_items.parquet, pool.duckdb, pool_summary.md/.csv, run_accounting.csv under results."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    res = ctx.results
    res.mkdir(parents=True, exist_ok=True)
    states = ctx.states(ctx.chain[-1])
    fates = item_fates(ctx.items, ctx.chain, states, ctx.has_frames)
    out = Assembled()
    records = [f.record(ctx.chain) for f in fates]
    out.paths["pool_items"] = res / "pool_items.parquet"
    pq.write_table(pa.Table.from_pylist(records), out.paths["pool_items"])
    out.summary = summary_rows(fates, ctx.chain, states)
    out.flags = sanity_flags(out.summary)
    out.paths["summary_csv"] = res / "pool_summary.csv"
    _write_csv(out.paths["summary_csv"], out.summary)
    out.paths["summary_md"] = res / "pool_summary.md"
    out.paths["summary_md"].write_text(_markdown(out.summary, fates, out.flags) + _engines_markdown(res),
                                       encoding="utf-8")
    accounting = accounting_rows(res)
    out.paths["accounting"] = res / "run_accounting.csv"
    _write_csv(out.paths["accounting"], accounting)
    out.paths["duckdb"] = _write_duckdb(res, records, out.summary, accounting, states)
    return out


def _write_duckdb(res: Path, records: list[dict[str, Any]], summary: list[dict[str, Any]],
                  accounting: list[dict[str, Any]], states: dict[int, StepState]) -> Path:
    """Rebuilt from scratch each time (a temp file renamed over the old one), so it is never torn."""
    import duckdb
    import pyarrow as pa

    tmp = res / "pool.duckdb.tmp"
    tmp.unlink(missing_ok=True)
    con = duckdb.connect(str(tmp))
    try:
        tables = {"items": records, "summary": summary, "accounting": accounting}
        tables |= {f"step{s}": _step_table(st, s) for s, st in states.items()}
        for name, rows in tables.items():
            if rows:
                arrow = pa.Table.from_pylist(rows)  # noqa: F841 - read by DuckDB's replacement scan
                con.execute(f"CREATE TABLE {name} AS SELECT * FROM arrow")
    finally:
        con.close()
    final = res / "pool.duckdb"
    tmp.replace(final)
    return final
