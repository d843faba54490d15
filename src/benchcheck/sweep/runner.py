"""Run the sweep: units of (bench, condition, chunk of items), decoded in a process pool, asked
of the engine, appended to the CSV. Resumable: what is done is read back from the CSV.

:func:`work_unit` does the work of one unit and returns records without touching a file, so any
executor (this local loop, launch shards, later ``run_task``) can call it; :func:`run_sweep` is
the local executor: it writes NA rows and failures first, then the units with ``workers`` in
flight, then the reused rows (whose source rows the units just wrote).
"""

from __future__ import annotations

import asyncio
import time
from collections import Counter, defaultdict
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from benchcheck.engines.base import Engine, Failure, GenerateRequest
from benchcheck.spec import RunSpec, write_run_spec
from benchcheck.sweep.plan import Cell
from benchcheck.sweep.results import (
    SweepPaths,
    append_csv,
    append_csv_fresh,
    append_failures,
    append_raw,
    append_timing,
    log_line,
    read_csv,
)
from benchcheck.sweep.rows import answer_rows, engine_failure, failure_line, na_row, reuse_row
from benchcheck.video.plans import FramePlan

Echo = Callable[[str], None]
FrameFn = Callable[[str, FramePlan], Awaitable[tuple[list[bytes], float]]]


@dataclass(frozen=True, slots=True)
class Unit:
    bench: str
    condition: str
    cells: tuple[Cell, ...]


@dataclass(slots=True)
class UnitResult:
    """What one unit produced; nothing is written yet."""

    rows: list[dict[str, Any]] = field(default_factory=list)
    raw: list[dict[str, Any]] = field(default_factory=list)
    failures: list[dict[str, Any]] = field(default_factory=list)
    infer: int = 0
    infer_s: float = 0.0
    decode_s: float = 0.0
    prompt_tokens: int = 0
    unreachable: bool = False


async def work_unit(unit: Unit, spec: RunSpec, engine: Engine, frames: FrameFn) -> UnitResult:
    """Decode the unit's frames, generate, parse: rows for answers, failures for the rest."""
    out = UnitResult()
    reqs: list[GenerateRequest] = []
    asked: list[tuple[Cell, float]] = []
    for cell in unit.cells:
        images: list[bytes] = []
        decode_s = 0.0
        if cell.plan is not None:
            try:
                images, decode_s = await frames(cell.item.video_id or "", cell.plan)
            except (ValueError, OSError) as e:
                out.failures.append(failure_line(cell, "decode", str(e), spec))
                continue
        out.decode_s += decode_s
        reqs.append(GenerateRequest(request_id=f"{cell.condition}|{cell.item.item_id}", prompt=cell.prompt,
                                    images=tuple(images), max_tokens=spec.gen.max_tokens,
                                    assistant_prefix=spec.gen.assistant_prefix))
        asked.append((cell, decode_s))
    if not reqs:
        return out
    answers = await engine.generate(reqs)
    out.unreachable = all(isinstance(a, Failure) and a.kind == "connection" for a in answers)
    for (cell, decode_s), ans in zip(asked, answers, strict=True):
        if isinstance(ans, Failure):
            out.failures.append(engine_failure(cell, spec, ans))
            continue
        row, raw = answer_rows(cell, spec, ans, decode_s)
        out.rows.append(row)
        out.raw.append(raw)
        out.infer += 1
        out.infer_s += ans.latency_s
        out.prompt_tokens += ans.prompt_tokens
    return out


def make_units(cells: Sequence[Cell], chunk: int) -> list[Unit]:
    """The todo cells in chunks of ``chunk`` items per (bench, condition), in plan order."""
    groups: dict[tuple[str, str], list[Cell]] = defaultdict(list)
    for c in cells:
        if c.kind == "todo":
            groups[(c.item.bench, c.condition)].append(c)
    return [Unit(b, cond, tuple(cs[i:i + chunk])) for (b, cond), cs in groups.items()
            for i in range(0, len(cs), max(1, chunk))]


@dataclass(slots=True)
class SweepSummary:
    written: Counter[str] = field(default_factory=Counter)  # by status; "reuse" for reused rows
    failures: int = 0
    wall_s: float = 0.0
    aborted: bool = False

    def line(self) -> str:
        parts = " ".join(f"{k}={v}" for k, v in sorted(self.written.items()))
        return f"sweep: rows added {parts or 'none'}; failures {self.failures}; {self.wall_s:.1f}s" + (
            " (stopped early: engine unreachable; rerun to continue)" if self.aborted else "")


@dataclass(frozen=True, slots=True)
class RunnerConfig:
    workers: int = 6
    chunk: int = 1
    progress: bool = True
    abort_after_unreachable: int = 8


