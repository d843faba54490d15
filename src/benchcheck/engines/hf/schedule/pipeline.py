"""How the ``hf`` engine feeds its device: encode, plan batches, queue, collect, overlapped.

Requests are encoded in worker threads, in blocks (``schedule.batches.encoding_blocks``), while the
device works; they are planned into length-sorted batches chunk by chunk in arrival order
(``schedule.batches.chunk_spans``), a chunk's largest batch queued last (``largest_last``); each batch
is queued on the device before the previous one's results are read and built. A request that
cannot be encoded, a batch that fails, or a batch too large for the device's memory (split in
halves, down to one request, whether it ran out when queued or when its results were read) fails
only its own requests. A call told to stop (its caller was cancelled: Ctrl-C) runs no further
batch: it ends at the next batch boundary with what landed (``Stopped``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Executor, Future
from dataclasses import dataclass
from functools import partial
from threading import Event
from typing import Any, TypeVar

import torch

from benchcheck.engines.base import Failure, ImageRef
from benchcheck.engines.hf.attention.cache import reserved_slots
from benchcheck.engines.hf.forward.batch import padded_width
from benchcheck.engines.hf.forward.packed import Family
from benchcheck.engines.hf.inputs.encoder import EncodedPrompt
from benchcheck.engines.hf.schedule.batches import balanced, batch_tokens, chunk_spans, encoding_blocks, plan_batches
from benchcheck.engines.hf.schedule.families import packed_length, plan_families, plan_family_batches, worth_sharing

R = TypeVar("R")

# Text-only requests are encoded this many at a time (one tokenizer call, outside Python's lock).
TEXT_BLOCK = 64


@dataclass(frozen=True, slots=True)
class Job:
    """What encoding needs of a score or generate request."""

    request_id: str
    prompt: str
    images: Sequence[ImageRef]
    prefix: str | None
    system: str | None
    new_tokens: int


@dataclass(frozen=True, slots=True)
class Encoded:
    prompt: EncodedPrompt
    new_tokens: int
    encode_s: float


@dataclass(frozen=True, slots=True)
class Plan:
    """The engine's batching knobs for one call (its ``HFConfig``'s of the same names)."""

    max_batch_size: int
    max_batch_tokens: int
    sort_window: int | None = None  # requests sorted together; None: 8 batches of text, 2 with images
    chunk_growth: int = 2
    first_chunk: int | None = None  # None: by what the requests carry (``first_chunk``)
    # Requests that share nothing run in the same unpadded row as families when every prompt of
    # their chunk is at most this long (0: never; ``HFEngine.unpadded_scoring``); else apart.
    one_row_tokens: int = 0
    share_frames: bool = True  # one video's questions planned together (``schedule.families.plan_families``)
    # K/V slots of a generation batch (op ``decode_together``: its rows prefilled apart, decoded
    # together); 0: ``max_batch_tokens``, as a scoring batch.
    decode_batch_tokens: int = 0


def one_row(prompts: Sequence[EncodedPrompt], limit: int) -> bool:
    """Prompts that share nothing run unpadded in one row: every one at most ``limit`` tokens
    (``Plan.one_row_tokens``; 0: never)."""
    return limit > 0 and all(p.n_tokens <= limit for p in prompts)


@dataclass(frozen=True, slots=True)
class _Slot:
    """One request's place in a block of requests encoded together."""

    block: Future[list[Encoded | Failure]]
    at: int

    def result(self) -> Encoded | Failure:
        return self.block.result()[self.at]


@dataclass(frozen=True, slots=True)
class PlannedBatch:
    """One planned batch: its requests (indices into the call's jobs, in the order they run) and
    the prefix families it was planned with (``schedule.families.Family``, members indexing ``idx``).
    No families: it was planned without sharing, and every request runs in full."""

    idx: list[int]
    families: tuple[Family, ...] = ()

    def halves(self) -> tuple[PlannedBatch, PlannedBatch]:
        """The batch cut at its middle request (when it is too large for the device's memory).
        Each family keeps its members on either side, with its prefix: they still share it."""
        mid = len(self.idx) // 2
        return self._part(0, mid), self._part(mid, len(self.idx))

    def _part(self, lo: int, hi: int) -> PlannedBatch:
        families = []
        for f in self.families:
            members = tuple(m - lo for m in f.members if lo <= m < hi)
            if members:
                families.append(Family(members, f.prefix))
        return PlannedBatch(self.idx[lo:hi], tuple(families))


class Stopped(Exception):
    """A call stopped part-way (``run_pipeline``'s ``stop``): ``done`` has one entry per job, its
    result where its batch landed whole before the stop, else None (never part of an answer)."""

    def __init__(self, done: Sequence[object | None]) -> None:
        super().__init__(f"stopped with {sum(d is not None for d in done)} of {len(done)} requests answered")
        self.done = list(done)


