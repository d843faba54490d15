"""Run the sweep: units of (bench, condition, chunk of items), decoded in a process pool, asked
of the engine, appended to the CSV. Resumable: what is done is read back from the CSV.

The pieces are shared by every executor (this local loop and the Ray executor,
``executors/ray_sweep.py``), so the rule for each lives here once: :func:`begin_sweep` (run specs,
NA rows, no-video failures), :func:`lease_units` (each (bench, condition) group's lease taken for
the run, the cells still to do read under it), :func:`prepare_unit` (decode, build requests) and
:func:`unit_result` (answers -> rows, raw lines, failures; pure), :class:`UnitSink` (append,
count, time, the unreachable streak) and :func:`end_sweep` (reused rows, whose sources the units
just wrote, and the summary line). :func:`run_sweep` is the local executor: ``workers`` units in
flight in one event loop.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections import Counter, defaultdict
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from benchcheck.engines.base import Engine, Failure, GenerateRequest, Generation
from benchcheck.lease import try_lease
from benchcheck.spec import RunSpec, write_run_spec
from benchcheck.sweep.plan import Cell
from benchcheck.sweep.results import (
    SweepPaths,
    append_csv,
    append_csv_fresh,
    append_failures,
    append_raw,
    append_timing,
    done_keys,
    log_line,
    read_csv,
)
from benchcheck.sweep.rows import answer_rows, engine_failure, failure_line, na_row, raw_of, reuse_row
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


@dataclass(frozen=True, slots=True)
class Prepared:
    """A unit with its frames decoded: the engine requests and the cells they answer (picklable,
    so the Ray executor's CPU actors hand it to its engine actors)."""

    asked: tuple[tuple[Cell, float], ...]  # (cell, its decode seconds), one per request
    requests: tuple[GenerateRequest, ...]
    failures: tuple[dict[str, Any], ...]  # decode failures
    decode_s: float


async def prepare_unit(unit: Unit, spec: RunSpec, frames: FrameFn) -> Prepared:
    """Decode the unit's frames and build one request per cell; a bad video is a failure line."""
    reqs: list[GenerateRequest] = []
    asked: list[tuple[Cell, float]] = []
    failures: list[dict[str, Any]] = []
    total = 0.0
    for cell in unit.cells:
        images: list[bytes] = []
        decode_s = 0.0
        if cell.plan is not None:
            try:
                images, decode_s = await frames(cell.item.video_id or "", cell.plan)
            except (ValueError, OSError) as e:
                failures.append(failure_line(cell, "decode", str(e), spec))
                continue
        total += decode_s
        reqs.append(GenerateRequest(request_id=f"{cell.condition}|{cell.item.item_id}", prompt=cell.prompt,
                                    images=tuple(images), max_tokens=spec.gen.max_tokens,
                                    assistant_prefix=spec.gen.assistant_prefix))
        asked.append((cell, decode_s))
    return Prepared(tuple(asked), tuple(reqs), tuple(failures), total)


def unit_result(p: Prepared, spec: RunSpec, answers: Sequence[Generation | Failure]) -> UnitResult:
    """The records of a prepared unit once its requests are answered (pure): rows for answers,
    failure lines for the rest."""
    out = UnitResult(failures=list(p.failures), decode_s=p.decode_s)
    if not p.requests:
        return out
    out.unreachable = all(isinstance(a, Failure) and a.kind == "connection" for a in answers)
    for (cell, decode_s), ans in zip(p.asked, answers, strict=True):
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


async def work_unit(unit: Unit, spec: RunSpec, engine: Engine, frames: FrameFn) -> UnitResult:
    """Decode the unit's frames, generate, parse: rows for answers, failures for the rest."""
    p = await prepare_unit(unit, spec, frames)
    answers = await engine.generate(list(p.requests)) if p.requests else []
    return unit_result(p, spec, answers)


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
    held: int = 0  # cells of (bench, condition) groups another live process holds: left to it
    held_groups: set[tuple[str, str]] = field(default_factory=set)
    wall_s: float = 0.0
    aborted: bool = False

    def line(self) -> str:
        parts = " ".join(f"{k}={v}" for k, v in sorted(self.written.items()))
        held = f"; {self.held} held by another process" if self.held else ""
        return f"sweep: rows added {parts or 'none'}; failures {self.failures}{held}; {self.wall_s:.1f}s" + (
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


def _append_raw_rows(paths: SweepPaths, rows: Sequence[Mapping[str, Any]]) -> None:
    """Raw lines of NA and reused rows, before their CSV rows (as for answers): the reason and
    ``reused_from`` are kept even when the CSV has no ``meta`` column (a file made elsewhere)."""
    groups: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for r in rows:
        groups.setdefault((str(r["condition"]), str(r["bench"])), []).append(raw_of(r))
    for (condition, bench), raw in groups.items():
        append_raw(paths, condition, bench, raw)


def write_static(cells: Sequence[Cell], specs: Mapping[str, RunSpec], paths: SweepPaths,
                 summary: SweepSummary) -> None:
    """NA rows and the failures of items without a usable video (no engine needed)."""
    na = [na_row(c, specs[c.condition]) for c in cells if c.kind == "na"]
    _append_raw_rows(paths, na)
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
        if (c.item.bench, c.reuse_from) in summary.held_groups:
            continue  # the process holding the source group writes this reuse when it is done
        if src is None or src.get("status") not in ("ok", "unparsed"):
            waiting.append(failure_line(c, "reuse_wait", f"no {c.reuse_from} answer yet; rerun after it is done",
                                        specs[c.condition]))
        else:
            rows.append(reuse_row(c, specs[c.condition], src))
    _append_raw_rows(paths, rows)
    summary.written["reuse"] += append_csv(paths.csv, rows)
    if waiting:
        append_failures(paths, waiting)
        summary.failures += len(waiting)


def lease_units(units: Sequence[Unit], paths: SweepPaths, leases: contextlib.ExitStack,
                summary: SweepSummary) -> list[Unit]:
    """Take the lease of each (bench, condition) group for the run (``leases`` holds them) and keep
    the cells still to do, read from the CSV under them. A group another live process holds is
    left to it (``summary.held``), so two executors on the same sweep split the work instead of
    doing it twice; the CSV's own key check still writes each row once whatever happens."""
    held: set[tuple[str, str]] = set()
    mine: set[tuple[str, str]] = set()
    for u in units:
        group = (u.bench, u.condition)
        if group not in mine and group not in held:
            lease = try_lease(paths.raw(u.condition, u.bench))
            if lease is None:
                held.add(group)
            else:
                leases.enter_context(lease)
                mine.add(group)
        if group in held:
            summary.held += len(u.cells)
            summary.held_groups.add(group)
    done = done_keys(read_csv(paths.csv)) if mine else set()
    out = []
    for u in units:
        if (u.bench, u.condition) in mine:
            cells = tuple(c for c in u.cells if c.key not in done)
            if cells:
                out.append(Unit(u.bench, u.condition, cells))
    return out


class UnitSink:
    """What follows a worked unit in every executor: its files appended, its rows counted, its
    group's timing line once the group is done, the unreachable streak, the progress bar."""

    def __init__(self, paths: SweepPaths, units: Sequence[Unit], summary: SweepSummary, cfg: RunnerConfig,
                 desc: str = "sweep") -> None:
        from tqdm import tqdm

        self.paths, self.summary, self.cfg = paths, summary, cfg
        self.timing = _Timing(units)
        self.streak = 0
        self.bar = tqdm(total=sum(len(u.cells) for u in units), desc=desc, unit="item", disable=not cfg.progress)

    def __call__(self, unit: Unit, r: UnitResult) -> None:
        _write_unit(self.paths, unit, r, self.summary)
        t = self.timing.add(unit, r)
        if t is not None:
            append_timing(self.paths, [t])
            log_line(self.paths, f"done {t['bench']} {t['condition']}: infer={t['infer']} "
                                 f"infer_s={t['infer_s']} decode_s={t['decode_s']}")
        self.streak = self.streak + 1 if r.unreachable else 0
        if self.streak >= self.cfg.abort_after_unreachable:
            self.summary.aborted = True
        self.bar.update(len(unit.cells))

    def close(self) -> None:
        self.bar.close()


def begin_sweep(cells: Sequence[Cell], specs: Mapping[str, RunSpec], paths: SweepPaths) -> SweepSummary:
    """Before any unit: each condition's run spec, the NA rows and the no-video failures."""
    summary = SweepSummary()
    for name, spec in specs.items():
        write_run_spec(spec, paths.results / "p1_raw" / name)
    write_static(cells, specs, paths, summary)
    return summary


def start_line(units: Sequence[Unit], engine: str, model: str, workers: int) -> str:
    return (f"start: {len(units)} units, {sum(len(u.cells) for u in units)} inferences, "
            f"engine {engine} model {model}, workers {workers}")


def end_sweep(cells: Sequence[Cell], specs: Mapping[str, RunSpec], paths: SweepPaths, summary: SweepSummary,
              t0: float, echo: Echo) -> SweepSummary:
    """After the units: the reused rows (their sources are written now), the summary line."""
    if not summary.aborted:
        write_reused(cells, specs, paths, summary)
    summary.wall_s = time.perf_counter() - t0
    log_line(paths, summary.line())
    echo(summary.line())
    return summary


async def run_sweep(cells: Sequence[Cell], specs: Mapping[str, RunSpec], engine: Engine, frames: FrameFn,
                    paths: SweepPaths, cfg: RunnerConfig, echo: Echo) -> SweepSummary:
    """Execute a planned sweep (see the module doc)."""
    t0 = time.perf_counter()
    summary = begin_sweep(cells, specs, paths)
    with contextlib.ExitStack() as leases:
        units = lease_units(make_units(cells, cfg.chunk), paths, leases, summary)
        log_line(paths, start_line(units, engine.name, engine.model_name, cfg.workers))
        queue: asyncio.Queue[Unit] = asyncio.Queue()
        for u in units:
            queue.put_nowait(u)
        sink = UnitSink(paths, units, summary, cfg)

        async def worker() -> None:
            while not summary.aborted:
                try:
                    unit = queue.get_nowait()
                except asyncio.QueueEmpty:
                    return
                sink(unit, await work_unit(unit, specs[unit.condition], engine, frames))

        try:
            await asyncio.gather(*(worker() for _ in range(max(1, cfg.workers))))
        finally:
            sink.close()
    return end_sweep(cells, specs, paths, summary, t0, echo)
