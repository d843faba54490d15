"""``run_task(spec, unit, engine, store)``: the one function that works a unit (docs/ARCHITECTURE.md).

Every executor calls it: the local runner (``screen``), ``launch``'s client shards, Slurm array
tasks, and a Ray actor would. It takes the unit's lease (a second process on the same unit skips
it as held), reads the unit's rows once under the lease, asks the engine for the items still to
do, appends each chunk's rows whole, retries error rows up to the limit, and returns what
happened. Resumable by construction: done is read back from the rows.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal, Protocol, TypeVar

from benchcheck.engines.base import Engine, Failure, LetterScores, engine_config_hash
from benchcheck.items import Item
from benchcheck.lease import holder
from benchcheck.records import ErrorRow, ScoreRow
from benchcheck.screen.extra_perms import ExtraPerms, score_extra
from benchcheck.screen.frames import FrameSource
from benchcheck.screen.requests import ItemRequests, build_item_requests
from benchcheck.screen.rows import REFUSED_STATUSES, RowContext, error_row, result_row
from benchcheck.spec import RunSpec
from benchcheck.store import StepStore
from benchcheck.verdicts import MAX_ERRORS_PER_ITEM

Echo = Callable[[str], None]
Row = ScoreRow | ErrorRow


@dataclass(frozen=True, slots=True)
class WorkUnit:
    """One unit of a step: a benchmark (or one part of a large one) and its eligible items."""

    step: int
    bench: str
    part: int
    n_parts: int
    items: tuple[Item, ...]  # eligible here: still to do, done or failed (the rows decide which)

    @property
    def name(self) -> str:
        return self.bench if self.n_parts == 1 else f"{self.bench}.p{self.part}"


@dataclass(frozen=True, slots=True)
class TaskOptions:
    """How to work a unit (not what is asked: that is the RunSpec)."""

    frames: FrameSource | None = None
    workers: int = 4  # engine calls in flight
    batch_items: int = 8  # items per engine call
    max_errors: int = MAX_ERRORS_PER_ITEM
    abort_after_unreachable: int = 8  # engine calls in a row that only met connection failures
    host: str = field(default_factory=socket.gethostname)
    # Engine calls in flight shared with other tasks of the same executor (None: ``workers`` per task).
    calls: asyncio.Semaphore | None = None
    extra: ExtraPerms | None = None  # --extra-perms: evidence for the audit, never the decision


@dataclass(slots=True)
class TaskSummary:
    unit: str
    held: bool = False  # another live process holds the unit's lease: skipped
    holder: str = ""
    held_items: int = 0
    attempted: int = 0
    stale: int = 0  # items asked again because their rows were under another config_hash
    ok: int = 0
    removed: int = 0
    error_rows: int = 0
    failed: int = 0
    wall_s: float = 0.0
    aborted: bool = False  # stopped early: the engine was unreachable or refused the run
    per_bench: dict[str, Counter[str]] = field(default_factory=dict)
    failures: list[str] = field(default_factory=list)


@dataclass(slots=True)
class _Job:
    item: Item
    errors: int  # error rows that count, this item already has


@dataclass(slots=True)
class _Run:
    """Mutable bookkeeping of one task, shared by its workers (one event loop: no locks needed)."""

    pending: int  # items not settled yet (ok, out of retries, or left for the next run)
    summary: TaskSummary
    max_errors: int
    unreachable_streak: int = 0
    refused: str | None = None  # the server refused the run itself (401/403/404): stop at once

    def settle(self, chunk: list[_Job], rows: Sequence[Row], progress: Callable[[int], None]) -> list[_Job]:
        """Count a chunk's rows; return the jobs to retry in this run. ``retry_free`` rows (server
        unreachable, key or model refused) are not retried here: a dead server would burn every
        retry at once. They are left for the next run and never use up an item's retries."""
        s, retry = self.summary, []
        unreachable = all(isinstance(r, ErrorRow) and r.error_kind == "connection" for r in rows)
        self.unreachable_streak = self.unreachable_streak + 1 if unreachable else 0
        for job, row in zip(chunk, rows, strict=True):
            outcome, job.errors = count_row(s, job.item.bench, row, job.errors, self.max_errors)
            if outcome == "retry":
                retry.append(job)
                continue
            if outcome == "refused" and self.refused is None:
                self.refused = row.error if isinstance(row, ErrorRow) else ""
            elif outcome == "failed":
                s.failures.append(f"failed: {job.item.item_id} step {row.step} after {job.errors} errors: "
                                  f"{getattr(row, 'error', '')}")
            self.pending -= 1
            progress(1)
        return retry