class BatchCut(Exception):
    """Raised by a batch's results function when the call's stop cut the batch short (a generation
    stopped mid-decode): its requests are left unanswered, not failed."""


Encode = Callable[[Sequence[Job]], list[Encoded | Failure]]
# Queues one batch (its planned families included) on the device, given its requests' encodings
# in batch order; returns the function that waits for and builds their results.
Run = Callable[[PlannedBatch, list[Encoded]], Callable[[], list[R]]]


# Told of the batch that will run after the one about to run, with its requests' encodings, so
# that it can prepare what needs no device (``HFEngine``'s generation stages its inputs ahead).
Stage = Callable[[PlannedBatch, list[Encoded]], None]


def run_pipeline(jobs: list[Job], encode: Encode, threads: Executor, plan: Plan, run: Run[R],
                 share: bool = False, stage: Stage | None = None, stop: Event | None = None) -> list[R | Failure]:
    """Every job's result in order: encoded by ``encode`` on ``threads``, batched by ``plan``,
    and run by ``run``, which queues one batch and returns the function that waits for and
    builds its results. With ``share``, requests sharing a prefix stay in one batch, and ``run``
    receives the families each batch was planned with (planned once, per chunk). With ``stage``,
    before each batch runs, the batch after it is staged: the chunk's next, or the next chunk's
    first where that chunk's requests are all encoded by then (it is planned early; the pipeline
    never waits for encoding to stage); each batch is staged at most once. With ``stop``, once it is
    set no further batch runs: the batch in flight lands, encoding not yet begun is cancelled, and
    ``Stopped`` is raised with what landed (set while the last batch ran: every result, still
    raised as ``Stopped``, so the caller's cancellation goes on)."""
    if stop is not None and stop.is_set():  # stopped before its thread began: nothing to encode
        raise Stopped([None] * len(jobs))
    slots: list[_Slot] = []
    for block in encoding_blocks([bool(j.images) for j in jobs], TEXT_BLOCK):
        fut = threads.submit(encode, [jobs[i] for i in block])
        slots.extend(_Slot(fut, k) for k in range(len(block)))
    out: list[R | Failure | None] = [None] * len(jobs)
    spans = list(chunk_spans(len(slots), first_chunk(jobs, plan), plan.chunk_growth, partial(_window, jobs, plan)))
    chunks = _batches(jobs, slots, out, plan, share, spans)
    planned: list[tuple[list[PlannedBatch], dict[int, Encoded]]] = []  # chunks planned, not yet all run
    started = 0  # chunks planned so far

    def plan_next(wait: bool) -> bool:
        """The next chunk planned, if any (without ``wait``: only if its requests are encoded)."""
        nonlocal started
        if started >= len(spans) or not (wait or all(slots[i].block.done() for i in range(*spans[started]))):
            return False
        planned.append(next(chunks))
        started += 1
        return True

    in_flight: tuple[PlannedBatch, dict[int, Encoded], Callable[[], list[R]]] | None = None
    # Halves of a batch that ran out of device memory when its results were read (a generation
    # batch held for another to join decodes only then), run before the next planned batch.
    redo: list[tuple[PlannedBatch, dict[int, Encoded]]] = []
    # Batches staged and not yet run, by id (held, so no id is reused): a batch staged behind one
    # split after running out of memory is named again after the halves, and is not staged twice.
    staged: dict[int, PlannedBatch] = {}

    def fail(idx: list[int], message: str) -> None:
        for i in idx:  # only this batch's requests fail, never the others
            out[i] = Failure(jobs[i].request_id, "internal", message)

    def split(batch: PlannedBatch, ready: dict[int, Encoded], message: str) -> None:
        """A batch too large for the device's memory: its halves run next, down to one request,
        which fails with ``message``. Called once the exception is gone: it holds the failed
        attempt's tensors, which the cache could not give back before."""
        torch.cuda.empty_cache()
        if len(batch.idx) > 1:
            redo[:0] = [(h, ready) for h in batch.halves()]
        else:
            fail(batch.idx, message)

    def land() -> None:
        nonlocal in_flight
        if in_flight is None:
            return
        batch, ready, finish = in_flight
        in_flight = None
        oom = None
        try:
            for i, res in zip(batch.idx, finish(), strict=True):
                out[i] = res
        except BatchCut:
            return  # cut short by the stop: its requests stay unanswered
        except torch.cuda.OutOfMemoryError as e:
            oom = f"out of device memory: {e}"
        except (RuntimeError, ValueError) as e:
            fail(batch.idx, f"{type(e).__name__}: {e}")
        if oom is not None:
            split(batch, ready, oom)

    def take() -> tuple[PlannedBatch, dict[int, Encoded]] | None:
        """The next batch to run and its chunk's encodings; None when every batch has run and landed."""
        while True:
            if redo:
                return redo.pop(0)
            if planned and planned[0][0]:
                return planned[0][0].pop(0), planned[0][1]
            if planned:
                planned.pop(0)
            elif not plan_next(wait=True):
                if in_flight is None:
                    return None
                land()  # the last batch; its halves, if it ran out of memory, run next

    def after() -> tuple[PlannedBatch, dict[int, Encoded]] | None:
        """The batch ``take`` gives next, if known without waiting for encoding."""
        if redo:
            return redo[0]
        for k in range(2):  # this chunk's next batch, else the next chunk's first
            if len(planned) <= k:
                plan_next(wait=False)
            if len(planned) > k and planned[k][0]:
                return planned[k][0][0], planned[k][1]
        return None

    def stopping() -> bool:
        return stop is not None and stop.is_set()

    # Asked again once a batch is taken: taking it may have waited for its encoding.
    while not stopping() and (taken := take()) is not None and not stopping():
        batch, ready = taken
        staged.pop(id(batch), None)
        if stage is not None and (upcoming := after()) is not None and id(upcoming[0]) not in staged:
            staged[id(upcoming[0])] = upcoming[0]
            stage(upcoming[0], [upcoming[1][i] for i in upcoming[0].idx])
        oom = None
        try:
            finish = run(batch, [ready[i] for i in batch.idx])
        except torch.cuda.OutOfMemoryError as e:
            oom = f"out of device memory: {e}"
        except (RuntimeError, ValueError) as e:
            fail(batch.idx, f"{type(e).__name__}: {e}")
            continue
        land()
        if oom is not None:
            split(batch, ready, oom)
            continue
        in_flight = (batch, ready, finish)
    if stopping():
        land()
        for slot in slots:  # encoding not begun is not needed now (a block being encoded ends on its own)
            slot.block.cancel()
        raise Stopped(out)
    return [o for o in out if o is not None]


