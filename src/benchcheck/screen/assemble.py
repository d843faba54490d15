"""`benchcheck assemble`: the screened pool as Parquet + DuckDB, summaries, accounting, flags."""

from __future__ import annotations

import csv
import io
from collections import Counter, defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from benchcheck.atomic import clear_dead_files, file_tag, replace_atomic, write_atomic, write_text_atomic
from benchcheck.items import fingerprints
from benchcheck.screen.context import ScreenContext
from benchcheck.screen.fates import (
    ERROR,
    FAILED,
    KEPT,
    NOT_SCREENED,
    PENDING,
    REMOVED,
    ItemFate,
    item_fates,
    kept_unscreened,
)
from benchcheck.screen.pool_text import with_item_text
from benchcheck.shard import ShardPath, parse_shard_path
from benchcheck.stats.pool import add_confidence, add_probe, removal_interval
from benchcheck.step0.probe_stamp import left_out, stale_note
from benchcheck.store import read_rows
from benchcheck.verdicts import StepState

ERROR_RATE_FLAG = 1e-3  # permanent errors per forward above this deserve a look (PROTOCOL.md, "Sanity")
MIN_ITEMS_FOR_RATE_FLAG = 20


@dataclass(slots=True)
class Assembled:
    paths: dict[str, Path] = field(default_factory=dict)
    flags: list[str] = field(default_factory=list)
    summary: list[dict[str, Any]] = field(default_factory=list)
    # shown in place of RESULTS/probe, made with another step 0 than this pool's (``probe_note``)
    probe_note: str | None = None


