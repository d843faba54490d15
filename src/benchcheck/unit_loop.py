"""``run_task(adapter, book, engine)``: the one unit loop (docs/ARCHITECTURE.md, "run_task and executors").

Every executor works a unit through this loop or, where the work is spread over a cluster (Ray),
through its pieces: a task adapter says how to build the requests of a chunk of items and turn
the engine's answers into records (screening scores, the sweep generates); a unit book says how
to lease the unit, what is left in it and how records are appended. What is the same for every
task lives here once: the lease, the chunks, calls in flight, the retry rule with backoff, giving
an item up after ``Policy.max_errors`` counted errors, and stopping when the engine is unreachable
or refuses the run (:class:`Settler`, also used by the Ray executor's sink).

It knows nothing about rows, engines or files: only the protocols below.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections import Counter
from collections.abc import Callable, Coroutine, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from typing import Any, Generic, Literal, Protocol, TypeVar

from benchcheck.records import ErrorRow
from benchcheck.verdicts import MAX_ERRORS_PER_ITEM

W = TypeVar("W")  # one item of work
B = TypeVar("B")  # an item's built requests (picklable: the Ray executor moves them between actors)
R = TypeVar("R")  # a record (a row, or a failure line)
E = TypeVar("E", contravariant=True)  # the engine
W_contra = TypeVar("W_contra", contravariant=True)
R_contra = TypeVar("R_contra", contravariant=True)

Echo = Callable[[str], None]
# What a fresh record says of its item: ``left``: the server was unreachable (the item is not to
# blame: left for the next run, its retries untouched); ``refused``: the server refused the run
# itself (key or model): stop at once.
Judgement = Literal["ok", "error", "left", "refused"]
Outcome = Literal["ok", "retry", "failed", "left", "refused"]


# An HTTP status that means the server refused the run's key or model, not the item: the run stops
# and no item's retries are used up (screening and the sweep judge their rows by it).
REFUSED_STATUSES = (401, 403, 404)


def retry_free(kind: str, status: int | None) -> bool:
    """Whether a failure says nothing about the item (an unreachable server, a refused key or
    model): its error row never uses up the item's retries."""
    return kind == "connection" or status in REFUSED_STATUSES


def judge_error(row: ErrorRow) -> tuple[Judgement, str]:
    """The judgement of a task's error row: ``refused`` stops the run, ``left`` waits for the next
    run, ``error`` counts against the item."""
    if row.retry_free:
        return ("refused" if row.error_status in REFUSED_STATUSES else "left"), row.error
    return "error", row.error


class AnswerCut(asyncio.CancelledError):
    """An adapter's ``answer`` cancelled part-way (Ctrl-C): ``records`` are those of the items it
    finished, each whole, which the loop appends before the cancellation goes on; the other items
    get nothing (the next run asks them, as if the call had never started)."""

    def __init__(self, records: Sequence[Any]) -> None:
        super().__init__(f"cancelled with {len(records)} records finished")
        self.records = list(records)


@dataclass(frozen=True, slots=True)
class Policy:
    """The one retry and give-up policy of every executor and task."""

    max_errors: int = MAX_ERRORS_PER_ITEM  # counted error records before an item is given up
    abort_after_unreachable: int = 8  # engine calls in a row that only met an unreachable server
    backoff_step_s: float = 0.2  # wait before asking an item again: this per counted error ...
    backoff_max_s: float = 2.0  # ... up to this

    def backoff_s(self, errors: int) -> float:
        return min(self.backoff_max_s, self.backoff_step_s * max(0, errors))


POLICY = Policy()


class TaskAdapter(Protocol[W_contra, B, R, E]):
    """A task's pieces: what the loop (and the Ray stages) call, never a copy of them."""

    def group(self, work: W_contra) -> str:
        """What per-group counts are kept by (a benchmark)."""
        ...

    def describe(self, work: W_contra) -> str:
        """The item in a ``failed:`` line (``ID step 3``)."""
        ...

    async def build(self, works: Sequence[W_contra]) -> list[B]:
        """The requests of each item (frames read, decoded); a broken item is built as its error
        (never raises)."""
        ...

    async def answer(self, engine: E, built: Sequence[B]) -> list[R]:
        """One engine call for a chunk; exactly one record per built item (never raises)."""
        ...

    def judge(self, record: R) -> tuple[Judgement, str]:
        """What the record says of its item, and its error text (empty when ok)."""
        ...

    def tally(self, record: R) -> dict[str, int]:
        """Counts beyond ok/errors the task keeps (screening: ``removed``)."""
        ...


@dataclass(slots=True)
class Pending(Generic[W]):
    """An item still to do in a unit, with the error records that count that it already has."""

    work: W
    errors: int = 0
    stale: bool = False  # its rows were made under another config hash: asked again


