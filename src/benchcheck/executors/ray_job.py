"""``screen --executor ray``: a ``ShardJob`` run by the Ray pipeline, reported as the local one is."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import cast

from benchcheck.engines.base import Engine
from benchcheck.executors.ray_screen import EngineRecipe, run_step_ray
from benchcheck.screen.cli_run import ShardJob, echo_summary, engine_options
from benchcheck.screen.context import ScreenContext
from benchcheck.screen.runner import RunConfig, append_run_log
from benchcheck.screen.steps import INTROS

Echo = Callable[[str], None]


def recipe_for(job: ShardJob) -> EngineRecipe:
    """The job's engine as data for the engine actors; the key stays in the named variable."""
    return EngineRecipe(job.engine, job.step, engine_options(job, with_key=False), job.api_key_env)


def run_job_ray(job: ShardJob, ctx: ScreenContext, shard: tuple[int, int], echo: Echo) -> int:
    """Exit 0 when the step ran, 2 (raised as ValueError) when Ray cannot run it, 3 when the server
    refused the run (rerun to go on)."""
    served = bool(job.endpoints)
    # Served: one item per request, many in flight; in-process: 16 items per engine call.
    cfg = RunConfig(step=job.step, intro=INTROS[job.intro], batch_items=job.batch_items or (8 if served else 16),
                    shard=shard, progress=job.progress, max_unit=job.max_unit)
    started = time.time()
    from benchcheck.executors.ray_cluster import cluster_failed, import_ray

    ray = import_ray()
    try:
        summary, ident = run_step_ray(ctx, recipe_for(job), cfg, job.ray_address, echo)
    except (ray.exceptions.RayError, ConnectionError) as e:
        echo(cluster_failed(f"step {job.step}", e))
        return 3
    # append_run_log reads only the engine's name and model: the identity the actors reported.
    append_run_log(Path(job.results), summary, cfg, cast(Engine, ident), list(job.endpoints), started, job.gpus)
    echo_summary(summary, shard, echo, " (ray)")
    return 3 if summary.aborted else 0
