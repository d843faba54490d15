"""A generic Ray Data pipeline: the driver plans rows to do, CPU actors prepare them, engine actors
answer them, and the driver's sink writes what comes back (docs/ray.md).

It knows nothing about screening: a task gives opaque ``WorkRow`` payloads (pickled records), a
``prepare`` factory (run once in each CPU actor: decode frames, resize, JPEG-encode, build
requests), an ``answer`` factory (run once in each engine actor: hold the engine, answer a batch)
and a sink. Screening (``ray_screen``) is the first user; a sweep unit task plugs in the same way.

Why the sink is on the driver: only the driver writes rows, under the unit leases it holds for the
whole run, so a retried or restarted actor can never write a row twice, a killed driver frees
its leases at once (``flock``), and the results folder needs to be on a filesystem only the
driver sees. Actors are pure (payload in, payload out), which is what makes Ray's retries safe.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from benchcheck.executors.ray_cluster import MemoryPeak, Placement, import_ray

if TYPE_CHECKING:
    from benchcheck.engines.base import Engine


@dataclass(frozen=True, slots=True)
class WorkRow:
    unit: str  # the unit whose lease covers the row
    key: str  # unique within the unit (an item id)
    payload: bytes


class Answer(Protocol):
    def __call__(self, payloads: Sequence[bytes]) -> list[bytes]: ...

    def close(self) -> None: ...


class EngineHolder:
    """An engine and one event loop for an engine actor's life: the base of a task's ``Answer``."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        self.loop = asyncio.new_event_loop()

    def close(self) -> None:
        with contextlib.suppress(Exception):
            self.loop.run_until_complete(self.engine.aclose())
            self.loop.close()


@dataclass(frozen=True, slots=True)
class Stages:
    """What a task plugs in. Factories are picklable callables run inside the actors."""

    prepare: Callable[[], Callable[[bytes], bytes]]
    answer: Callable[[], Answer]
    prepare_batch: int = 4  # rows per CPU-actor call (a visual item carries 32 JPEGs)
    answer_batch: int = 8  # rows per engine call


@dataclass(slots=True)
class PipelineStats:
    rows_in: int = 0
    rows_out: int = 0
    duplicates: int = 0  # answers that came back twice (a re-executed block): dropped, never written
    object_store_peak_mib: int | None = None

    def line(self, placement: Placement) -> str:
        """The run's closing Ray line: actors, the object store's peak, answers dropped as repeats."""
        peak = f"{self.object_store_peak_mib} MiB" if self.object_store_peak_mib is not None else "unknown"
        return (f"ray: {placement.cpu_actors} CPU actors, {placement.engine_actors} engine actors, "
                f"object store peak {peak}, {self.duplicates} duplicate answers dropped")


Sink = Callable[[list[tuple[str, str, bytes]]], None]


def _col(batch: dict[str, Any], name: str) -> list[Any]:
    return list(batch[name])


class _PrepareActor:
    """A CPU actor: builds the task's ``prepare`` once, then maps payloads."""

    def __init__(self, factory: Callable[[], Callable[[bytes], bytes]]) -> None:
        self.fn = factory()

    def __call__(self, batch: dict[str, Any]) -> dict[str, Any]:
        import numpy as np

        out = [self.fn(bytes(p)) for p in _col(batch, "payload")]
        return {"unit": batch["unit"], "key": batch["key"], "payload": np.array(out, dtype=object)}


class _EngineActor:
    """An engine actor (one per GPU, or per ``engine_slot``): holds the task's engine for its life."""

    def __init__(self, factory: Callable[[], Answer]) -> None:
        self.fn = factory()

    def __call__(self, batch: dict[str, Any]) -> dict[str, Any]:
        import numpy as np

        out = self.fn([bytes(p) for p in _col(batch, "payload")])
        return {"unit": batch["unit"], "key": batch["key"], "payload": np.array(out, dtype=object)}

    def __del__(self) -> None:
        close = getattr(getattr(self, "fn", None), "close", None)
        if close is not None:
            close()


def run_pipeline(rows: Sequence[WorkRow], stages: Stages, placement: Placement, sink: Sink,
                 progress: bool = False) -> PipelineStats:
    """Stream ``rows`` through prepare -> answer and hand each answered batch to ``sink`` on the
    driver. Each (unit, key) reaches the sink at most once per call."""
    stats = PipelineStats(rows_in=len(rows))
    if not rows:
        return stats
    import_ray()
    import ray.data

    ctx = ray.data.DataContext.get_current()
    ctx.enable_progress_bars = progress  # the driver's own bar counts written items instead
    ctx.print_on_execution_start = False
    blocks = max(1, min(len(rows), math.ceil(len(rows) / stages.prepare_batch)))
    ds: Any = ray.data.from_items([{"unit": r.unit, "key": r.key, "payload": r.payload} for r in rows],
                             override_num_blocks=min(blocks, 512))
    # Actor tasks are pure, so Ray may restart a killed actor and re-run its batches freely.
    retry: dict[str, Any] = {"max_restarts": -1, "max_task_retries": -1}
    pool = ray.data.ActorPoolStrategy
    # Ray Data's streaming executor backpressures each stage on its object-store budget, so the
    # CPU stage runs only as far ahead of the engines as that budget allows.
    ds = ds.map_batches(_PrepareActor, fn_constructor_kwargs={"factory": stages.prepare},
                        batch_size=stages.prepare_batch, compute=pool(size=placement.cpu_actors),
                        batch_format="numpy", **{"num_cpus": 1, **retry})
    ds = ds.map_batches(_EngineActor, fn_constructor_kwargs={"factory": stages.answer},
                        batch_size=stages.answer_batch, compute=pool(size=placement.engine_actors),
                        batch_format="numpy", **{**placement.engine_args(), **retry})
    seen: set[tuple[str, str]] = set()
    with MemoryPeak() as peak:
        for batch in ds.iter_batches(batch_size=None, batch_format="numpy"):
            fresh = []
            for unit, key, payload in zip(_col(batch, "unit"), _col(batch, "key"), _col(batch, "payload"),
                                          strict=True):
                if (unit, key) in seen:
                    stats.duplicates += 1
                    continue
                seen.add((str(unit), str(key)))
                fresh.append((str(unit), str(key), bytes(payload)))
            if fresh:
                sink(fresh)
                stats.rows_out += len(fresh)
    stats.object_store_peak_mib = peak.peak_mib
    return stats


def group_by_unit(answered: Iterable[tuple[str, str, bytes]]) -> dict[str, list[tuple[str, bytes]]]:
    out: dict[str, list[tuple[str, bytes]]] = {}
    for unit, key, payload in answered:
        out.setdefault(unit, []).append((key, payload))
    return out