class UnitBook(Protocol[W, R_contra]):
    """A unit's lease and records: where a task keeps them (screening: a step's unit file)."""

    @property
    def name(self) -> str: ...

    @property
    def size(self) -> int:
        """Items of the unit (done or not)."""
        ...

    def lease(self) -> AbstractContextManager[Any] | None:
        """The unit's lease, or None when another live process holds it."""
        ...

    def holder(self) -> str: ...

    def todo(self) -> Sequence[Pending[W]]:
        """The items still to do, read under the lease."""
        ...

    def append(self, records: Sequence[R_contra]) -> None:
        """Append a chunk's records whole (blocking)."""
        ...


@dataclass(slots=True)
class TaskSummary:
    unit: str
    held: bool = False  # another live process holds the unit's lease: skipped
    holder: str = ""
    held_items: int = 0
    attempted: int = 0
    stale: int = 0  # items asked again because their rows were under another config_hash
    ok: int = 0
    error_rows: int = 0
    failed: int = 0
    left: int = 0  # items whose server was unreachable: left for the next run
    wall_s: float = 0.0
    aborted: bool = False  # stopped early: the engine was unreachable or refused the run
    counts: Counter[str] = field(default_factory=Counter)  # the adapter's tallies (screening: removed)
    per_group: dict[str, Counter[str]] = field(default_factory=dict)
    failures: list[str] = field(default_factory=list)

    @property
    def removed(self) -> int:
        return self.counts["removed"]


@dataclass(slots=True)
class StopState:
    """Whether a run goes on: shared by the units an executor works at once (one dead server
    stops them all, said once)."""

    unreachable_streak: int = 0
    refused: str | None = None
    stopped: bool = False


class Settler(Generic[W, R]):
    """The one rule for fresh records: count them, say which items to ask again, and when to stop.
    The local loop settles each engine call's chunk; the Ray executor each batch its sink gets."""

    def __init__(self, adapter: TaskAdapter[W, Any, R, Any], summary: TaskSummary, policy: Policy = POLICY,
                 echo: Echo = print, what: str = "", state: StopState | None = None) -> None:
        self.adapter, self.summary, self.policy, self.echo = adapter, summary, policy, echo
        self.what = what or summary.unit
        self.state = state if state is not None else StopState()

    def outcome(self, p: Pending[W], record: R) -> Outcome:
        """Count one record of ``p`` into the summary and say what follows for the item."""
        s = self.summary
        verdict, error = self.adapter.judge(record)
        tally = s.per_group.setdefault(self.adapter.group(p.work), Counter())
        if verdict == "ok":
            s.ok += 1
            tally["ok"] += 1
            for k, n in self.adapter.tally(record).items():
                s.counts[k] += n
                tally[k] += n
            return "ok"
        s.error_rows += 1
        tally["errors"] += 1
        if verdict == "left":
            s.left += 1
            return "left"
        if verdict == "refused":
            if self.state.refused is None:
                self.state.refused = error
            return "refused"
        p.errors += 1
        if p.errors < self.policy.max_errors:
            return "retry"
        s.failed += 1
        s.failures.append(f"failed: {self.adapter.describe(p.work)} after {p.errors} errors: {error}")
        return "failed"

    def settle(self, chunk: Sequence[Pending[W]], records: Sequence[R],
               progress: Callable[[int], None] | None = None) -> list[Pending[W]]:
        """Count a chunk's records; return the items to ask again in this run. Unreachable-server
        records are never retried here (a dead server would burn every retry at once): they are
        left for the next run, and a streak of such chunks stops the run (:meth:`stop`)."""
        retry: list[Pending[W]] = []
        judged = [self.adapter.judge(r)[0] for r in records]
        st = self.state
        st.unreachable_streak = st.unreachable_streak + 1 if judged and all(j == "left" for j in judged) else 0
        for p, r in zip(chunk, records, strict=True):
            if self.outcome(p, r) == "retry":
                retry.append(p)
            elif progress is not None:
                progress(1)
        while self.summary.failures:
            self.echo(self.summary.failures.pop(0))
        self.stop()
        return retry

    def stop(self) -> bool:
        """Whether to stop the run now (said once, on ``echo``): the server refused the run, or the
        engine was unreachable for ``abort_after_unreachable`` calls in a row."""
        s, st = self.summary, self.state
        if not st.stopped:
            if st.refused is not None:
                st.stopped = True
                self.echo(f"{self.what}: the server refused the run ({st.refused}); check --model and the API "
                          "key, then run the same command again. Stopping.")
            elif st.unreachable_streak >= self.policy.abort_after_unreachable:
                st.stopped = True
                self.echo(f"{self.what}: the engine is unreachable ({st.unreachable_streak} calls in a row); "
                          "stopping. Run the same command again to retry.")
        s.aborted = s.aborted or st.stopped
        return s.aborted


@dataclass(frozen=True, slots=True)
class LoopOptions:
    """How to work a unit (not what is asked)."""

    workers: int = 4  # engine calls in flight
    items_per_call: int = 8
    policy: Policy = POLICY
    # Engine calls in flight shared with the other units of the same executor (None: ``workers`` per unit).
    calls: asyncio.Semaphore | None = None
    stop: StopState | None = None  # shared with the other units of the same run (None: this unit's own)


