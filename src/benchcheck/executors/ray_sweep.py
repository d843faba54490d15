"""The sweep on Ray (``sweep run --executor ray``): the driver plans and leases the (bench,
condition) groups, CPU actors decode their frames from the video store and build the requests,
engine actors generate and parse, and the driver appends through the groups' books (docs/ray.md,
"The sweep").

Same rows, files and layout as the local executor: the stages are the sweep adapter's own pieces
(``sweep.task.GenerateTask``: ``build`` in the CPU actors, ``answer`` in the engine actors), the
units its ``GroupBook``s, run by ``ray_units`` under the one policy (``unit_loop``): errors asked
again with backoff, three counted ones give a cell up, an unreachable or refusing server stops
the run. The planning, NA rows and reused rows are the runner's (``begin_sweep``, ``end_sweep``).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from tqdm import tqdm

from benchcheck.engines.base import Engine, engine_config_hash
from benchcheck.engines.capabilities import concurrent_calls
from benchcheck.executors.ray_cluster import cluster_failed, connect_announced, import_ray, on_engine_resource
from benchcheck.executors.ray_units import run_units
from benchcheck.spec import RunSpec
from benchcheck.sweep.cli_run import after_run, check_engine_context, run_gpus, sweep_calls
from benchcheck.sweep.engine import SweepEngine, build_sweep_engine, engine_context
from benchcheck.sweep.job import SweepArgs
from benchcheck.sweep.plan import Cell
from benchcheck.sweep.results import log_line
from benchcheck.sweep.runner import RunIdentity, SweepSummary, begin_sweep, end_sweep
from benchcheck.sweep.task import GenerateTask, StoreFrames, group_books, start_line_of

Echo = Callable[[str], None]


@dataclass(frozen=True, slots=True)
class EngineFacts:
    """What the driver needs of the engine before planning, asked of one engine-resource task."""

    name: str
    model_name: str
    max_model_len: int | None
    concurrent_calls: int
    config_hash: str | None = None  # the engine's own configuration (hf: HFConfig.hash), for run_log
    context_why: str | None = None  # why max_model_len is unknown (an endpoint unreachable, a refused key)


def _engine_facts(o: SweepEngine) -> EngineFacts:
    engine = build_sweep_engine(o)
    try:
        known, why = engine_context(engine, o)
        return EngineFacts(engine.name, engine.model_name, known, concurrent_calls(engine),
                           engine_config_hash(engine), why)
    finally:
        asyncio.run(engine.aclose())


@dataclass(frozen=True, slots=True)
class SweepRecipe:
    """How an engine actor builds the sweep's engine (the key stays in its named variable)."""

    engine: SweepEngine

    def build(self) -> Engine:
        return build_sweep_engine(self.engine)

    @property
    def key_variable(self) -> str | None:
        return self.engine.api_key_env


def refuse_sweep(a: SweepArgs) -> str | None:
    if a.decode_workers is not None:
        return ("--decode-workers has no meaning on --executor ray (its CPU actors decode, one per CPU of the "
                "cluster); leave it out")
    return None


def run_sweep(a: SweepArgs, cells: Sequence[Cell], specs: Mapping[str, RunSpec], benches: Sequence[str],
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
    check_engine_context(a, cells, facts.max_model_len, facts.context_why)
    calls = sweep_calls(a, facts.concurrent_calls)
    log_line(a.paths, f"benches {','.join(benches)}; conditions {','.join(specs)}; "
                      f"ray: {placement.cpu_actors} CPU actors, {placement.engine_actors} engine actors")
    summary = begin_sweep(cells, specs, a.paths)
    books = group_books(cells, a.paths, summary)
    log_line(a.paths, start_line_of(books, facts.name, facts.model_name, calls.workers))
    bar = tqdm(total=sum(b.size for b in books), desc="sweep (ray)", unit="item", disable=not a.progress)
    # An engine actor's call is as many cells as the local executor has in flight (served: 6 per
    # endpoint; in-process: the engine's own calls), so an engine gets the same concurrency.
    try:
        run = run_units(GenerateTask(dict(specs), StoreFrames(a.store)), books, SweepRecipe(a.engine), placement,
                        calls.workers * calls.chunk, echo, "sweep", bar.update)
    except (ray.exceptions.RayError, ConnectionError) as e:
        echo(cluster_failed("sweep", e))
        summary.aborted = True
    else:
        summary.aborted = run.summary.aborted
        held = {name for name, _, _ in run.held}
        if not summary.aborted:
            for b in books:
                if b.name not in held:
                    b.close()
        echo(run.stats.line(placement))
    finally:
        bar.close()
    ident = RunIdentity(facts.name, facts.model_name, tuple(a.engine.endpoints), run_gpus(a), facts.config_hash)
    out = end_sweep(cells, specs, a.paths, summary, t0, echo, ident)
    after_run(a, benches, echo)
    return out