class Counts(Protocol):
    """What a runner's summary counts (TaskSummary, the Ray executor's RunSummary)."""

    ok: int
    removed: int
    error_rows: int
    failed: int
    per_bench: dict[str, Counter[str]]


Outcome = Literal["ok", "retry", "failed", "left", "refused"]


def count_row(s: Counts, bench: str, row: Row, errors: int, max_errors: int) -> tuple[Outcome, int]:
    """The one rule for a fresh row of an item that had ``errors`` counted errors: count it into
    ``s`` and say what follows (the item's counted errors after it returned beside). ``retry_free``
    rows (server unreachable, key or model refused) never use up an item's retries: ``left`` for
    the next run, ``refused`` when the server refused the run itself."""
    tally = s.per_bench.setdefault(bench, Counter())
    if isinstance(row, ScoreRow):
        s.ok += 1
        s.removed += row.removed
        tally["ok"] += 1
        tally["removed"] += row.removed
        return "ok", errors
    s.error_rows += 1
    tally["errors"] += 1
    if row.retry_free:
        return ("refused" if row.error_status in REFUSED_STATUSES else "left"), errors
    errors += 1
    if errors < max_errors:
        return "retry", errors
    s.failed += 1
    return "failed", errors


def _no_progress(n: int) -> None:
    return None


async def run_task_async(spec: RunSpec, unit: WorkUnit, engine: Engine, store: StepStore,
                         opts: TaskOptions = TaskOptions(), echo: Echo = print,
                         progress: Callable[[int], None] = _no_progress) -> TaskSummary:
    """Work ``unit`` under ``spec`` with ``engine``, appending rows to ``store``; see the module doc."""
    t0 = time.time()
    path = store.unit_path(unit.bench, unit.part, unit.n_parts)
    lease = store.lease(path)
    if lease is None:
        return TaskSummary(unit.name, held=True, holder=holder(path), held_items=len(unit.items))
    with lease:
        state = store.unit_state(path, spec.config_hash, opts.max_errors)
        verdicts = [(it, state.verdict(it.item_id)) for it in unit.items]
        todo = call_order(spec, [(it, v) for it, v in verdicts if v.status in ("pending", "error")],
                          lambda t: t[0])
        summary = TaskSummary(unit.name, attempted=len(todo), stale=sum(v.stale for _, v in todo))
        jobs = [_Job(it, v.counted_errors) for it, v in todo]
        row_ctx = RowContext(unit.step, spec.name, engine.model_name, engine.revision, engine.name,
                             spec.config_hash, spec.prompt.intro_name, opts.host, engine_config_hash(engine))
        await _work(spec, jobs, engine, store, path, opts, row_ctx, summary, echo, progress)
    summary.wall_s = round(time.time() - t0, 3)
    return summary


T = TypeVar("T")


def call_order(spec: RunSpec, todo: Sequence[T], item: Callable[[T], Item]) -> list[T]:
    """The work still to do (``item`` gives each entry's item) in the order it goes to the
    engine: as listed, or for a step that shows frames, the questions of one video next to each
    other (in the order listed), so that they meet in one engine call: the ``hf`` engine then
    shares their frames and prompt prefix (``hf_prefix``), a server's prefix cache finds them
    warm. Rows land in this order; what is done is read back by item id, so a rerun resumes the
    same. Every executor orders its work by this rule (``run_task``, the Ray executor)."""
    if not spec.frames.visual:
        return list(todo)
    return sorted(todo, key=lambda t: item(t).video_id or "")  # stable: each video's items as listed


