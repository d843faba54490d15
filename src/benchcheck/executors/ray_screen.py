"""Screening on Ray: the driver plans the step's remaining items per unit (under the unit leases),
CPU actors build the requests (frames loaded, decoded, resized and JPEG-encoded there), engine
actors answer, and the driver appends each unit's rows through its ``StepStore`` (docs/ray.md).

The stages are the screening adapter's own pieces (``screen.task.ScoreTask``: ``build`` in the CPU
actors, ``answer`` with its ``--extra-perms`` forwards in the engine actors) and the units its
``StepUnitBook``s, run by ``ray_units`` under the one policy (``unit_loop``): rows, decisions and
retries equal the local runner's whichever executor ran them.
"""

from __future__ import annotations

import asyncio
import os
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

from benchcheck.engines.base import Engine
from benchcheck.engines.capabilities import concurrent_calls
from benchcheck.engines.options import EngineOptions
from benchcheck.executors.ray_cluster import connect_announced, on_engine_resource
from benchcheck.executors.ray_units import run_units
from benchcheck.screen.context import ScreenContext, step_store
from benchcheck.screen.engine_args import CallShape
from benchcheck.screen.runner import RunConfig, RunSummary, my_units, record_missing_frames
from benchcheck.screen.steps import STEPS
from benchcheck.screen.task import ScoreTask, StepUnitBook
from benchcheck.spec import ModelRef

Echo = Callable[[str], None]


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

    @property
    def key_variable(self) -> str | None:
        return self.api_key_env


@dataclass(frozen=True, slots=True)
class EngineIdentity:
    """What rows, the run spec and the call table need of an engine, asked of one engine actor
    before the run."""

    name: str
    model_name: str
    revision: str | None
    concurrent_calls: int = 1


def _identity(recipe: EngineRecipe) -> EngineIdentity:
    engine = recipe.build()
    try:
        return EngineIdentity(engine.name, engine.model_name, engine.revision, concurrent_calls(engine))
    finally:
        asyncio.run(engine.aclose())


def run_step_ray(ctx: ScreenContext, recipe: EngineRecipe, cfg: RunConfig, address: str | None,
                 echo: Echo = print, shape: Callable[[EngineIdentity], CallShape] | None = None,
                 ) -> tuple[RunSummary, EngineIdentity]:
    """Run the remaining items of ``cfg.step`` for this shard on a Ray cluster: the screening adapter
    (``ScoreTask``) in the pipeline's stages, the units (``StepUnitBook``) leased by this driver.
    ``shape``: items per engine-actor call from the engine's identity (default ``cfg.batch_items``)."""
    t0 = time.time()
    placement = connect_announced(address, echo)
    ident = on_engine_resource(_identity, recipe, placement)
    spec = STEPS[cfg.step].run_spec(cfg.intro, ModelRef(ident.model_name, ident.revision))
    store = step_store(ctx.results, cfg.step)
    store.write_spec(spec)
    plan = ctx.plan(cfg.step, include_own=False)
    summary = RunSummary(cfg.step)
    summary.missing_frames = record_missing_frames(ctx.results, cfg.step, plan.missing_frames)
    units = my_units(plan, cfg.shard, cfg.max_unit, ctx.unit_basis())
    task = ScoreTask(spec, cfg.step, ctx.frames, cfg.extra)
    books = [StepUnitBook(spec, u, store, cfg.policy.max_errors) for u in units]
    total = sum(len(u.items) for u in units)
    bar = _Bar(total, f"step {cfg.step} (ray)", cfg.progress)
    batch = shape(ident).at_once if shape is not None else cfg.batch_items
    run = run_units(task, books, recipe, placement, batch, echo, f"step {cfg.step}", bar.update, cfg.policy)
    bar.close()
    summary.add(run.summary)
    for name, who, n in run.held:
        summary.held_units.append(f"{name} ({who})" if who else name)
        summary.held_items += n
    summary.wall_s = round(time.time() - t0, 3)
    echo(run.stats.line(placement))
    return summary, ident


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