def _window(jobs: Sequence[Job], plan: Plan, lo: int) -> int:
    """Requests sorted together from request ``lo`` on: the plan's sort window, else 2 batches of
    requests with images or 8 of text."""
    with_images = lo < len(jobs) and bool(jobs[lo].images)
    return plan.sort_window or (2 if with_images else 8) * plan.max_batch_size


def _batches(jobs: list[Job], slots: list[_Slot], out: list[Any], plan: Plan,
             share: bool, spans: Sequence[tuple[int, int]]) -> Iterator[tuple[list[PlannedBatch], dict[int, Encoded]]]:
    """Batches chunk by chunk in arrival order, each chunk sorted by length (less padding).

    Chunks grow ``chunk_growth`` times each step up to the sort window: the device starts soon,
    and each chunk is encoded while the device runs the one before. That needs encoding to
    outpace the device by the growth factor, else the device runs dry at each early chunk
    boundary: on the H200, growing 4x left it idle a third of the time on one-frame requests
    (8B: 100.7 against 125.8 items/s at 2x, same run). A remainder under half a chunk joins the
    chunk before it rather than running as a small batch of its own at the end. With ``share``,
    requests sharing a prefix stay in one batch and batches are planned by the packed length of
    their families (``schedule.families``); each batch carries its families, so that it runs as planned.
    A chunk's largest batch, by the tokens it was planned with, comes last (``largest_last``).
    """
    for lo, hi in spans:
        ready: dict[int, Encoded] = {}
        for i in range(lo, hi):
            try:
                r = slots[i].result()
            except Exception as e:
                # Bad requests come back as failures; an exception is a fault of encoding itself,
                # and fails the requests of its block only, never the call (nor the whole run).
                r = Failure(jobs[i].request_id, "internal", f"encoding failed: {type(e).__name__}: {e}")
            if isinstance(r, Failure):
                out[i] = r
            else:
                ready[i] = r
        todo = sorted(ready)
        prompts = [ready[i].prompt for i in todo]
        families = plan_families(prompts, share_frames=plan.share_frames) if share else []
        # Requests that share nothing run in batches of their own (the engine right-pads them, or
        # puts short ones in one unpadded row), never inside a packed family batch, unless the
        # whole chunk would run unpadded in one row anyway: with long prompts each would cost the
        # tree attention's slower kernel (H200: FlashAttention-2's variable-length kernel took
        # 1.6-1.8 ms a layer where cuDNN's causal one takes 0.5 for as many tokens), for a chunk
        # that had only a few families (the one-frame workload: 4 in 384).
        in_one_row = one_row(prompts, plan.one_row_tokens)
        grouped = [f for f in families if in_one_row or len(f.members) > 1]
        planned, tokens = [], []
        if worth_sharing(grouped):
            fb = balanced(partial(plan_family_batches, prompts, grouped, max_tokens=plan.max_batch_tokens),
                          plan.max_batch_size)
            planned = [_family_batch(todo, b) for b in fb]
            tokens = [sum(packed_length(prompts, f) for f in b) for b in fb]
            alone = [] if in_one_row else [j for f in families if len(f.members) == 1 for j in f.members]
        else:
            alone = list(range(len(todo)))
        if alone:
            lengths = [ready[todo[j]].prompt.n_tokens for j in alone]
            new = [ready[todo[j]].new_tokens for j in alone]
            budget = max(plan.max_batch_tokens, plan.decode_batch_tokens if max(new) > 1 else 0)
            batches = balanced(partial(plan_batches, lengths, max_batch_tokens=budget, new=new, row=row_slots),
                               plan.max_batch_size)
            planned += [PlannedBatch([todo[alone[j]] for j in b]) for b in batches]
            tokens += [batch_tokens(lengths, b, new, row_slots) for b in batches]  # padded rows, as planned
        yield largest_last(planned, tokens), ready