class _Timing:
    """Per (bench, condition) sums, written when the group's last unit is done."""

    def __init__(self, units: Sequence[Unit]) -> None:
        self.left = Counter((u.bench, u.condition) for u in units)
        self.sums: dict[tuple[str, str], list[float]] = defaultdict(lambda: [0, 0.0, 0.0, 0])

    def add(self, unit: Unit, r: UnitResult) -> dict[str, Any] | None:
        k = (unit.bench, unit.condition)
        s = self.sums[k]
        s[0] += r.infer
        s[1] += r.infer_s
        s[2] += r.decode_s
        s[3] += r.prompt_tokens
        self.left[k] -= 1
        if self.left[k]:
            return None
        return {"bench": k[0], "condition": k[1], "infer": int(s[0]), "infer_s": round(s[1], 3),
                "decode_s": round(s[2], 3), "prompt_tokens": int(s[3])}


def _write_unit(paths: SweepPaths, unit: Unit, r: UnitResult, summary: SweepSummary) -> None:
    # Raw first: a kill between the two leaves a raw line whose CSV row the rerun writes again.
    if r.raw:
        append_raw(paths, unit.condition, unit.bench, r.raw)
    for row in append_csv_fresh(paths.csv, r.rows):
        summary.written[str(row["status"])] += 1
    if r.failures:
        append_failures(paths, r.failures)
        summary.failures += len(r.failures)


def write_static(cells: Sequence[Cell], specs: Mapping[str, RunSpec], paths: SweepPaths,
                 summary: SweepSummary) -> None:
    """NA rows and the failures of items without a usable video (no engine needed)."""
    na = [na_row(c, specs[c.condition]) for c in cells if c.kind == "na"]
    summary.written["NA"] += append_csv(paths.csv, na)
    fails = [failure_line(c, "no_video", c.reason, specs[c.condition]) for c in cells if c.kind == "failure"]
    if fails:
        append_failures(paths, fails)
        summary.failures += len(fails)


def write_reused(cells: Sequence[Cell], specs: Mapping[str, RunSpec], paths: SweepPaths,
                 summary: SweepSummary) -> None:
    """Reused rows from their source rows now in the CSV; a missing source waits for a rerun."""
    pending = [c for c in cells if c.kind == "reuse"]
    if not pending:
        return
    source = {(r["bench"], r["item_id"], r["condition"]): r for r in read_csv(paths.csv)}
    rows, waiting = [], []
    for c in pending:
        src = source.get((c.item.bench, c.item.item_id, c.reuse_from or ""))
        if src is None or src.get("status") not in ("ok", "unparsed"):
            waiting.append(failure_line(c, "reuse_wait", f"no {c.reuse_from} answer yet; rerun after it is done",
                                        specs[c.condition]))
        else:
            rows.append(reuse_row(c, specs[c.condition], src))
    summary.written["reuse"] += append_csv(paths.csv, rows)
    if waiting:
        append_failures(paths, waiting)
        summary.failures += len(waiting)


async def run_sweep(cells: Sequence[Cell], specs: Mapping[str, RunSpec], engine: Engine, frames: FrameFn,
                    paths: SweepPaths, cfg: RunnerConfig, echo: Echo) -> SweepSummary:
    """Execute a planned sweep (see the module doc)."""
    from tqdm import tqdm

    t0 = time.perf_counter()
    summary = SweepSummary()
    for name, spec in specs.items():
        write_run_spec(spec, paths.results / "p1_raw" / name)
    write_static(cells, specs, paths, summary)
    units = make_units(cells, cfg.chunk)
    log_line(paths, f"start: {len(units)} units, {sum(len(u.cells) for u in units)} inferences, "
                    f"engine {engine.name} model {engine.model_name}, workers {cfg.workers}")
    timing = _Timing(units)
    queue: asyncio.Queue[Unit] = asyncio.Queue()
    for u in units:
        queue.put_nowait(u)
    streak = 0
    bar = tqdm(total=sum(len(u.cells) for u in units), desc="sweep", unit="item", disable=not cfg.progress)

    async def worker() -> None:
        nonlocal streak
        while not summary.aborted:
            try:
                unit = queue.get_nowait()
            except asyncio.QueueEmpty:
                return
            r = await work_unit(unit, specs[unit.condition], engine, frames)
            _write_unit(paths, unit, r, summary)
            t = timing.add(unit, r)
            if t is not None:
                append_timing(paths, [t])
                log_line(paths, f"done {t['bench']} {t['condition']}: infer={t['infer']} "
                                f"infer_s={t['infer_s']} decode_s={t['decode_s']}")
            streak = streak + 1 if r.unreachable else 0
            if streak >= cfg.abort_after_unreachable:
                summary.aborted = True
            bar.update(len(unit.cells))

    try:
        await asyncio.gather(*(worker() for _ in range(max(1, cfg.workers))))
    finally:
        bar.close()
    if not summary.aborted:
        write_reused(cells, specs, paths, summary)
    summary.wall_s = time.perf_counter() - t0
    log_line(paths, summary.line())
    echo(summary.line())
    return summary
