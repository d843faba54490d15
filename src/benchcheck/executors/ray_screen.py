"""Screening on Ray: the driver plans the step's remaining items per unit (under the unit leases),
CPU actors build the requests (frames loaded, decoded, resized and JPEG-encoded there), engine
actors answer, and the driver appends each unit's rows through its ``StepStore`` (docs/ray.md).

Same rows, files and layout as the local runner (``screen/runner.py``): the step's ``RunSpec``,
``build_item_requests``, ``result_row`` / ``error_row`` and the reducer are the ones it uses, so
decisions are equal whichever executor ran them. Error rows are retried in further passes up to
the same limit; retry-free ones (server unreachable, key refused) are left for the next run.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import pickle
import socket
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any

from benchcheck.engines.base import Engine, Failure, LetterScores, engine_config_hash
from benchcheck.engines.options import EngineOptions
from benchcheck.executors.ray_cluster import Placement, connect_announced, on_engine_resource
from benchcheck.executors.ray_pipeline import EngineHolder, PipelineStats, Stages, WorkRow, group_by_unit, run_pipeline
from benchcheck.items import Item
from benchcheck.lease import holder
from benchcheck.records import ErrorRow, ScoreRow
from benchcheck.screen.context import ScreenContext, step_store
from benchcheck.screen.frames import FrameSource
from benchcheck.screen.requests import ItemRequests, build_item_requests
from benchcheck.screen.rows import RowContext, error_row, result_row
from benchcheck.screen.runner import RunConfig, RunSummary, my_units, record_missing_frames
from benchcheck.screen.steps import STEPS
from benchcheck.screen.task import WorkUnit, call_order, count_row
from benchcheck.spec import ModelRef, RunSpec
from benchcheck.verdicts import MAX_ERRORS_PER_ITEM

Echo = Callable[[str], None]
Row = ScoreRow | ErrorRow


@dataclass(frozen=True, slots=True)
class EngineRecipe:
    """How an engine actor builds its engine: the registry name and options, never a secret (the
    API key is read on the actor's node from the environment variable named here)."""

    engine: str
    step: int
    options: EngineOptions
    api_key_env: str | None = None

    def build(self) -> Engine:
        from benchcheck.screen.engine_args import build_engine

        key = os.environ.get(self.api_key_env) if self.api_key_env else None
        return build_engine(self.engine, STEPS[self.step], replace(self.options, api_key=key))


@dataclass(frozen=True, slots=True)
class EngineIdentity:
    """What rows and the run spec need of an engine, asked of one engine actor before the run."""

    name: str
    model_name: str
    revision: str | None


def _identity(recipe: EngineRecipe) -> EngineIdentity:
    engine = recipe.build()
    try:
        return EngineIdentity(engine.name, engine.model_name, engine.revision)
    finally:
        asyncio.run(engine.aclose())


@dataclass(frozen=True, slots=True)
class PrepareRequests:
    """CPU stage: an item -> its requests (frames read from the cache or extracted from the store)."""

    spec: RunSpec
    frames: FrameSource | None

    def __call__(self) -> Callable[[bytes], bytes]:
        return self.one

    def one(self, payload: bytes) -> bytes:
        item: Item = pickle.loads(payload)
        try:
            grid = None
            if self.spec.frames.visual:
                if self.frames is None or not item.video_id:
                    raise ValueError("no frame source")
                grid = self.frames.grid(item.video_id)
            built: ItemRequests | str = build_item_requests(self.spec, item, grid)
        except Exception as e:  # a broken frame folder is this item's error, never the run's
            built = f"frames: {type(e).__name__}: {e}"
        return pickle.dumps((item, built))


class _Answerer(EngineHolder):
    """Engine stage: a batch of built requests -> rows."""

    def __init__(self, spec: RunSpec, recipe: EngineRecipe) -> None:
        super().__init__(recipe.build())
        self.spec = spec
        e = self.engine
        self.ctx = RowContext(recipe.step, spec.name, e.model_name, e.revision, e.name, spec.config_hash,
                              spec.prompt.intro_name, socket.gethostname(), engine_config_hash(e))

    def __call__(self, payloads: Sequence[bytes]) -> list[bytes]:
        built: list[tuple[Item, ItemRequests | str]] = [pickle.loads(p) for p in payloads]
        reqs = [r for _, b in built if isinstance(b, ItemRequests) for r in b.requests]
        answers: list[LetterScores | Failure] = []
        try:
            if reqs:
                answers = self.loop.run_until_complete(self.engine.score(reqs))
        except Exception as e:  # an engine bug must not lose the batch: error rows, retried later
            answers = [Failure(r.request_id, "internal", f"{type(e).__name__}: {e}") for r in reqs]
        rows: list[Row] = []
        pos = 0
        for item, b in built:
            if isinstance(b, str):
                rows.append(error_row(item, self.ctx, b))
                continue
            n = len(b.requests)
            rows.append(result_row(self.spec, b, self.ctx, answers[pos:pos + n]))
            pos += n
        return [pickle.dumps(r) for r in rows]


@dataclass(frozen=True, slots=True)
class AnswerFactory:
    spec: RunSpec
    recipe: EngineRecipe

    def __call__(self) -> _Answerer:
        return _Answerer(self.spec, self.recipe)


@dataclass(slots=True)
class _Pending:
    unit: WorkUnit
    item: Item
    errors: int  # error rows that count, the item already has


def run_step_ray(ctx: ScreenContext, recipe: EngineRecipe, cfg: RunConfig, address: str | None,
                 echo: Echo = print) -> tuple[RunSummary, EngineIdentity]:
    """Run the remaining items of ``cfg.step`` for this shard on a Ray cluster."""
    t0 = time.time()
    placement = connect_announced(address, echo)
    ident = on_engine_resource(_identity, recipe, placement)
    spec = STEPS[cfg.step].run_spec(cfg.intro, ModelRef(ident.model_name, ident.revision))
    store = step_store(ctx.results, cfg.step)
    store.write_spec(spec)
    plan = ctx.plan(cfg.step, include_own=False)
    summary = RunSummary(cfg.step)
    summary.missing_frames = record_missing_frames(ctx.results, cfg.step, plan.missing_frames)
    units = my_units(plan, cfg.shard, cfg.max_unit)
    stages = Stages(PrepareRequests(spec, ctx.frames), AnswerFactory(spec, recipe),
                    answer_batch=max(1, cfg.batch_items))
    with contextlib.ExitStack() as leases:
        todo = _plan_under_leases(units, store, spec, summary, leases)
        bar = _Bar(sum(len(u.items) for u in units), f"step {cfg.step} (ray)", cfg.progress)
        # Items settled before this run tick at once; a held unit's items are another process's.
        bar.update(sum(len(u.items) for u in units) - summary.held_items - len(todo))
        stats = PipelineStats()
        for _ in range(MAX_ERRORS_PER_ITEM):
            if not todo:
                break
            todo, s = _one_pass(todo, stages, placement, store, summary, bar, echo)
            stats.rows_out += s.rows_out
            stats.duplicates += s.duplicates
            if s.object_store_peak_mib is not None:
                stats.object_store_peak_mib = max(stats.object_store_peak_mib or 0, s.object_store_peak_mib)
        bar.close()
    summary.wall_s = round(time.time() - t0, 3)
    echo(stats.line(placement))
    return summary, ident


def _plan_under_leases(units: list[WorkUnit], store: Any, spec: RunSpec, summary: RunSummary,
                       leases: contextlib.ExitStack) -> dict[tuple[str, str], _Pending]:
    """Take every unit's lease for the whole run and read, under it, what is left to do."""
    todo: dict[tuple[str, str], _Pending] = {}
    for u in units:
        path = store.unit_path(u.bench, u.part, u.n_parts)
        lease = store.lease(path)
        if lease is None:
            who = holder(path)
            summary.held_units.append(f"{u.name} ({who})" if who else u.name)
            summary.held_items += len(u.items)
            continue
        leases.enter_context(lease)
        state = store.unit_state(path, spec.config_hash, MAX_ERRORS_PER_ITEM)
        for it in call_order(spec, u.items, lambda i: i):  # one video's questions together
            v = state.verdict(it.item_id)
            if v.status in ("pending", "error"):
                todo[(u.name, it.item_id)] = _Pending(u, it, v.counted_errors)
                summary.attempted += 1
                summary.stale += v.stale
    return todo


def _one_pass(todo: dict[tuple[str, str], _Pending], stages: Stages, placement: Placement, store: Any,
              summary: RunSummary, bar: _Bar, echo: Echo) -> tuple[dict[tuple[str, str], _Pending], PipelineStats]:
    retry: dict[tuple[str, str], _Pending] = {}
    rows = [WorkRow(unit, key, pickle.dumps(p.item)) for (unit, key), p in todo.items()]

    def sink(answered: list[tuple[str, str, bytes]]) -> None:
        for unit_name, got in group_by_unit(answered).items():
            records: list[Row] = [pickle.loads(b) for _, b in got]
            first = todo[(unit_name, got[0][0])].unit
            store.append(store.unit_path(first.bench, first.part, first.n_parts), records)
            for (key, _), row in zip(got, records, strict=True):
                p = todo[(unit_name, key)]
                if _settle(p, row, summary, echo):
                    retry[(unit_name, key)] = p
                else:
                    bar.update(1)

    stats = run_pipeline(rows, stages, placement, sink)
    return retry, stats


def _settle(p: _Pending, row: Row, s: RunSummary, echo: Echo) -> bool:
    """Count one row by the local runner's rule (``task.count_row``); True: ask the item again."""
    outcome, p.errors = count_row(s, p.item.bench, row, p.errors, MAX_ERRORS_PER_ITEM)
    if outcome == "refused":
        s.aborted = True
    elif outcome == "failed":
        echo(f"failed: {p.item.item_id} step {row.step} after {p.errors} errors: {getattr(row, 'error', '')}")
    return outcome == "retry"


class _Bar:
    """Items settled in this step, items/s and ETA, on the driver's stderr."""

    def __init__(self, total: int, desc: str, enabled: bool) -> None:
        self.bar: Any = None
        if enabled and total:
            from tqdm import tqdm

            self.bar = tqdm(total=total, desc=desc, unit="item", file=sys.stderr, dynamic_ncols=True)

    def update(self, n: int) -> None:
        if self.bar is not None and n > 0:
            self.bar.update(n)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()
