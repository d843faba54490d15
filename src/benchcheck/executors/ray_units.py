"""Units of any task on Ray: a task adapter's pieces as the pipeline's stages, and the driver's
loop over passes under the one policy (``unit_loop.Settler``; docs/ray.md).

The CPU stage calls the adapter's ``build``, the engine stage its ``answer`` (one engine held per
actor), and the driver appends each unit's records through its ``UnitBook`` under the unit's lease,
settles them by the same rule as the local loop (retry with backoff up to ``Policy.max_errors``,
retry-free records left for the next run), and stops reading the pipeline when the engine is
unreachable or refuses the run. Nothing here knows which task it runs.
"""

from __future__ import annotations

import asyncio
import contextlib
import pickle
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from benchcheck.executors.ray_cluster import Placement
from benchcheck.executors.ray_pipeline import EngineHolder, PipelineStats, Stages, WorkRow, group_by_unit, run_pipeline
from benchcheck.masking import drop_secret_variables
from benchcheck.unit_loop import POLICY, Pending, Policy, Settler, TaskAdapter, TaskSummary, UnitBook

Echo = Callable[[str], None]


class Recipe(Protocol):
    """How an engine actor builds its engine (picklable data, never a secret)."""

    def build(self) -> Any: ...

    @property
    def key_variable(self) -> str | None:
        """The environment variable the engine reads its API key from (``--api-key-env``), if any."""
        ...


class _Prepare:
    """CPU stage: a work item -> its built requests, by the adapter's own ``build``. It decodes
    untrusted video files and needs no key: its actor's environment loses the secret-named
    variables and the engine's key variable first (``masking.drop_secret_variables``)."""

    def __init__(self, adapter: TaskAdapter[Any, Any, Any, Any], secret_names: tuple[str, ...] = ()) -> None:
        drop_secret_variables(*secret_names)
        self.adapter = adapter
        self.loop = asyncio.new_event_loop()

    def __call__(self, payload: bytes) -> bytes:
        built = self.loop.run_until_complete(self.adapter.build([pickle.loads(payload)]))
        return pickle.dumps(built[0])


@dataclass(frozen=True, slots=True)
class PrepareStage:
    adapter: Any  # a TaskAdapter
    secret_names: tuple[str, ...] = ()  # variables dropped besides the secret-named ones

    def __call__(self) -> Callable[[bytes], bytes]:
        return _Prepare(self.adapter, self.secret_names)


class _Answer(EngineHolder):
    """Engine stage: a batch of built items -> their records, by the adapter's own ``answer``."""

    def __init__(self, adapter: TaskAdapter[Any, Any, Any, Any], recipe: Recipe) -> None:
        super().__init__(recipe.build())
        self.adapter = adapter

    def __call__(self, payloads: Sequence[bytes]) -> list[bytes]:
        built = [pickle.loads(p) for p in payloads]
        records = self.loop.run_until_complete(self.adapter.answer(self.engine, built))
        return [pickle.dumps(r) for r in records]


@dataclass(frozen=True, slots=True)
class AnswerStage:
    adapter: Any  # a TaskAdapter
    recipe: Any  # a Recipe

    def __call__(self) -> _Answer:
        return _Answer(self.adapter, self.recipe)


class _Stopped(Exception):
    """The policy stopped the run: stop reading the pipeline."""


@dataclass(slots=True)
class RayRun:
    summary: TaskSummary  # every unit's counts together
    held: list[tuple[str, str, int]]  # (unit, holder, items) of units another live process holds
    stats: PipelineStats


def run_units(adapter: TaskAdapter[Any, Any, Any, Any], books: Sequence[UnitBook[Any, Any]], recipe: Recipe,
              placement: Placement, batch: int, echo: Echo, what: str, progress: Callable[[int], None],
              policy: Policy = POLICY) -> RayRun:
    """Lease every unit for the run, read what is left under the leases, then stream it through
    the pipeline in passes: a pass asks again, after the policy's backoff, what the last one
    left to retry; it ends when nothing is left, or the policy stops it."""
    summary = TaskSummary(what)
    held: list[tuple[str, str, int]] = []
    stats = PipelineStats()
    settler: Settler[Any, Any] = Settler(adapter, summary, policy, echo, what)
    key = recipe.key_variable
    stages = Stages(PrepareStage(adapter, (key,) if key else ()), AnswerStage(adapter, recipe),
                    answer_batch=max(1, batch))
    with contextlib.ExitStack() as leases:
        todo: list[tuple[UnitBook[Any, Any], Pending[Any]]] = []
        for book in books:
            lease = book.lease()
            if lease is None:
                held.append((book.name, book.holder(), book.size))
                continue
            leases.enter_context(lease)
            pending = list(book.todo())
            todo += [(book, p) for p in pending]
            summary.attempted += len(pending)
            summary.stale += sum(p.stale for p in pending)
        first = True
        while todo and not summary.aborted:
            if not first:
                time.sleep(policy.backoff_s(max(p.errors for _, p in todo)))
            first = False
            todo = _one_pass(todo, stages, placement, settler, progress, stats)
    return RayRun(summary, held, stats)


def _one_pass(todo: list[tuple[UnitBook[Any, Any], Pending[Any]]], stages: Stages, placement: Placement,
              settler: Settler[Any, Any], progress: Callable[[int], None],
              stats: PipelineStats) -> list[tuple[UnitBook[Any, Any], Pending[Any]]]:
    by_key = {(book.name, str(k)): (book, p) for k, (book, p) in enumerate(todo)}
    retry: list[tuple[UnitBook[Any, Any], Pending[Any]]] = []

    def sink(answered: list[tuple[str, str, bytes]]) -> None:
        for unit, got in group_by_unit(answered).items():
            records = [pickle.loads(b) for _, b in got]
            book = by_key[(unit, got[0][0])][0]
            book.append(records)
            chunk = [by_key[(unit, key)][1] for key, _ in got]
            retry.extend((book, p) for p in settler.settle(chunk, records, progress))
            if settler.summary.aborted:
                raise _Stopped

    rows = [WorkRow(unit, key, pickle.dumps(p.work)) for (unit, key), (_, p) in by_key.items()]
    try:
        s = run_pipeline(rows, stages, placement, sink)
    except _Stopped:
        return []
    stats.rows_in += s.rows_in
    stats.rows_out += s.rows_out
    stats.duplicates += s.duplicates
    if s.object_store_peak_mib is not None:
        stats.object_store_peak_mib = max(stats.object_store_peak_mib or 0, s.object_store_peak_mib)
    return retry
