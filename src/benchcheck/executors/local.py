"""The local executor: a task's units worked in this process, each through ``run_task`` (screening:
``screen``, ``launch``'s client shards through ``task run``, Slurm array tasks; the sweep: ``sweep run``)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from pathlib import Path

from benchcheck.engines.capabilities import concurrent_calls, local_gpus
from benchcheck.screen.engine_args import build_engine, call_shape, engine_kind
from benchcheck.screen.extra_perms import ExtraPerms
from benchcheck.screen.job import ReadyJob, ShardJob, engine_options
from benchcheck.screen.runner import RunConfig, RunSummary, append_run_log, echo_summary, run_step
from benchcheck.screen.steps import INTROS, STEPS
from benchcheck.shard import ShardPath
from benchcheck.spec import RunSpec
from benchcheck.sweep.cli_run import run_local
from benchcheck.sweep.job import SweepArgs
from benchcheck.sweep.plan import Cell
from benchcheck.sweep.runner import SweepSummary

Echo = Callable[[str], None]


def refuse_screen(job: ShardJob) -> str | None:
    if job.ray_address:
        return "--ray-address needs --executor ray"
    return None


def run_config(job: ShardJob, served: bool, engine_calls: int, shard: ShardPath) -> RunConfig:
    """The job's run settings; items per call and calls in flight from the one table (``call_shape``)."""
    shape = call_shape(engine_kind(served, engine_calls), job.step, job.workers, job.batch_items,
                       len(job.endpoints))
    return RunConfig(step=job.step, intro=INTROS[job.intro], workers=shape.calls, batch_items=shape.items_per_call,
                     shard=shard, progress=job.progress, max_unit=job.max_unit,
                     extra=ExtraPerms(job.extra_perms, job.extra_band) if job.extra_perms > 0 else None)


def run_screen(r: ReadyJob, echo: Echo) -> int:
    """Exit 0 when the step ran (errors are rows, reported), 3 when the run stopped early because
    the engine was unreachable or refused the run (rerun to go on)."""
    job = r.job
    engine = build_engine(job.engine, STEPS[job.step], engine_options(job))
    cfg = run_config(job, bool(job.endpoints), concurrent_calls(engine), r.shard)
    started = time.time()

    async def go() -> RunSummary:
        try:
            return await run_step(r.ctx, engine, cfg, echo, plan=r.first)
        finally:
            await engine.aclose()

    summary = asyncio.run(go())
    # launch and Slurm say how many GPUs serve a shard; a plain `screen` on an in-process CUDA
    # engine ran on its one device (recorded as 0, pack would call it a CPU run).
    gpus = job.gpus or (0 if job.endpoints else local_gpus(engine))
    append_run_log(Path(job.results), summary, cfg, engine, list(job.endpoints), started, gpus)
    echo_summary(summary, r.shard, echo, refused=r.refused)
    if r.first.todo and not summary.attempted and not summary.held_units and not summary.aborted:
        echo(f"step {job.step}: nothing left to run: the {len(r.first.todo)} eligible items are done or failed here")
    return 3 if summary.aborted else 0


def refuse_sweep(a: SweepArgs) -> str | None:
    if a.ray_address:
        return "--ray-address needs --executor ray"
    return None


def run_sweep(a: SweepArgs, cells: list[Cell], specs: dict[str, RunSpec], benches: list[str],
              echo: Echo) -> SweepSummary:
    """Planned cells worked in this process (``sweep.task.run_groups`` through ``run_task``)."""
    return run_local(a, cells, specs, benches, echo)
