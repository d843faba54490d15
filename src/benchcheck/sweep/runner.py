"""Run the sweep: units of (bench, condition, chunk of items), decoded in a process pool, asked
of the engine; each answer a typed row appended through ``store`` with its condition's
``config_hash``, then its exchange row appended to the CSV. Resumable: what is done is the
reducer's word over the rows (``sweep.state``); a row under another hash is redone.

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
from benchcheck.records import ErrorRow, GenRow
from benchcheck.spec import RunSpec, write_run_spec
from benchcheck.store import append_records, append_rows
from benchcheck.sweep.conditions import source_spec
from benchcheck.sweep.plan import Cell
from benchcheck.sweep.results import (
    ALL_CONDITIONS,
    SweepPaths,
    append_csv_fresh,
    append_failures,
    append_raw,
    append_timing,
    log_line,
)
from benchcheck.sweep.rows import (
    answer_record,
    csv_row,
    engine_error,
    engine_failure,
    failure_line,
    na_record,
    raw_of,
    reuse_record,
)
from benchcheck.sweep.state import answer_of, group_state, load_state, record_specs
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
    """What one unit produced; nothing is written yet. ``records``: the typed rows (answers and
    engine errors) in item order."""

    records: list[GenRow | ErrorRow] = field(default_factory=list)
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
    errors: tuple[ErrorRow, ...] = ()  # the same, as error rows of the items


async def prepare_unit(unit: Unit, spec: RunSpec, frames: FrameFn) -> Prepared:
    """Decode the unit's frames and build one request per cell; a bad video is a failure line."""
    reqs: list[GenerateRequest] = []
    asked: list[tuple[Cell, float]] = []
    failures: list[dict[str, Any]] = []
    errors: list[ErrorRow] = []
    total = 0.0
    for cell in unit.cells:
        images: list[bytes] = []
        decode_s = 0.0
        if cell.plan is not None:
            try:
                images, decode_s = await frames(cell.item.video_id or "", cell.plan)
            except (ValueError, OSError) as e:
                failures.append(failure_line(cell, "decode", str(e), spec))
                errors.append(engine_error(cell, spec, Failure(cell.item.item_id, "internal", f"decode: {e}")))
                continue
        total += decode_s
        reqs.append(GenerateRequest(request_id=f"{cell.condition}|{cell.item.item_id}", prompt=cell.prompt,
                                    images=tuple(images), max_tokens=spec.gen.max_tokens,
                                    assistant_prefix=spec.gen.assistant_prefix))
        asked.append((cell, decode_s))
    return Prepared(tuple(asked), tuple(reqs), tuple(failures), total, tuple(errors))


def unit_result(p: Prepared, spec: RunSpec, answers: Sequence[Generation | Failure]) -> UnitResult:
    """The records of a prepared unit once its requests are answered (pure): a row per answer, an
    error row and a failure line per failure."""
    out = UnitResult(records=list(p.errors), failures=list(p.failures), decode_s=p.decode_s)
    if not p.requests:
        return out
    out.unreachable = all(isinstance(a, Failure) and a.kind == "connection" for a in answers)
    for (cell, decode_s), ans in zip(p.asked, answers, strict=True):
        if isinstance(ans, Failure):
            out.records.append(engine_error(cell, spec, ans))
            out.failures.append(engine_failure(cell, spec, ans))
            continue
        row, raw = answer_record(cell, spec, ans, decode_s)
        out.records.append(row)
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
class CondRun:
    """One condition within a run: when its first unit began (or the previous unit ended, where
    the executor does not say), when its last ended, its inferences and rows added."""

    started: float
    ended: float
    infer: int = 0
    rows: int = 0


@dataclass(slots=True)
class SweepSummary:
    written: Counter[str] = field(default_factory=Counter)  # by status; "reuse" for reused rows
    failures: int = 0
    held: int = 0  # cells of (bench, condition) groups another live process holds: left to it
    held_groups: set[tuple[str, str]] = field(default_factory=set)
    wall_s: float = 0.0
    aborted: bool = False
    conditions: dict[str, CondRun] = field(default_factory=dict)

    def line(self) -> str:
        parts = " ".join(f"{k}={v}" for k, v in sorted(self.written.items()))
        held = f"; {self.held} held by another process" if self.held else ""
        return f"sweep: rows added {parts or 'none'}; failures {self.failures}{held}; {self.wall_s:.1f}s" + (
            " (stopped early: engine unreachable; rerun to continue)" if self.aborted else "")

    def count(self, condition: str, rows: int, infer: int = 0, started: float | None = None) -> None:
        now = time.time()
        c = self.conditions.setdefault(condition, CondRun(started if started is not None else now, now))
        c.ended, c.rows, c.infer = now, c.rows + rows, c.infer + infer


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


