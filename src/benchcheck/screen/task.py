"""Screening's task adapter for the one unit loop (``unit_loop.run_task``; docs/ARCHITECTURE.md).

:class:`ScoreTask` is what every executor calls to work screening items: ``build`` (frames read,
requests built: the Ray executor's CPU stage), ``answer`` (one engine call, a row per item, the
``--extra-perms`` forwards of the items near the threshold: the Ray executor's engine stage),
``judge`` and ``tally`` (what a row says of its item). :class:`StepUnitBook` is a unit of a step
in its ``StepStore``: its lease, what is left in it (read under the lease: a row under another
config hash is stale and asked again), and its appends. The loop itself, the retries, giving up
and stopping are ``unit_loop``'s; nothing here loops.
"""

from __future__ import annotations

import asyncio
import socket
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

from benchcheck.engines.base import CallCancelled, Engine, Failure, LetterScores, engine_config_hash
from benchcheck.items import Item, fingerprints
from benchcheck.lease import Lease, holder
from benchcheck.records import ErrorRow, ScoreRow
from benchcheck.screen.extra_perms import ExtraPerms, score_extra, wants_extra
from benchcheck.screen.frames import FrameSource
from benchcheck.screen.requests import ItemRequests, build_item_requests
from benchcheck.screen.rows import RowContext, error_row, result_row
from benchcheck.spec import RunSpec
from benchcheck.store import StepStore
from benchcheck.unit_loop import POLICY, AnswerCut, Judgement, Pending, judge_error

Row = ScoreRow | ErrorRow
Built = tuple[Item, ItemRequests | str]  # an item and its requests, or why they could not be built


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
class ScoreTask:
    """The screening adapter: items -> requests -> rows, for one step's ``RunSpec``. Picklable
    (the Ray executor ships it to its actors); the rows' host is where ``answer`` runs."""

    spec: RunSpec
    step: int
    frames: FrameSource | None = None
    extra: ExtraPerms | None = None  # --extra-perms: evidence for the audit, never the decision

    def group(self, item: Item) -> str:
        return item.bench

    def describe(self, item: Item) -> str:
        return f"{item.item_id} step {self.step}"

    def build_now(self, items: Sequence[Item]) -> list[Built]:
        """Each item's requests, its frames read here (blocking), once a video for the chunk: a
        video's questions come together, and each would read (or, from the store, decode) the
        same grid."""
        out: list[Built] = []
        grids: dict[str, list[bytes]] = {}
        for item in items:
            try:
                grid = None
                if self.spec.frames.visual:
                    if self.frames is None or not item.video_id:
                        raise ValueError("no frame source")
                    grid = grids.get(item.video_id)
                    if grid is None:
                        grid = grids[item.video_id] = self.frames.grid(item.video_id)
                out.append((item, build_item_requests(self.spec, item, grid)))
            except Exception as e:  # a broken frame folder is this item's error, never the run's
                out.append((item, f"frames: {type(e).__name__}: {e}"))
        return out

    async def build(self, items: Sequence[Item]) -> list[Built]:
        if self.spec.frames.visual:  # frames are read from disk: off the event loop
            return await asyncio.to_thread(self.build_now, items)
        return self.build_now(items)

    def row_context(self, engine: Engine) -> RowContext:
        return RowContext(self.step, self.spec.name, engine.model_name, engine.revision, engine.name,
                          self.spec.config_hash, self.spec.prompt.intro_name, socket.gethostname(),
                          engine_config_hash(engine))

    async def answer(self, engine: Engine, built: Sequence[Built]) -> list[Row]:
        """One engine call for a chunk; every item gets exactly one row back. Then the extra
        permutations of the chunk's items near the threshold (``--extra-perms``), recorded in their rows.
        Cancelled part-way (Ctrl-C, an in-process engine: ``CallCancelled``): ``AnswerCut`` with the
        rows of the items whose every forward was answered, less those that would ask for extra
        permutations (they wait for the next run, which asks both)."""
        ctx = self.row_context(engine)
        reqs = [r for _, b in built if isinstance(b, ItemRequests) for r in b.requests]
        try:
            answers: list[LetterScores | Failure] = await engine.score(reqs) if reqs else []
        except CallCancelled as cut:
            raise AnswerCut([r for r in self._rows(built, ctx, cut.answers, cut=True)
                             if r is not None and not self._asks_extra(r)]) from None
        except Exception as e:  # an engine bug must not lose the chunk: error rows, retried later
            answers = [Failure(r.request_id, "internal", f"{type(e).__name__}: {e}") for r in reqs]
        rows = [r for r in self._rows(built, ctx, answers) if r is not None]  # none is None: not cut
        if self.extra is not None and self.extra.n > 0:
            try:
                await score_extra(self.spec, [(b, r) for (_, b), r in zip(built, rows, strict=True)
                                              if isinstance(b, ItemRequests)], engine, self.extra)
            except CallCancelled:
                raise AnswerCut([r for r in rows if not self._asks_extra(r)]) from None
        return rows

    def _rows(self, built: Sequence[Built], ctx: RowContext, answers: Sequence[object | None],
              cut: bool = False) -> list[Row | None]:
        """Each item's row from its forwards' answers (in request order). An item with a forward
        unanswered: None where the call was ``cut`` (cancelled part-way), else its error row."""
        rows: list[Row | None] = []
        pos = 0
        for item, b in built:
            if isinstance(b, str):
                rows.append(error_row(item, ctx, b))
                continue
            n = len(b.requests)
            mine = [a for a in answers[pos:pos + n] if isinstance(a, LetterScores | Failure)]
            pos += n
            if len(mine) < n:
                if cut:
                    rows.append(None)
                    continue
                mine = [Failure(b.requests[0].request_id, "internal", "the engine returned no answer")]
            rows.append(result_row(self.spec, b, ctx, mine))
        return rows

    def _asks_extra(self, row: Row) -> bool:
        return self.extra is not None and self.extra.n > 0 and wants_extra(row, self.extra)

    def judge(self, row: Row) -> tuple[Judgement, str]:
        if isinstance(row, ScoreRow):
            return "ok", ""
        return judge_error(row)

    def tally(self, row: Row) -> dict[str, int]:
        return {"removed": int(row.removed)} if isinstance(row, ScoreRow) else {}