def run_task(spec: RunSpec, unit: WorkUnit, engine: Engine, store: StepStore, opts: TaskOptions = TaskOptions(),
             echo: Echo = print) -> TaskSummary:
    """Blocking ``run_task_async`` for an executor that works one unit per call (its own event loop)."""
    return asyncio.run(run_task_async(spec, unit, engine, store, opts, echo))


async def _work(spec: RunSpec, jobs: list[_Job], engine: Engine, store: StepStore, path: Path,
                opts: TaskOptions, row_ctx: RowContext, summary: TaskSummary, echo: Echo,
                progress: Callable[[int], None]) -> None:
    queue: asyncio.Queue[list[_Job]] = asyncio.Queue()
    for k in range(0, len(jobs), max(1, opts.batch_items)):
        queue.put_nowait(jobs[k:k + opts.batch_items])
    run = _Run(pending=len(jobs), summary=summary, max_errors=opts.max_errors)

    async def worker() -> None:
        while run.pending > 0 and not summary.aborted:
            try:
                chunk = queue.get_nowait()
            except asyncio.QueueEmpty:
                await asyncio.sleep(0.01)
                continue
            async with opts.calls or contextlib.nullcontext():
                rows = await score_chunk(spec, [j.item for j in chunk], engine, opts.frames, row_ctx, opts.extra)
            await asyncio.to_thread(store.append, path, rows)
            retry = run.settle(chunk, rows, progress)
            while summary.failures:
                echo(summary.failures.pop(0))
            if run.unreachable_streak >= opts.abort_after_unreachable and not summary.aborted:
                summary.aborted = True
                echo(f"{spec.name}: the engine is unreachable ({run.unreachable_streak} calls in a row); "
                     "stopping. Run the same command again to retry.")
            if run.refused and not summary.aborted:
                summary.aborted = True
                echo(f"{spec.name}: the server refused the run ({run.refused}); check --model and the "
                     "API key, then run the same command again. Stopping.")
            if retry:
                await asyncio.sleep(min(2.0, 0.2 * max(j.errors for j in retry)))
                queue.put_nowait(retry)

    await asyncio.gather(*(worker() for _ in range(max(1, min(opts.workers, max(1, len(jobs)))))))


async def score_chunk(spec: RunSpec, items: Sequence[Item], engine: Engine, frames: FrameSource | None,
                      row_ctx: RowContext, extra: ExtraPerms | None = None) -> list[Row]:
    """One engine call for a chunk of items; every item gets exactly one row back."""
    built: list[ItemRequests | str] = []
    for item in items:
        try:
            grid = None
            if spec.frames.visual:
                if frames is None or not item.video_id:
                    raise ValueError("no frame source")
                grid = await asyncio.to_thread(frames.grid, item.video_id)
            built.append(build_item_requests(spec, item, grid))
        except Exception as e:  # a broken frame folder is this item's error, never the run's
            built.append(f"frames: {type(e).__name__}: {e}")
    reqs = [r for b in built if isinstance(b, ItemRequests) for r in b.requests]
    try:
        answers: list[LetterScores | Failure] = await engine.score(reqs) if reqs else []
    except Exception as e:  # an engine bug must not lose the chunk: error rows, retried later
        answers = [Failure(r.request_id, "internal", f"{type(e).__name__}: {e}") for r in reqs]
    rows: list[Row] = []
    pos = 0
    for item, b in zip(items, built, strict=True):
        if isinstance(b, str):
            rows.append(error_row(item, row_ctx, b))
            continue
        n = len(b.requests)
        rows.append(result_row(spec, b, row_ctx, answers[pos:pos + n]))
        pos += n
    if extra is not None and extra.n > 0:
        await score_extra(spec, [(b, r) for b, r in zip(built, rows, strict=True) if isinstance(b, ItemRequests)],
                          engine, extra)
    return rows