def write_records(paths: SweepPaths, bench: str, condition: str, records: Sequence[GenRow | ErrorRow]) -> int:
    """Typed rows through the store, then the answers' exchange rows to the CSV (a kill between the
    two is caught up by the next run's :func:`sync_csv`); returns CSV rows added."""
    if not records:
        return 0
    append_records(paths.rows(condition, bench), records)
    return len(append_csv_fresh(paths.csv, [csv_row(r) for r in records if isinstance(r, GenRow)]))


def _write_unit(paths: SweepPaths, unit: Unit, r: UnitResult, summary: SweepSummary) -> int:
    # Raw first: a kill before the row leaves a raw line whose row the rerun writes again.
    if r.raw:
        append_raw(paths, unit.condition, unit.bench, r.raw)
    added = write_records(paths, unit.bench, unit.condition, r.records)
    for rec in r.records:
        if isinstance(rec, GenRow):
            summary.written[rec.parse_status] += 1
    if r.failures:
        append_failures(paths, r.failures)
        summary.failures += len(r.failures)
    return added


def _write_settled(paths: SweepPaths, records: Sequence[GenRow], summary: SweepSummary, label: str) -> None:
    """NA and reused rows: raw lines (the reason and ``reused_from`` are kept even when the CSV has no
    ``meta`` column: a file made elsewhere), then the typed rows, then the CSV, per group."""
    groups: dict[tuple[str, str], list[GenRow]] = {}
    for rec in records:
        groups.setdefault((str(rec.step), str(rec.bench)), []).append(rec)
    for (condition, bench), recs in groups.items():
        append_raw(paths, condition, bench, [raw_of(x) for x in recs])
        write_records(paths, bench, condition, recs)
        summary.written[label] += len(recs)
        summary.count(condition, len(recs))


def write_static(cells: Sequence[Cell], specs: Mapping[str, RunSpec], paths: SweepPaths,
                 summary: SweepSummary) -> None:
    """NA rows and the failures of items without a usable video (no engine needed)."""
    _write_settled(paths, [na_record(c, specs[c.condition]) for c in cells if c.kind == "na"], summary, "NA")
    fails = [failure_line(c, "no_video", c.reason, specs[c.condition]) for c in cells if c.kind == "failure"]
    if fails:
        append_failures(paths, fails)
        summary.failures += len(fails)


def write_reused(cells: Sequence[Cell], specs: Mapping[str, RunSpec], paths: SweepPaths,
                 summary: SweepSummary) -> None:
    """Reused rows from their source answers, as the reducer reads them now (made under the source
    condition's spec for the same model and budget); a missing source waits for a rerun."""
    pending = [c for c in cells if c.kind == "reuse"]
    if not pending:
        return
    by_source = {c.reuse_from: source_spec(specs[c.condition], c.reuse_from) for c in pending if c.reuse_from}
    state = load_state(paths, by_source, {c.item.bench for c in pending})
    rows, waiting = [], []
    for c in pending:
        if (c.item.bench, c.reuse_from) in summary.held_groups:
            continue  # the process holding the source group writes this reuse when it is done
        src = answer_of(state, c.item.bench, c.reuse_from or "", c.item.item_id)
        if src is None or src.parse_status not in ("ok", "unparsed"):
            waiting.append(failure_line(c, "reuse_wait", f"no {c.reuse_from} answer yet; rerun after it is done",
                                        specs[c.condition]))
        else:
            rows.append(reuse_record(c, specs[c.condition], src))
    _write_settled(paths, rows, summary, "reuse")
    if waiting:
        append_failures(paths, waiting)
        summary.failures += len(waiting)


def lease_units(units: Sequence[Unit], paths: SweepPaths, leases: contextlib.ExitStack,
                summary: SweepSummary) -> list[Unit]:
    """Take the lease of each (bench, condition) group for the run (``leases`` holds them) and keep
    the cells still to do, read from the group's rows under them (the reducer, under the cells'
    hash). A group another live process holds is left to it (``summary.held``), so two executors
    on the same sweep split the work instead of doing it twice."""
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
    states = {g: group_state(paths, g[0], g[1], next(u.cells[0].config_hash for u in units
                                                         if (u.bench, u.condition) == g)) for g in mine}
    out = []
    for u in units:
        if (u.bench, u.condition) in mine:
            st = states[(u.bench, u.condition)]
            cells = tuple(c for c in u.cells if not (v := st.verdict(c.item.item_id)).done and not v.failed)
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
        self.last_end = time.time()
        self.bar = tqdm(total=sum(len(u.cells) for u in units), desc=desc, unit="item", disable=not cfg.progress)

    def __call__(self, unit: Unit, r: UnitResult, started: float | None = None) -> None:
        added = _write_unit(self.paths, unit, r, self.summary)
        self.summary.count(unit.condition, added, r.infer, started if started is not None else self.last_end)
        self.last_end = time.time()
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