def _no_progress(n: int) -> None:
    return None


async def run_task_async(adapter: TaskAdapter[W, Any, R, E], book: UnitBook[W, R], engine: E,
                         opts: LoopOptions = LoopOptions(), echo: Echo = print,
                         progress: Callable[[int], None] = _no_progress, what: str = "") -> TaskSummary:
    """Work the unit ``book`` with ``engine``: take its lease (held: skipped), read what is left
    under it, ask the engine chunk by chunk, append each chunk's records whole, ask errors again
    with backoff until the policy gives the item up, stop when the engine is unreachable or
    refuses the run. Resumable by construction: the book reads back what is done."""
    t0 = time.time()
    lease = book.lease()
    if lease is None:
        return TaskSummary(book.name, held=True, holder=book.holder(), held_items=book.size)
    with lease:
        todo = list(book.todo())
        summary = TaskSummary(book.name, attempted=len(todo), stale=sum(p.stale for p in todo))
        settler: Settler[W, R] = Settler(adapter, summary, opts.policy, echo, what, opts.stop)
        if settler.stop():  # another unit of the run stopped it: leave this one for the next run
            summary.attempted = summary.stale = 0
            todo = []
        await _work(adapter, book, engine, todo, opts, settler, progress)
    summary.wall_s = round(time.time() - t0, 3)
    return summary


def run_task(adapter: TaskAdapter[W, Any, R, E], book: UnitBook[W, R], engine: E,
             opts: LoopOptions = LoopOptions(), echo: Echo = print) -> TaskSummary:
    """Blocking ``run_task_async`` for an executor that works one unit per call (its own event loop)."""
    return asyncio.run(run_task_async(adapter, book, engine, opts, echo))


async def _work(adapter: TaskAdapter[W, Any, R, E], book: UnitBook[W, R], engine: E, todo: list[Pending[W]],
                opts: LoopOptions, settler: Settler[W, R], progress: Callable[[int], None]) -> None:
    n = max(1, opts.items_per_call)
    queue: asyncio.Queue[list[Pending[W]]] = asyncio.Queue()
    for k in range(0, len(todo), n):
        queue.put_nowait(todo[k:k + n])
    pending = len(todo)
    # Woken when a chunk settles (a retry queued, or the last item done, or the run stopped), so
    # a worker with nothing to take waits instead of polling.
    settled = asyncio.Event()

    async def worker() -> None:
        nonlocal pending
        while pending > 0 and not settler.stop():
            try:
                chunk = queue.get_nowait()
            except asyncio.QueueEmpty:
                settled.clear()
                await settled.wait()
                continue
            async with opts.calls or contextlib.nullcontext():
                built = await adapter.build([p.work for p in chunk])
                try:
                    records = await adapter.answer(engine, built)
                except AnswerCut as cut:
                    if cut.records:
                        await in_thread_to_end(book.append, cut.records)
                    raise
            await in_thread_to_end(book.append, records)
            retry = settler.settle(chunk, records, progress)
            pending -= len(chunk) - len(retry)
            if retry and not settler.stop():
                await asyncio.sleep(opts.policy.backoff_s(max(p.errors for p in retry)))
                queue.put_nowait(retry)
            settled.set()

    await gather_to_end([worker() for _ in range(max(1, min(opts.workers, max(1, len(todo)))))])


async def gather_to_end(coros: Sequence[Coroutine[Any, Any, None]]) -> None:
    """Run ``coros`` at once and wait for them all. When one fails, or this task is cancelled
    (Ctrl-C), the others are cancelled and still waited for to their end before the error goes on
    (``asyncio.gather`` goes on at the first): a worker ending an engine call or appending the rows
    it finished does so while its unit's lease is held, and the engine is closed after its last call."""
    tasks = [asyncio.ensure_future(c) for c in coros]
    try:
        await asyncio.gather(*tasks)
    except BaseException as e:
        if not isinstance(e, asyncio.CancelledError):  # cancelled, gather has cancelled them: once is enough
            for t in tasks:
                t.cancel()
        while not all(t.done() for t in tasks):
            with contextlib.suppress(asyncio.CancelledError):  # cancelled again: they still end first
                await asyncio.wait(tasks)
        raise


async def in_thread_to_end(fn: Callable[..., None], *args: Any) -> None:
    """``fn(*args)`` in a worker thread, waited for to its end even when this task is cancelled (a
    thread cannot be): appended rows are whole and under the unit's lease; the cancellation goes on
    once it has ended (its own error, if any, first)."""
    work = asyncio.get_running_loop().run_in_executor(None, fn, *args)
    cancelled: asyncio.CancelledError | None = None
    while not work.done():
        try:
            await asyncio.wait([work])
        except asyncio.CancelledError as e:
            cancelled = cancelled or e
    work.result()
    if cancelled is not None:
        raise cancelled
