"""``screen --executor ray``: a ``ShardJob`` run by the Ray pipeline, reported as the local one is."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import cast

from benchcheck.engines.base import Engine
from benchcheck.executors.ray_screen import EngineIdentity, EngineRecipe, run_step_ray
from benchcheck.screen.engine_args import CallShape, call_shape, engine_kind
from benchcheck.screen.extra_perms import ExtraPerms
from benchcheck.screen.job import ReadyJob, ShardJob, engine_options
from benchcheck.screen.runner import RunConfig, append_run_log, echo_summary
from benchcheck.screen.steps import INTROS

Echo = Callable[[str], None]


def recipe_for(job: ShardJob) -> EngineRecipe:
    """The job's engine as data for the engine actors; the key stays in the named variable."""
    return EngineRecipe(job.engine, job.step, engine_options(job, with_key=False), job.api_key_env)


def refuse_screen(job: ShardJob) -> str | None:
    """Every option of ``screen`` applies on Ray (``--workers`` of a serial engine is refused once
    the engine's kind is known: ``run_screen``)."""
    return None


def run_screen(r: ReadyJob, echo: Echo) -> int:
    """Exit 0 when the step ran, 2 (raised as ValueError) when Ray cannot run it, 3 when the run
    stopped early (the server unreachable or refusing it, the cluster failed; rerun to go on)."""
    job = r.job

    def shape(ident: EngineIdentity) -> CallShape:  # the one table, by the engine's kind
        kind = engine_kind(bool(job.endpoints), ident.concurrent_calls)
        if kind == "serial" and job.workers is not None:
            # Each engine actor runs one call at a time while its CPU actors prepare the next.
            raise ValueError(f"--workers: engine {ident.name} runs one call at a time, so engine calls in flight "
                             "have no meaning on --executor ray; leave --workers out (--batch-items applies)")
        return call_shape(kind, job.step, job.workers, job.batch_items, len(job.endpoints))

    cfg = RunConfig(step=job.step, intro=INTROS[job.intro], shard=r.shard, progress=job.progress,
                    max_unit=job.max_unit,
                    extra=ExtraPerms(job.extra_perms, job.extra_band) if job.extra_perms > 0 else None)
    started = time.time()
    from benchcheck.executors.ray_cluster import cluster_failed, import_ray

    ray = import_ray()
    try:
        summary, ident = run_step_ray(r.ctx, recipe_for(job), cfg, job.ray_address, echo, shape)
    except (ray.exceptions.RayError, ConnectionError) as e:
        echo(cluster_failed(f"step {job.step}", e))
        return 3
    # append_run_log reads only the engine's name and model: the identity the actors reported.
    append_run_log(Path(job.results), summary, cfg, cast(Engine, ident), list(job.endpoints), started, job.gpus)
    echo_summary(summary, r.shard, echo, " (ray)", r.refused)
    return 3 if summary.aborted else 0