def summary_rows(fates: Sequence[ItemFate], chain: Sequence[int], states: dict[int, StepState]) -> list[dict[str, Any]]:
    """Per benchmark x step: done, removed, error rows, failed, removal rate, forwards; every count
    read through the reducer's verdicts (an item counts once, whatever the files hold)."""
    out = []
    by_bench: dict[str, list[ItemFate]] = defaultdict(list)
    for f in fates:
        by_bench[f.item.bench].append(f)
    for bench in sorted(by_bench):
        ids = {f.item.item_id for f in by_bench[bench]}
        for s in chain:
            c = Counter(f.fates.get(s) for f in by_bench[bench])
            verdicts = [states[s].verdict(i) for i in sorted(ids)]
            done = c[KEPT] + c[REMOVED]
            forwards = sum(v.row.forwards for v in verdicts if v.row is not None)
            errors = sum(v.error_rows for v in verdicts)
            decided = [f for f in by_bench[bench] if f.fates.get(s) in (KEPT, REMOVED)]
            out.append({"bench": bench, "step": s, "done": done, "removed": c[REMOVED], "error_rows": errors,
                        "failed": c[FAILED], "removal_rate": round(c[REMOVED] / done, 4) if done else None,
                        **removal_interval([f.fates.get(s) == REMOVED for f in decided],
                                           [f.item.video_id or f.item.item_id for f in decided]),
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


def accounting_rows(results: Path, done: dict[int, int] | None = None) -> list[dict[str, Any]]:
    """Per step from run_log.jsonl: wall time (first start to last end), items/s, items/s per GPU.

    ``done``: items done per step as the reducer counts them. When given, ``items_ok`` is that
    count, so an item is counted once however many runs (or rows) it took; the run log's own
    sum (``ok_rows_logged``) is kept beside it."""
    by_step: dict[int, list[dict[str, Any]]] = defaultdict(list)
    for r in read_rows(results / "run_log.jsonl"):
        if isinstance(r.get("step"), int):
            by_step[r["step"]].append(r)
    out = []
    for s in sorted(by_step):
        runs = by_step[s]
        span = max(r.get("ended", 0) for r in runs) - min(r.get("started", 0) for r in runs)
        logged = sum(r.get("ok", 0) for r in runs)
        ok = done[s] if done is not None and s in done else logged
        busy = sum(r.get("wall_s", 0.0) for r in runs)
        units = parallel_units(runs)
        out.append({"step": s, "runs": len(runs), "items_ok": ok, "ok_rows_logged": logged,
                    "error_rows": sum(r.get("errors", 0) for r in runs),
                    "wall_s": round(span, 2), "busy_s": round(busy, 2),
                    "items_per_s": round(ok / span, 3) if span > 0 else None,
                    "items_per_s_per_gpu": round(ok / busy, 3) if busy > 0 else None, "parallel_units": units})
    return out


def parallel_units(runs: Sequence[Mapping[str, Any]]) -> int:
    """How many shards one array of the step's runs had: a flat shard's ``n_shards``; nested ones
    (``i/n:j/m``, a launch host's servers) by the distinct paths of one array, the hosts' own
    server counts differing (a nested row's ``n_shards`` is its array's host count)."""
    widest = 1
    arrays: dict[tuple[int, ...], set[ShardPath]] = defaultdict(set)
    for r in runs:
        spec = r.get("shard_spec")
        try:
            path = parse_shard_path(spec) if isinstance(spec, str) and ":" in spec else None
        except ValueError:  # a log row written by hand or torn: counted by its n_shards
            path = None
        if path is not None and len(path) > 1:
            arrays[tuple(n for _, n in path[:-1])].add(path)
        elif isinstance(r.get("n_shards", 1), int):
            widest = max(widest, r.get("n_shards", 1))
    return max([widest, *map(len, arrays.values())])


def _write_csv(path: Path, rows: Sequence[dict[str, Any]]) -> None:
    buf = io.StringIO(newline="")
    if rows:
        w = csv.DictWriter(buf, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)
    write_text_atomic(path, buf.getvalue())


def _markdown(summary: Sequence[dict[str, Any]], fates: Sequence[ItemFate], flags: Sequence[str]) -> str:
    final = Counter(f.final for f in fates)
    unscreened = sum(kept_unscreened(f.final, f.fates) for f in fates)
    head = f"Items: {len(fates)}; " + ", ".join(f"{k}: {v}" for k, v in sorted(final.items()))
    if unscreened:
        head += f" ({unscreened} of the kept skipped a visual step: no frames)"
    lines = ["# Screened pool", "", head,
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
    return [{"item_id": v.item_id, "bench": v.row.bench, "step": step, "removed": v.removed, "margin": v.margin,
             "model": v.row.model, "config_hash": v.row.config_hash, "latency_s": v.row.get("latency_s"),
             "prompt_tokens": sum(v.row.prompt_tokens)} for v in state.verdicts() if v.row is not None]


def probe_note(ctx: ScreenContext) -> str | None:
    """One note in place of RESULTS/probe when that probe left out at step 0 other items than the
    pool does (``--keep``; ``stale_reason``, the rule ``audit.md`` and the report follow): a probe
    over duplicates the pool leaves out, or without items it holds, is no reading of its items."""
    keep = ctx.keep
    pairs = left_out(ctx.items, {i.item_id for i in ctx.items if i.item_id not in keep}) if keep is not None else set()
    return stale_note(ctx.results / "probe", pairs, "Rerun benchcheck probe with --step0 the kept list given to "
                                                    "--keep, or give assemble as --keep the kept list of the --step0 "
                                                    "the probe ran with.")


def assemble(ctx: ScreenContext) -> Assembled:
    """Write pool_items.parquet, pool.duckdb, pool_summary.md/.csv, run_accounting.csv under results."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    res = ctx.results
    res.mkdir(parents=True, exist_ok=True)
    states = ctx.states(ctx.chain[-1])
    # the pool is what step 0 kept: an item left out of the kept list never enters the chain, so it
    # is no pending item (the CLI and the demo both come through here)
    pool = ctx.items if ctx.keep is None else [i for i in ctx.items if i.item_id in ctx.keep]
    fates = item_fates(pool, ctx.chain, states, ctx.has_frames)
    out = Assembled()
    records = [with_item_text(f.record(ctx.chain), f.item) for f in fates]
    add_confidence(records, res, fingerprints(pool))  # how firmly each fate stands (docs/audit.md); never changes it
    # the text-only probe and label flags, when run (docs/probe.md) over the items this pool has
    out.probe_note = probe_note(ctx)
    add_probe(records, res / "probe" if out.probe_note is None else None)
    out.paths["pool_items"] = res / "pool_items.parquet"
    write_atomic(out.paths["pool_items"], lambda f: pq.write_table(pa.Table.from_pylist(records), f))
    out.summary = summary_rows(fates, ctx.chain, states)
    out.flags = sanity_flags(out.summary)
    out.paths["summary_csv"] = res / "pool_summary.csv"
    _write_csv(out.paths["summary_csv"], out.summary)
    out.paths["summary_md"] = res / "pool_summary.md"
    write_text_atomic(out.paths["summary_md"], _markdown(out.summary, fates, out.flags) + _engines_markdown(res))
    done = {s: sum(1 for v in st.verdicts() if v.done) for s, st in states.items()}
    accounting = accounting_rows(res, done)
    out.paths["accounting"] = res / "run_accounting.csv"
    _write_csv(out.paths["accounting"], accounting)
    out.paths["duckdb"] = _write_duckdb(res, records, out.summary, accounting, states)
    return out


def _write_duckdb(res: Path, records: list[dict[str, Any]], summary: list[dict[str, Any]],
                  accounting: list[dict[str, Any]], states: dict[int, StepState]) -> Path:
    """Rebuilt from scratch each time (a temp file fsynced and renamed over the old one), never torn.

    The temp file's name is this process's own (as ``atomic.write_atomic``'s are): with one fixed
    name, a second ``assemble`` on the same folder deleted the first's file while it was written,
    and the first then renamed the second's half-written database over ``pool.duckdb`` (and the
    second stopped on a FileNotFoundError). A failed build takes its file and WAL with it; those of
    a killed build (its process gone) are removed by the next one, as large as the database each."""
    import duckdb
    import pyarrow as pa

    clear_dead_files(res, ".pool.duckdb.")
    tmp = res / f".pool.duckdb.{file_tag()}.tmp"
    try:
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
        replace_atomic(tmp, final)
    except BaseException:
        for leftover in (tmp, tmp.with_name(tmp.name + ".wal")):
            leftover.unlink(missing_ok=True)
        raise
    return final