def sync_csv(cells: Sequence[Cell], paths: SweepPaths) -> int:
    """Append to the CSV the current answers of the typed rows it lacks (a run killed between a
    row and its CSV row), groups in plan order, items in id order; returns rows added."""
    groups = dict.fromkeys((c.item.bench, c.condition, c.config_hash) for c in cells)
    added = 0
    for bench, condition, chash in groups:
        if not paths.rows(condition, bench).is_file():
            continue
        st = group_state(paths, bench, condition, chash)
        recs = [v.row for v in st.verdicts() if isinstance(v.row, GenRow)]
        added += len(append_csv_fresh(paths.csv, [csv_row(r) for r in recs]))
    return added


def record_run_specs(specs: Mapping[str, RunSpec], paths: SweepPaths) -> None:
    """Each condition's ``run_spec.json`` (beside the raw lines and the typed rows) and its spec kept
    by hash (``run_specs.jsonl``), so a later run can say what changed."""
    record_specs(paths, specs.values())
    for name, spec in specs.items():
        write_run_spec(spec, paths.results / "p1_raw" / name)
        write_run_spec(spec, paths.rows_dir(name))


def begin_sweep(cells: Sequence[Cell], specs: Mapping[str, RunSpec], paths: SweepPaths) -> SweepSummary:
    """Before any unit: each condition's run spec (and its hash's spec kept for later runs to say
    what changed), the CSV caught up with the typed rows, the NA rows and the no-video failures."""
    summary = SweepSummary()
    record_run_specs(specs, paths)
    n = sync_csv(cells, paths)
    if n:
        log_line(paths, f"csv: {n} rows caught up from {paths.results / 'sweep_rows'}")
    write_static(cells, specs, paths, summary)
    return summary


def start_line(units: Sequence[Unit], engine: str, model: str, workers: int) -> str:
    return (f"start: {len(units)} units, {sum(len(u.cells) for u in units)} inferences, "
            f"engine {engine} model {model}, workers {workers}")


@dataclass(frozen=True, slots=True)
class RunIdentity:
    """Who ran the sweep, for ``run_log.jsonl``: the engine, its model, endpoints, GPUs (0: a CPU
    run; None: not known, ``data.runlog`` then counts one per endpoint)."""

    engine: str
    model: str
    endpoints: tuple[str, ...] = ()
    gpus: int | None = None


def run_log_rows(summary: SweepSummary, started: float, ident: RunIdentity | None) -> list[dict[str, Any]]:
    """One row per condition the run wrote (its own interval) and one for the whole run
    (``condition`` = ``ALL_CONDITIONS``): what ``pack`` reports as wall time and items/s."""
    import socket

    base: dict[str, Any] = {"host": socket.gethostname(), "executor": "sweep"}
    if ident is not None:
        base.update(engine=ident.engine, model=ident.model, endpoints=list(ident.endpoints))
        if ident.gpus is not None:
            base["gpus"] = ident.gpus
    rows = [{**base, "condition": cond, "started": round(c.started, 3), "ended": round(c.ended, 3),
             "wall_s": round(c.ended - c.started, 3), "ok": c.infer, "rows_added": c.rows}
            for cond, c in summary.conditions.items()]
    ended = started + summary.wall_s
    rows.append({**base, "condition": ALL_CONDITIONS, "started": round(started, 3), "ended": round(ended, 3),
                 "wall_s": round(summary.wall_s, 3), "ok": sum(c.infer for c in summary.conditions.values()),
                 "rows_added": sum(c.rows for c in summary.conditions.values()), "aborted": summary.aborted})
    return rows


def end_sweep(cells: Sequence[Cell], specs: Mapping[str, RunSpec], paths: SweepPaths, summary: SweepSummary,
              t0: float, echo: Echo, ident: RunIdentity | None = None) -> SweepSummary:
    """After the units: the reused rows (their sources are written now), the run log, the summary line."""
    if not summary.aborted:
        write_reused(cells, specs, paths, summary)
    summary.wall_s = time.perf_counter() - t0
    append_rows(paths.run_log, run_log_rows(summary, time.time() - summary.wall_s, ident))
    log_line(paths, summary.line())
    echo(summary.line())
    return summary


async def run_sweep(cells: Sequence[Cell], specs: Mapping[str, RunSpec], engine: Engine, frames: FrameFn,
                    paths: SweepPaths, cfg: RunnerConfig, echo: Echo, gpus: int | None = None,
                    endpoints: Sequence[str] = ()) -> SweepSummary:
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
                started = time.time()
                sink(unit, await work_unit(unit, specs[unit.condition], engine, frames), started)

        try:
            await asyncio.gather(*(worker() for _ in range(max(1, cfg.workers))))
        finally:
            sink.close()
    ident = RunIdentity(engine.name, engine.model_name, tuple(endpoints), gpus)
    return end_sweep(cells, specs, paths, summary, t0, echo, ident)