T = TypeVar("T")


def call_order(spec: RunSpec, todo: Sequence[T], item: Callable[[T], Item]) -> list[T]:
    """The work still to do (``item`` gives each entry's item) in the order it goes to the
    engine: as listed, or for a step that shows frames, the questions of one video next to each
    other (in the order listed), so that they meet in one engine call: the ``hf`` engine then
    shares their frames and prompt prefix (``hf_prefix``), a server's prefix cache finds them
    warm. Rows land in this order; what is done is read back by item id, so a rerun resumes the
    same. Every executor orders its work by this rule (the unit book's ``todo``)."""
    if not spec.frames.visual:
        return list(todo)
    return sorted(todo, key=lambda t: item(t).video_id or "")  # stable: each video's items as listed


@dataclass(frozen=True, slots=True)
class StepUnitBook:
    """A unit of a step in its store: the ``UnitBook`` of screening."""

    spec: RunSpec
    unit: WorkUnit
    store: StepStore
    max_errors: int = POLICY.max_errors

    @property
    def name(self) -> str:
        return self.unit.name

    @property
    def size(self) -> int:
        return len(self.unit.items)

    @property
    def path(self) -> Path:
        u = self.unit
        return self.store.unit_path(u.bench, u.part, u.n_parts)

    def lease(self) -> Lease | None:
        return self.store.lease(self.path)

    def holder(self) -> str:
        return holder(self.path)

    def todo(self) -> list[Pending[Item]]:
        """Items without an ok row and not given up, under this spec's hash, in call order."""
        state = self.store.unit_state(self.path, self.spec.config_hash, self.max_errors,
                                      expect_items=fingerprints(self.unit.items))
        out = []
        for it in call_order(self.spec, self.unit.items, lambda i: i):
            v = state.verdict(it.item_id)
            if v.status in ("pending", "error"):
                out.append(Pending(it, v.counted_errors, bool(v.stale)))
        return out

    def append(self, records: Sequence[Row]) -> None:
        self.store.append(self.path, records)