def row_slots(longest: int, most_new: int) -> int:
    """One row's tokens in a batch whose longest prompt is ``longest`` and whose largest request
    generates ``most_new`` tokens: a generation batch reserves every row the padded width of its
    longest prompt plus its most new tokens, in whole key blocks (``forward.generate``); a batch
    that generates at most one token holds its prompts only."""
    return reserved_slots(padded_width(longest) + most_new - 1) if most_new > 1 else longest


def join_fits(held: Sequence[Encoded], joining: Sequence[Encoded], budget: int, max_rows: int) -> bool:
    """Whether the generation batch of ``joining`` may join the prefilled batch of ``held``, both
    then decoded together (op ``decode_join``); with no ``joining``, whether one more row like the
    held ones could. The rows together at most ``max_rows`` (``Plan.max_batch_size``); the joint
    reservation and the held one, alive together while the held rows are copied, at most
    ``budget`` K/V slots (``Plan.decode_batch_tokens``), every row counted as the planner counts
    it (``row_slots``); and some request generates more than one token (decode steps to share)."""
    both = [*held, *joining]
    rows = len(both) + (0 if joining else 1)
    most_new = max((e.new_tokens for e in both), default=0)
    if not held or rows > max_rows or most_new <= 1:
        return False
    return (rows + len(held)) * row_slots(max(e.prompt.n_tokens for e in both), most_new) <= budget


def largest_last(batches: list[PlannedBatch], tokens: Sequence[int]) -> list[PlannedBatch]:
    """A chunk's batches with its largest (by ``tokens``) moved to the end, the rest in order.

    While the device runs a chunk's last batch, the host lands the batch before it and plans
    and builds the next chunk's first batch. Length-sorted planning left the remainder last,
    often a few requests: the device then ran dry at every chunk boundary (H200, 8B one-frame
    requests: 120-300 ms idle at each of 3 boundaries, after batches of 11-27 requests).

    >>> [b.idx for b in largest_last([PlannedBatch([0, 1]), PlannedBatch([2])], [500, 20])]
    [[2], [0, 1]]
    """
    if len(batches) < 2:
        return batches
    big = max(range(len(batches)), key=lambda k: (tokens[k], -k))
    return batches[:big] + batches[big + 1 :] + [batches[big]]


def _family_batch(todo: list[int], families: Sequence[Family]) -> PlannedBatch:
    """A batch of families planned over a chunk (members: positions in ``todo``): its requests
    family after family, each family's members renumbered to their places in the batch."""
    idx: list[int] = []
    local: list[Family] = []
    for f in families:
        local.append(Family(tuple(range(len(idx), len(idx) + len(f.members))), f.prefix))
        idx.extend(todo[j] for j in f.members)
    return PlannedBatch(idx, tuple(local))


def first_chunk(jobs: Sequence[Job], plan: Plan) -> int:
    """Requests in the first chunk: a quarter batch of text-only ones (they encode in
    milliseconds); of requests with images, 64 images' worth (two 32-frame requests: 16 of them
    took 0.35 s to decode on an H200 host while the device waited), 16 requests at most. (256
    images' worth, 8 of 32-frame requests, measured 18.6 against 19.4 items/s for 2 on the 2B
    model in the same H200 run, with worker processes decoding: decision 014.)"""
    if plan.first_chunk is not None:
        return max(1, plan.first_chunk)
    quarter = max(1, plan.max_batch_size // 4)
    if not jobs or not jobs[0].images:
        return min(quarter, 64)
    return max(1, min(quarter, 16, 64 // len(jobs[0].images)))
