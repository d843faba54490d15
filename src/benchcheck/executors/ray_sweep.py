"""The sweep on Ray (``sweep run --executor ray``): the driver plans and leases the units, CPU
actors decode their frames from the video store and build the requests, engine actors generate
and parse, and the driver appends through the sweep's own files (docs/ray.md, "The sweep").

Same rows, files and layout as the local runner (``sweep/runner.py``): the planning
(``plan_sweep``), the (bench, condition) leases (``lease_units``), the request building
(``prepare_unit``), the rows (``unit_result``), the sink (``UnitSink``: raw lines, the CSV under its
lock with keys re-checked, failures, timing) and the reused rows (``end_sweep``) are the ones it
uses; only where each piece runs differs. A work row is one unit (``--chunk`` items of one
bench x condition), keyed by its first item within its group.
"""

from __future__ import annotations

import asyncio
import contextlib
import pickle
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from benchcheck.engines.base import Failure, Generation
from benchcheck.engines.capabilities import concurrent_calls
from benchcheck.executors.ray_cluster import cluster_failed, connect_announced, import_ray, on_engine_resource
from benchcheck.executors.ray_pipeline import EngineHolder, PipelineStats, Stages, WorkRow, run_pipeline
from benchcheck.spec import RunSpec
from benchcheck.sweep.cli_run import SweepArgs, after_run, check_engine_context, unit_workers
from benchcheck.sweep.engine import SweepEngine, build_sweep_engine, engine_max_model_len
from benchcheck.sweep.frames import decode_job
from benchcheck.sweep.plan import Cell
from benchcheck.sweep.results import log_line
from benchcheck.sweep.runner import (
    Prepared,
    RunnerConfig,
    SweepSummary,
    Unit,
    UnitSink,
    begin_sweep,
    end_sweep,
    lease_units,
    make_units,
    prepare_unit,
    start_line,
    unit_result,
)
from benchcheck.video.plans import FramePlan

Echo = Callable[[str], None]


@dataclass(frozen=True, slots=True)
class EngineFacts:
    """What the driver needs of the engine before planning, asked of one engine-resource task."""

    name: str
    model_name: str
    max_model_len: int | None
    concurrent_calls: int


def _engine_facts(o: SweepEngine) -> EngineFacts:
    engine = build_sweep_engine(o)
    try:
        return EngineFacts(engine.name, engine.model_name, engine_max_model_len(engine, o), concurrent_calls(engine))
    finally:
        asyncio.run(engine.aclose())


@dataclass(frozen=True, slots=True)
class PrepareUnits:
    """CPU stage: a unit -> its decoded requests (frames decoded from the store on the actor's node)."""

    specs: Mapping[str, RunSpec]
    store: str | None

    def __call__(self) -> Callable[[bytes], bytes]:
        return self.one

    def one(self, payload: bytes) -> bytes:
        unit: Unit = pickle.loads(payload)
        prepared = asyncio.run(prepare_unit(unit, self.specs[unit.condition], self._frames))
        return pickle.dumps((unit, prepared))

    async def _frames(self, video_id: str, plan: FramePlan) -> tuple[list[bytes], float]:
        if self.store is None:
            raise ValueError("no --store given")
        return decode_job(self.store, video_id, plan)


class _UnitAnswerer(EngineHolder):
    """Engine stage: prepared units -> their results (rows, raw lines, failures)."""

    def __init__(self, specs: Mapping[str, RunSpec], engine: SweepEngine) -> None:
        super().__init__(build_sweep_engine(engine))
        self.specs = specs

    def __call__(self, payloads: Sequence[bytes]) -> list[bytes]:
        prepared: list[tuple[Unit, Prepared]] = [pickle.loads(p) for p in payloads]
        reqs = [r for _, p in prepared for r in p.requests]
        answers: list[Generation | Failure] = []
        try:
            if reqs:
                answers = self.loop.run_until_complete(self.engine.generate(reqs))
        except Exception as e:  # an engine bug must not lose the batch: failure lines, redone next run
            answers = [Failure(r.request_id, "internal", f"{type(e).__name__}: {e}") for r in reqs]
        out, pos = [], 0
        for unit, p in prepared:
            n = len(p.requests)
            out.append(pickle.dumps((unit, unit_result(p, self.specs[unit.condition], answers[pos:pos + n]))))
            pos += n
        return out


@dataclass(frozen=True, slots=True)
class AnswerUnits:
    specs: Mapping[str, RunSpec]
    engine: SweepEngine

    def __call__(self) -> _UnitAnswerer:
        return _UnitAnswerer(self.specs, self.engine)


class _Stopped(Exception):
    """The sink saw the engine unreachable too often: stop reading the pipeline."""


def work_row(u: Unit) -> WorkRow:
    return WorkRow(f"{u.bench}|{u.condition}", u.cells[0].item.item_id, pickle.dumps(u))


def run_sweep_ray(a: SweepArgs, cells: Sequence[Cell], specs: Mapping[str, RunSpec], benches: Sequence[str],
                  echo: Echo) -> SweepSummary:
    """Run planned cells on a Ray cluster (``PreconditionError`` before any row, as the local run)."""
    t0 = time.perf_counter()
    placement = connect_announced(a.ray_address, echo)
    ray = import_ray()
    try:
        facts = on_engine_resource(_engine_facts, a.engine, placement)
    except (ray.exceptions.RayError, ConnectionError) as e:
        echo(cluster_failed("sweep", e))
        return SweepSummary(aborted=True)
    check_engine_context(a, cells, facts.max_model_len)
    workers = unit_workers(a, facts.concurrent_calls)
    log_line(a.paths, f"benches {','.join(benches)}; conditions {','.join(specs)}; "
                      f"ray: {placement.cpu_actors} CPU actors, {placement.engine_actors} engine actors")
    summary = begin_sweep(cells, specs, a.paths)
    stats = PipelineStats()
    with contextlib.ExitStack() as leases:
        units = lease_units(make_units(cells, a.chunk), a.paths, leases, summary)
        log_line(a.paths, start_line(units, facts.name, facts.model_name, workers))
        sink = UnitSink(a.paths, units, summary, RunnerConfig(workers, a.chunk, a.progress), desc="sweep (ray)")

        def write(answered: list[tuple[str, str, bytes]]) -> None:
            for _, _, payload in answered:
                sink(*pickle.loads(payload))
            if summary.aborted:
                raise _Stopped

        # A batch of the engine stage is as many units as the local runner has in flight, so an
        # engine gets the same concurrency (served: 6 per endpoint; in-process: its own calls).
        stages = Stages(PrepareUnits(dict(specs), a.store), AnswerUnits(dict(specs), a.engine),
                        prepare_batch=1, answer_batch=workers)
        try:
            stats = run_pipeline([work_row(u) for u in units], stages, placement, write)
        except _Stopped:
            pass
        except (ray.exceptions.RayError, ConnectionError) as e:
            echo(cluster_failed("sweep", e))
            summary.aborted = True
        finally:
            sink.close()
    echo(stats.line(placement))
    out = end_sweep(cells, specs, a.paths, summary, t0, echo)
    after_run(a, benches, echo)
    return out
