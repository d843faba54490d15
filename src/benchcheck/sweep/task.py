"""The sweep's task adapter for the one unit loop (``unit_loop.run_task``; docs/ARCHITECTURE.md).

:class:`GenerateTask`: a cell (bench, item, condition) -> its request (frames decoded: the Ray
executor's CPU stage) -> one ``generate`` call for a chunk -> a :class:`~sweep.runner.UnitResult`
per cell (its typed row, raw line, failure line; the Ray executor's engine stage). It is made of
the runner's own pieces (``prepare_unit``, ``unit_result``). :class:`GroupBook`: a (bench,
condition) group, the sweep's unit: its lease, the cells still to do read under it through the
reducer (a row under another config hash is stale and redone; three counted errors give a cell
up), and its appends (raw line, typed row, CSV row, failure line). Retries, giving up and stopping
on an unreachable or refusing server are ``unit_loop``'s policy, as for screening.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from tqdm import tqdm

from benchcheck.engines.base import Engine, Failure, Generation, engine_config_hash
from benchcheck.items import fingerprints
from benchcheck.lease import Lease, holder, try_lease
from benchcheck.records import ErrorRow, GenRow
from benchcheck.spec import RunSpec
from benchcheck.sweep.frames import decode_job
from benchcheck.sweep.plan import Cell
from benchcheck.sweep.results import SweepPaths, append_failures, append_raw, append_timing, log_line
from benchcheck.sweep.runner import (
    FrameFn,
    Prepared,
    RunIdentity,
    RunnerConfig,
    SweepSummary,
    Unit,
    begin_sweep,
    end_sweep,
    prepare_unit,
    unit_result,
    write_records,
)
from benchcheck.sweep.state import group_state
from benchcheck.unit_loop import (
    POLICY,
    Judgement,
    LoopOptions,
    Pending,
    Policy,
    StopState,
    judge_error,
    run_task_async,
)
from benchcheck.video.plans import FramePlan

Built = tuple[Cell, Prepared]
Echo = Callable[[str], None]


@dataclass(frozen=True, slots=True)
class StoreFrames:
    """Frames decoded from the video store in this process (the Ray executor's CPU actors; picklable)."""

    store: str | None

    async def __call__(self, video_id: str, plan: FramePlan) -> tuple[list[bytes], float]:
        if self.store is None:
            raise ValueError("no --store given")
        return decode_job(self.store, video_id, plan)


@dataclass(frozen=True, slots=True)
class GenerateTask:
    """The sweep adapter: cells -> requests -> one result per cell, under each condition's spec."""

    specs: Mapping[str, RunSpec]
    frames: FrameFn

    def group(self, cell: Cell) -> str:
        return cell.item.bench

    def describe(self, cell: Cell) -> str:
        return f"{cell.item.item_id} {cell.condition}"

    async def build(self, cells: Sequence[Cell]) -> list[Built]:
        """The chunk's cells prepared together, each decoding in a worker of its own: one after
        another, a call of long videos took the sum of its decodes while the pool's other workers
        idled and a serial engine waited (decision 112)."""
        prepared = await asyncio.gather(*(prepare_unit(Unit(c.item.bench, c.condition, (c,)), self.specs[c.condition],
                                                       self.frames) for c in cells))
        return list(zip(cells, prepared, strict=True))

    async def answer(self, engine: Engine, built: Sequence[Built]) -> list[Any]:
        """One ``generate`` call for the chunk; one ``UnitResult`` per cell (never raises)."""
        reqs = [r for _, p in built for r in p.requests]
        try:
            answers: list[Generation | Failure] = await engine.generate(reqs) if reqs else []
        except Exception as e:  # an engine bug must not lose the chunk: error rows, asked again
            answers = [Failure(r.request_id, "internal", f"{type(e).__name__}: {e}") for r in reqs]
        out, pos = [], 0
        config = engine_config_hash(engine)
        for cell, p in built:
            n = len(p.requests)
            out.append(unit_result(p, self.specs[cell.condition], answers[pos:pos + n], config))
            pos += n
        return out

    def judge(self, r: Any) -> tuple[Judgement, str]:
        rec = r.records[0] if r.records else None
        if isinstance(rec, GenRow):
            return "ok", ""
        if isinstance(rec, ErrorRow):
            return judge_error(rec)
        return "error", "no record"

    def tally(self, r: Any) -> dict[str, int]:
        return {"infer": r.infer}


@dataclass(slots=True)
class GroupBook:
    """A (bench, condition) group: the sweep's ``UnitBook``. Its appends count into ``summary``;
    its timing line is written by :meth:`close` once the group's unit is worked."""

    paths: SweepPaths
    bench: str
    condition: str
    cells: tuple[Cell, ...]  # the group's todo cells, as planned
    summary: SweepSummary
    max_errors: int = POLICY.max_errors
    sums: list[float] = field(default_factory=lambda: [0, 0.0, 0.0, 0])  # infer, infer_s, decode_s, tokens

    @property
    def name(self) -> str:
        return f"{self.bench}|{self.condition}"

    @property
    def size(self) -> int:
        return len(self.cells)

    def lease(self) -> Lease | None:
        lease = try_lease(self.paths.raw(self.condition, self.bench))
        if lease is None:
            self.summary.held += len(self.cells)
            self.summary.held_groups.add((self.bench, self.condition))
        return lease

    def holder(self) -> str:
        return holder(self.paths.raw(self.condition, self.bench))

    def todo(self) -> list[Pending[Cell]]:
        if not self.cells:
            return []
        st = group_state(self.paths, self.bench, self.condition, self.cells[0].config_hash,
                         fingerprints(c.item for c in self.cells))
        out = []
        for c in self.cells:
            v = st.verdict(c.item.item_id)
            if not v.done and not v.failed:
                out.append(Pending(c, v.counted_errors, bool(c.stale)))
        return out

    def append(self, results: Sequence[Any]) -> None:
        """Raw lines first (a kill before the rows leaves raw lines whose rows the rerun writes
        again), then the typed rows and their CSV rows, then the failure lines."""
        raw = [x for r in results for x in r.raw]
        if raw:
            append_raw(self.paths, self.condition, self.bench, raw)
        records = [x for r in results for x in r.records]
        added = write_records(self.paths, self.bench, self.condition, records)
        for rec in records:
            if isinstance(rec, GenRow):
                self.summary.written[rec.parse_status] += 1
        failures = [x for r in results for x in r.failures]
        if failures:
            append_failures(self.paths, failures)
            self.summary.failures += len(failures)
        infer = sum(r.infer for r in results)
        self.summary.count(self.condition, added, infer)
        for r in results:
            self.sums[0] += r.infer
            self.sums[1] += r.infer_s
            self.sums[2] += r.decode_s
            self.sums[3] += r.prompt_tokens

    def close(self) -> None:
        """The group's timing line and its ``done`` log line (a group worked in this run)."""
        s = self.sums
        t = {"bench": self.bench, "condition": self.condition, "infer": int(s[0]), "infer_s": round(s[1], 3),
             "decode_s": round(s[2], 3), "prompt_tokens": int(s[3])}
        append_timing(self.paths, [t])
        log_line(self.paths, f"done {self.bench} {self.condition}: infer={t['infer']} infer_s={t['infer_s']} "
                             f"decode_s={t['decode_s']}")


def group_books(cells: Sequence[Cell], paths: SweepPaths, summary: SweepSummary,
                max_errors: int = POLICY.max_errors) -> list[GroupBook]:
    """One book per (bench, condition) group with todo cells, in plan order."""
    groups: dict[tuple[str, str], list[Cell]] = {}
    for c in cells:
        if c.kind == "todo":
            groups.setdefault((c.item.bench, c.condition), []).append(c)
    return [GroupBook(paths, b, cond, tuple(cs), summary, max_errors) for (b, cond), cs in groups.items()]




async def run_groups(cells: Sequence[Cell], specs: Mapping[str, RunSpec], engine: Engine, frames: FrameFn,
                     paths: SweepPaths, cfg: RunnerConfig, echo: Echo, gpus: int | None = None,
                     endpoints: Sequence[str] = (), policy: Policy = POLICY) -> SweepSummary:
    """A planned sweep in this process: each (bench, condition) group through ``run_task`` with
    :class:`GenerateTask`, ``cfg.workers`` engine calls of ``cfg.chunk`` cells in flight over
    all groups, one dead server stopping them all. Then the reused rows and the run log."""
    t0 = time.perf_counter()
    summary = begin_sweep(cells, specs, paths)
    books = group_books(cells, paths, summary, policy.max_errors)
    log_line(paths, start_line_of(books, engine.name, engine.model_name, cfg.workers))
    task = GenerateTask(specs, frames)
    stop = StopState()
    opts = LoopOptions(workers=cfg.workers, items_per_call=cfg.chunk, policy=policy,
                       calls=asyncio.Semaphore(max(1, cfg.workers)), stop=stop)
    bar = tqdm(total=sum(b.size for b in books), desc="sweep", unit="item", disable=not cfg.progress)

    def tick(n: int) -> None:
        bar.update(n)

    async def one(book: GroupBook) -> None:
        t = await run_task_async(task, book, engine, opts, echo, tick, what="sweep")
        if not t.held and not stop.stopped:
            book.close()

    try:
        await asyncio.gather(*(one(b) for b in books))
    finally:
        bar.close()
    summary.aborted = stop.stopped
    ident = RunIdentity(engine.name, engine.model_name, tuple(endpoints), gpus, engine_config_hash(engine))
    return end_sweep(cells, specs, paths, summary, t0, echo, ident)


def start_line_of(books: Sequence[GroupBook], engine: str, model: str, workers: int) -> str:
    return (f"start: {len(books)} groups, {sum(b.size for b in books)} inferences, "
            f"engine {engine} model {model}, workers {workers}")
